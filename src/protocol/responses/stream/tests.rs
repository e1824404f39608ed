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
    let w = rw.take_withheld().unwrap();
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

/// A change to one event's JSON data.
type Edit = Box<dyn Fn(&mut Value)>;

/// The stream with the event at `i` (or the final output) changed by `f`
/// on its JSON data.
fn edited(i: usize, f: impl Fn(&mut Value)) -> String {
    let s = stream();
    s.split_inclusive("\n\n")
        .enumerate()
        .map(|(j, b)| {
            if j != i {
                return b.to_string();
            }
            let data = b.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            let mut v: Value = serde_json::from_str(data).unwrap();
            f(&mut v);
            ev(v)
        })
        .collect()
}

/// Runs `s` with the `shell` call denied and `get` allowed: what the
/// client receives must carry neither a denied call nor a call that differs
/// from the one allowed.
fn only_gated(s: &str, why: &str) {
    let mut seen = Vec::new();
    let mut rw = StreamRewriter::new(&opts());
    let out = rw.run_sync(&[s.as_bytes()], |c| {
        seen.push((c.name.clone(), c.arguments.clone()));
        c.name == "get"
    });
    let out = String::from_utf8(out.to_vec()).unwrap();
    for bad in ["rm -rf", "shell", "delete", "evil"] {
        assert!(!out.contains(bad), "{why}: {bad} reached the client: {out}");
    }
    assert_eq!(
        events(&out).last().unwrap().0,
        "response.failed",
        "{why}: {out}"
    );
}

#[test]
fn every_reading_of_a_call_is_the_gated_one() {
    // The final output names a released call with another name, type or
    // call id, or other arguments.
    let last = 14;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "final name",
            Box::new(|v| v["response"]["output"][3]["name"] = json!("delete")),
        ),
        (
            "final namespace",
            Box::new(|v| v["response"]["output"][3]["namespace"] = json!("evil")),
        ),
        (
            "final call id",
            Box::new(|v| v["response"]["output"][3]["call_id"] = json!("call_evil")),
        ),
        (
            "final type",
            Box::new(|v| v["response"]["output"][3]["type"] = json!("custom_tool_call")),
        ),
        (
            "final arguments",
            Box::new(|v| v["response"]["output"][3]["arguments"] = json!("{\"evil\":1}")),
        ),
        (
            "released twice",
            Box::new(|v| {
                let again = v["response"]["output"][3].clone();
                v["response"]["output"].as_array_mut().unwrap().push(again);
            }),
        ),
        (
            "id-less call",
            Box::new(|v| {
                let mut c = v["response"]["output"][3].clone();
                c.as_object_mut().unwrap().remove("id");
                c["name"] = json!("delete");
                v["response"]["output"].as_array_mut().unwrap().push(c);
            }),
        ),
        (
            "Output beside output",
            Box::new(|v| {
                let mut evil = v["response"]["output"].clone();
                evil[3]["name"] = json!("delete");
                v["response"]["Output"] = evil;
            }),
        ),
    ];
    for (why, f) in cases {
        only_gated(&edited(last, f), why);
    }
    // The item as added says another call than the item as done.
    let added = 11;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "added name",
            Box::new(|v| v["item"]["name"] = json!("delete")),
        ),
        (
            "added call id",
            Box::new(|v| v["item"]["call_id"] = json!("call_evil")),
        ),
        (
            "added namespace",
            Box::new(|v| v["item"]["namespace"] = json!("evil")),
        ),
        (
            "added arguments",
            Box::new(|v| v["item"]["arguments"] = json!("{\"evil\":1}")),
        ),
        (
            "added id-less",
            Box::new(|v| {
                v["item"].as_object_mut().unwrap().remove("id");
                v["item"]["name"] = json!("delete");
            }),
        ),
    ];
    for (why, f) in cases {
        only_gated(&edited(added, f), why);
    }
    // Arguments that only a reader of the deltas sees.
    only_gated(
        &edited(12, |v| v["delta"] = json!("{\"evil\":1}")),
        "deltas",
    );
}

#[test]
fn events_of_a_decided_call_fail_closed() {
    let s = stream();
    let blocks: Vec<&str> = s.split_inclusive("\n\n").collect();
    // After the `get` call was decided, a delta names its place only, or its id.
    for late in [
        json!({"type": "response.function_call_arguments.delta", "output_index": 3, "delta": "x", "sequence_number": 40}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_2", "delta": "x", "sequence_number": 40}),
        json!({"type": "response.function_call_arguments.delta", "delta": "x", "sequence_number": 40}),
        json!({"type": "response.output_text.delta", "output_index": 2, "content_index": 0, "delta": "x", "sequence_number": 40}),
    ] {
        let mut s = blocks[..14].concat();
        s.push_str(&ev(late.clone()));
        s.push_str(blocks[14]);
        only_gated(&s, &late.to_string());
    }
}

#[test]
fn what_a_stream_keeps_is_charged_and_bounded() {
    // Sixty calls whose final items are far over the call limit: none of
    // their arguments are kept, and what is held stays within the budget.
    let big = "x".repeat(64 * 1024);
    let mut s = ev(
        json!({"type": "response.created", "sequence_number": 0, "response": resp("in_progress", json!([]))}),
    );
    for i in 0..60u64 {
        let item = |args: &str, status: &str| json!({"id": format!("fc_{i}"), "type": "function_call", "status": status, "arguments": args, "call_id": format!("c{i}"), "name": "get"});
        s.push_str(&ev(json!({"type": "response.output_item.added", "output_index": i, "item": item("", "in_progress")})));
        s.push_str(&ev(json!({"type": "response.output_item.done", "output_index": i, "item": item(&big, "completed")})));
    }
    let mut o = opts();
    o.max_call_bytes = 1024;
    o.max_held_bytes = 16 * 1024;
    let mut rw = StreamRewriter::new(&o);
    let mut out = BytesMut::new();
    rw.push(s.as_bytes());
    let mut peak = 0;
    loop {
        let step = rw.process(&mut out);
        peak = peak.max(rw.held_bytes());
        match step {
            Ok(Step::Gate) => {
                let n = rw.pending().len();
                rw.resolve(&vec![Release::Allow; n], &mut out);
            }
            _ => break,
        }
    }
    assert!(peak < 64 * 1024, "held {peak} bytes");
    assert!(rw.batch.iter().all(|s| s.oversized && s.text.is_empty()));
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

/// The calls each kind of client reads from a stream: openai-python's
/// snapshot (an item's first event plus its deltas, by `output_index`), the
/// items of `response.output_item.done`, and every envelope's `output`
/// (the Agents SDK's reading). Each as `(name with namespace, call id,
/// arguments)`.
fn readings(out: &str) -> Vec<(String, String, String)> {
    let key = |i: &Value| {
        let name = i["name"].as_str().unwrap_or("").to_string();
        let name = match i["namespace"].as_str() {
            Some(ns) => format!("{ns}.{name}"),
            None => name,
        };
        (
            name,
            i["call_id"].as_str().unwrap_or("").to_string(),
            i["arguments"].as_str().unwrap_or("").to_string(),
        )
    };
    let mut snapshot: Vec<Value> = Vec::new();
    let mut read = Vec::new();
    for (_, e) in events(out) {
        let ty = e["type"].as_str().unwrap_or("");
        match ty {
            "response.output_item.added" => snapshot.push(e["item"].clone()),
            "response.function_call_arguments.delta" => {
                let at = e["output_index"].as_u64().unwrap_or(u64::MAX) as usize;
                if let Some(i) = snapshot
                    .get_mut(at)
                    .filter(|i| i["type"] == "function_call")
                {
                    let args = format!(
                        "{}{}",
                        i["arguments"].as_str().unwrap_or(""),
                        e["delta"].as_str().unwrap_or("")
                    );
                    i["arguments"] = json!(args);
                }
            }
            "response.output_item.done" if e["item"]["type"] == "function_call" => {
                read.push(key(&e["item"]))
            }
            _ => {}
        }
        for i in e["response"]["output"].as_array().into_iter().flatten() {
            if i["type"] == "function_call" {
                read.push(key(i));
            }
        }
    }
    // The snapshot at the end (arguments complete), and the names it ever showed.
    read.extend(
        snapshot
            .iter()
            .filter(|i| i["type"] == "function_call")
            .map(key),
    );
    read
}

/// One generated call and what a hostile provider changes about it.
#[derive(Debug, Clone)]
struct GenCall {
    allowed: bool,
    args: String,
    /// 0: consistent; 1..=9: one reading doctored.
    twist: u8,
}

fn gen_stream(calls: &[GenCall]) -> String {
    let mut evs =
        vec![json!({"type": "response.created", "response": resp("in_progress", json!([]))})];
    let mut fin = Vec::new();
    for (n, c) in calls.iter().enumerate() {
        let oi = n as u64;
        let (id, call_id) = (format!("fc_{n}"), format!("call_{n}"));
        let name = if c.allowed { "ok" } else { "bad" };
        let item = |name: &str, args: &str, status: &str| json!({"id": id, "type": "function_call", "status": status, "call_id": call_id, "name": name, "arguments": args});
        let mut added = item(name, "", "in_progress");
        let mut deltas = vec![
            c.args[..c.args.len() / 2].to_string(),
            c.args[c.args.len() / 2..].to_string(),
        ];
        let done = item(name, &c.args, "completed");
        let mut last = done.clone();
        match c.twist {
            1 => added["name"] = json!("bad"),
            2 => added["arguments"] = json!("{\"x\":"),
            3 => deltas[0] = "{\"evil\":1,".to_string() + &deltas[0],
            4 => last["name"] = json!("bad"),
            5 => last["arguments"] = json!("{\"evil\":1}"),
            6 => last["call_id"] = json!("call_evil"),
            7 => last["namespace"] = json!("ns"),
            _ => {}
        }
        evs.push(json!({"type": "response.output_item.added", "output_index": oi, "item": added}));
        for d in &deltas {
            evs.push(json!({"type": "response.function_call_arguments.delta", "output_index": oi, "item_id": id, "delta": d}));
        }
        evs.push(json!({"type": "response.function_call_arguments.done", "output_index": oi, "item_id": id, "arguments": c.args}));
        evs.push(json!({"type": "response.output_item.done", "output_index": oi, "item": done}));
        fin.push(last.clone());
        match c.twist {
            // Shown twice, or once more without an id, in the summary.
            8 => fin.push(last),
            9 => {
                let mut idless = last;
                idless.as_object_mut().unwrap().remove("id");
                idless["name"] = json!("bad");
                fin.push(idless);
            }
            // An argument delta after the call was decided, by place only.
            10 => evs.push(json!({"type": "response.function_call_arguments.delta", "output_index": oi, "delta": "x"})),
            _ => {}
        }
    }
    evs.push(json!({"type": "response.completed", "response": resp("completed", json!(fin))}));
    evs.into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            e["sequence_number"] = json!(i);
            ev(e)
        })
        .collect()
}

impl GenCall {
    /// Whether a client could read this call two ways: the stream must fail.
    /// A doctored name or summary of a withheld call changes nothing a
    /// client sees (the call is replaced wherever it shows).
    fn must_fail(&self) -> bool {
        match self.twist {
            2 | 3 | 8 | 9 | 10 => true,
            1 | 4..=7 => self.allowed,
            _ => false,
        }
    }
}

use proptest::prelude::*;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
        std::env::var("TOOLGATE_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(128)
    ))]

    /// Any mix of consistent and doctored calls, split anywhere: every
    /// reader sees only calls the gate allowed, exactly as allowed, and a
    /// stream with nothing doctored goes through whole.
    #[test]
    fn every_reader_sees_only_gated_calls(
        calls in proptest::collection::vec(
            (proptest::bool::ANY, "[a-z]{0,6}", 0u8..14).prop_map(|(allowed, v, twist)| GenCall {
                allowed,
                args: format!("{{\"v\":\"{v}\"}}"),
                // Half of the draws leave the call as it is.
                twist: if twist > 10 { 0 } else { twist },
            }),
            1..4,
        ),
        cuts in proptest::collection::vec(0usize..100_000, 0..8),
    ) {
        let s = gen_stream(&calls);
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (s.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut at = 0;
        for p in points {
            chunks.push(&s.as_bytes()[at..p]);
            at = p;
        }
        chunks.push(&s.as_bytes()[at..]);
        let mut allowed = Vec::new();
        let mut rw = StreamRewriter::new(&opts());
        let out = rw.run_sync(&chunks, |c| {
            let ok = c.name == "ok";
            if ok {
                allowed.push((c.name.clone(), c.id.clone(), c.arguments.clone()));
            }
            ok
        });
        let out = String::from_utf8(out.to_vec()).unwrap();
        for r in readings(&out) {
            prop_assert!(allowed.contains(&r), "{:?} read but not allowed ({:?}): {}", r, allowed, out);
        }
        let failed = events(&out).iter().any(|(n, _)| n == "error");
        // Every second reading is caught, and nothing else fails.
        prop_assert_eq!(failed, calls.iter().any(GenCall::must_fail), "{}", out);
        if !failed {
            let want = calls.iter().filter(|c| c.allowed).count();
            prop_assert_eq!(allowed.len(), want);
        }
    }
}
