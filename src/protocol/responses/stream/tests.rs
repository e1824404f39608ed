//! Unit tests of the Responses streaming rewriter over small hand-written streams.

use super::*;
use crate::protocol::sync_driver::RunSync;

fn opts() -> Options {
    crate::protocol::sync_driver::testing::options()
}

fn run(input: &str, deny: &[&str]) -> String {
    crate::protocol::sync_driver::testing::run_denying(
        &mut StreamRewriter::new(&opts()),
        input,
        deny,
    )
}

use crate::protocol::sync_driver::testing::named_events as events;

fn ev(v: Value) -> String {
    format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap())
}

fn resp(status: &str, output: Value) -> Value {
    json!({"id": "resp_1", "object": "response", "status": status, "output": output})
}

/// Reasoning, a message, then a `shell` call and a `get` call (with sequence numbers).
fn stream() -> String {
    let fc = |id: &str, call: &str, name: &str, args: &str, status: &str| json!({"id": id, "type": "function_call", "status": status, "arguments": args, "call_id": call, "name": name});
    let msg = json!({"id": "msg_a", "type": "message", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "annotations": [], "text": "Hi"}]});
    let rs = json!({"id": "rs_1", "type": "reasoning", "summary": []});
    let events = vec![
        json!({"type": "response.created", "response": resp("in_progress", json!([]))}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": rs}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": rs}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "msg_a", "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
        json!({"type": "response.output_text.delta", "output_index": 1, "item_id": "msg_a", "content_index": 0, "delta": "Hi"}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": msg}),
        json!({"type": "response.output_item.added", "output_index": 2, "item": fc("fc_1", "call_1", "shell", "", "in_progress")}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 2, "item_id": "fc_1", "delta": "{\"cmd\":"}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 2, "item_id": "fc_1", "delta": "\"rm -rf /\"}"}),
        json!({"type": "response.function_call_arguments.done", "output_index": 2, "item_id": "fc_1", "arguments": "{\"cmd\":\"rm -rf /\"}"}),
        json!({"type": "response.output_item.done", "output_index": 2, "item": fc("fc_1", "call_1", "shell", "{\"cmd\":\"rm -rf /\"}", "completed")}),
        json!({"type": "response.output_item.added", "output_index": 3, "item": fc("fc_2", "call_2", "get", "", "in_progress")}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 3, "item_id": "fc_2", "delta": "{}"}),
        json!({"type": "response.output_item.done", "output_index": 3, "item": fc("fc_2", "call_2", "get", "{}", "completed")}),
        json!({"type": "response.completed", "response": resp("completed", json!([rs, msg, fc("fc_1", "call_1", "shell", "{\"cmd\":\"rm -rf /\"}", "completed"), fc("fc_2", "call_2", "get", "{}", "completed")]))}),
    ];
    events
        .into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            e["sequence_number"] = json!(i);
            ev(e)
        })
        .collect()
}

fn seqs_increase(evs: &[(String, Value)]) {
    let seqs: Vec<u64> = evs
        .iter()
        .filter_map(|(_, d)| d["sequence_number"].as_u64())
        .collect();
    assert_eq!(seqs.len(), evs.len(), "every event keeps a number");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

#[test]
fn allow_all_is_byte_identical() {
    let s = stream();
    assert_eq!(run(&s, &[]), s);
}

#[test]
fn a_withheld_call_becomes_a_message_at_its_index() {
    let out = run(&stream(), &["shell"]);
    assert!(
        !out.contains("rm -rf") && !out.contains("call_1") && !out.contains("fc_1"),
        "{out}"
    );
    let evs = events(&out);
    seqs_increase(&evs);
    for (name, d) in &evs {
        assert_eq!(name, d["type"].as_str().unwrap());
    }
    let at2: Vec<&str> = evs
        .iter()
        .filter(|(_, d)| d["output_index"] == 2)
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        at2,
        [
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done"
        ]
    );
    let done = &evs
        .iter()
        .find(|(n, d)| n == "response.output_item.done" && d["output_index"] == 2)
        .unwrap()
        .1;
    assert_eq!(done["item"]["content"][0]["text"], "NEUTRAL");
    let completed = &evs.last().unwrap().1;
    assert_eq!(completed["type"], "response.completed");
    let output = completed["response"]["output"].as_array().unwrap();
    let types: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["reasoning", "message", "message", "function_call"]);
    assert_eq!(
        output[2]["id"], done["item"]["id"],
        "the same message in the final output"
    );
    assert_eq!(output[3]["arguments"], "{}", "the allowed call is intact");
}

#[test]
fn reasoning_that_led_only_to_withheld_calls_leaves_the_final_output() {
    let out = run(&stream(), &["shell", "get"]);
    let evs = events(&out);
    seqs_increase(&evs);
    let output = evs.last().unwrap().1["response"]["output"].clone();
    let types: Vec<&str> = output
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["reasoning", "message", "message", "message"],
        "the reasoning led to a message, so it stays"
    );
    let mut rw = StreamRewriter::new(&opts());
    rw.run_sync(&[stream().as_bytes()], |c| c.name != "shell");
    let w = std::iter::from_fn(|| rw.poll())
        .find_map(|r| match r {
            crate::protocol::Update::Withheld(w) => Some(w),
            _ => None,
        })
        .unwrap();
    assert_eq!((w.response_id.as_str(), w.calls.len()), ("resp_1", 1));
    assert_eq!(
        w.calls[0],
        ("call_1".to_string(), "function_call".to_string())
    );
}

#[test]
fn any_split_of_the_bytes_gives_the_same_output() {
    let s = stream();
    let whole = run(&s, &["shell"]);
    for size in [1, 7, 64] {
        let chunks: Vec<&[u8]> = s.as_bytes().chunks(size).collect();
        let mut rw = StreamRewriter::new(&opts());
        let out = rw.run_sync(&chunks, |c| c.name != "shell");
        assert_eq!(
            String::from_utf8(out.to_vec()).unwrap(),
            whole,
            "chunks of {size}"
        );
    }
}

#[test]
fn data_before_event_and_no_sequence_numbers_work() {
    let s: String = stream()
        .split("\n\n")
        .filter(|b| !b.is_empty())
        .map(|b| {
            let (e, d) = b.split_once('\n').unwrap();
            let mut v: Value = serde_json::from_str(d.strip_prefix("data: ").unwrap()).unwrap();
            v.as_object_mut().unwrap().remove("sequence_number");
            format!("data: {v}\n{e}\n\n")
        })
        .collect();
    assert_eq!(run(&s, &[]), s);
    let evs = events(&run(&s, &["shell"]));
    assert!(evs.iter().all(|(_, d)| d.get("sequence_number").is_none()));
    assert!(evs.iter().any(|(_, d)| d["delta"] == "NEUTRAL"));
}

fn fails_closed(s: &str, why: &str) {
    let out = run(s, &[]);
    assert!(!out.contains("rm -rf"), "{why}: {out}");
    let evs = events(&out);
    let errors: Vec<_> = evs.iter().filter(|(n, _)| n == "error").collect();
    assert_eq!(errors.len(), 1, "{why}: {out}");
    assert_eq!(evs.last().unwrap().0, "response.failed", "{why}: {out}");
}

#[test]
fn broken_streams_fail_closed_with_a_well_formed_end() {
    let s = stream();
    let blocks: Vec<&str> = s.split_inclusive("\n\n").collect();
    // Truncated inside the call, or before the response ended.
    fails_closed(&blocks[..9].concat(), "truncated in a call");
    fails_closed(&blocks[..11].concat(), "truncated after the call");
    // A call item that never gets its done event.
    let no_done: String = blocks
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 10)
        .map(|(_, b)| *b)
        .collect();
    fails_closed(&no_done, "no output_item.done");
    // Deltas that say something else than the final item.
    fails_closed(
        &s.replacen(
            "\"delta\":\"{\\\"cmd\\\":\"",
            "\"delta\":\"{\\\"cmd\\\": \"",
            1,
        ),
        "deltas differ",
    );
    // An event whose name is not its type.
    fails_closed(
        &s.replacen(
            "event: response.function_call_arguments.delta",
            "event: response.output_text.delta",
            1,
        ),
        "name differs",
    );
    // A repeated key.
    fails_closed(
        &s.replacen(
            "\"output_index\":2",
            "\"output_index\":2,\"output_index\":1",
            1,
        ),
        "repeated key",
    );
    // An upstream error or failure mid-call.
    let mut err = blocks[..9].concat();
    err.push_str("event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n");
    fails_closed(&err, "error event");
    let out = run(&err, &[]);
    assert!(!out.contains("boom"), "the upstream's message is not shown");
    let mut failed = blocks[..9].concat();
    failed.push_str(&ev(
        json!({"type": "response.failed", "response": resp("failed", json!([]))}),
    ));
    fails_closed(&failed, "response.failed mid-call");
    // A response snapshot with the open call in its output, mid-call.
    let mut snapshot = blocks[..9].concat();
    snapshot.push_str(&ev(json!({"type": "response.in_progress", "response": resp("in_progress", json!([{"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"cmd\":\"rm -rf /\"}"}]))})));
    snapshot.push_str(&blocks[9..].concat());
    fails_closed(&snapshot, "response snapshot mid-call");
}

#[test]
fn an_item_type_spelled_like_a_call_is_held_and_rejected() {
    // Whole in its items (no deltas): held, gated and rejected.
    for t in [
        "Function_Call",
        "function_call ",
        "tool_use",
        "brand_new_item",
    ] {
        let s: String = stream()
            .split_inclusive("\n\n")
            .filter(|b| !b.contains("function_call_arguments"))
            .collect::<String>()
            .replace(
                "\"arguments\":\"\",",
                "\"arguments\":\"{\\\"cmd\\\":\\\"rm -rf /\\\"}\",",
            )
            .replace("\"type\":\"function_call\"", &format!("\"type\":\"{t}\""));
        let mut kinds = Vec::new();
        let mut rw = StreamRewriter::new(&opts());
        // As the integrity gate does: a kind toolgate cannot carry is rejected.
        let out = rw.run_sync(&[s.as_bytes()], |c| {
            kinds.push(c.kind.clone());
            !matches!(c.kind, crate::call::Kind::Other(_))
        });
        let out = String::from_utf8(out.to_vec()).unwrap();
        assert_eq!(
            kinds.len(),
            2,
            "{t:?}: both calls were held and gated: {out}"
        );
        assert!(!out.contains("rm -rf") && !out.contains(t), "{out}");
    }
    // With argument deltas, which belong to no such item: the stream fails.
    let s = stream().replace("\"type\":\"function_call\"", "\"type\":\"Function_Call\"");
    fails_closed(&s, "deltas of an unknown item type");
}

#[test]
fn a_call_only_in_the_final_output_fails_closed() {
    let s = stream();
    let blocks: Vec<&str> = s.split_inclusive("\n\n").collect();
    // Drop the streamed events of the `get` call; the final output still has it.
    let sneaky: String = blocks
        .iter()
        .enumerate()
        .filter(|(i, _)| !(11..=13).contains(i))
        .map(|(_, b)| *b)
        .collect();
    let out = run(&sneaky, &[]);
    assert!(!out.contains("call_2"), "{out}");
    assert_eq!(events(&out).last().unwrap().0, "response.failed", "{out}");
}

#[test]
fn text_passes_at_once() {
    let s = stream();
    let blocks: Vec<&str> = s.split_inclusive("\n\n").collect();
    let mut rw = StreamRewriter::new(&opts());
    let mut out = BytesMut::new();
    rw.push(blocks[..6].concat().as_bytes());
    assert_eq!(rw.process(&mut out).unwrap(), Step::NeedMore);
    assert_eq!(&out[..], blocks[..6].concat().as_bytes());
    rw.push(blocks[6..11].concat().as_bytes());
    assert_eq!(rw.process(&mut out).unwrap(), Step::NeedMore);
    assert_eq!(out.len(), blocks[..6].concat().len(), "the call is held");
}

#[test]
fn an_item_with_a_key_spelled_like_a_call_key_fails_closed_in_any_event() {
    // A message item that a case-blind reader could take for a call.
    let item = r#"{"id":"msg_x","type":"message","TYPE":"function_call","Name":"shell","Arguments":"{\"cmd\":\"rm -rf /\"}","call_id":"c9","role":"assistant","content":[]}"#;
    let added = format!("event: response.output_item.added\ndata: {{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{item}}}\n\n");
    let done = format!("event: response.output_item.done\ndata: {{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{item}}}\n\n");
    let created =
        ev(json!({"type": "response.created", "response": resp("in_progress", json!([]))}));
    let completed = format!("event: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[{item}]}}}}\n\n");
    for (s, why) in [
        (format!("{created}{added}{done}"), "streamed item"),
        (format!("{created}{completed}"), "item in the final output"),
    ] {
        fails_closed(&s, why);
    }
}

// One reading for every client: each place a call can be read from.
mod readings;
