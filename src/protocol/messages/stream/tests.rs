//! Unit tests of the Messages streaming rewriter over small hand-written streams.

use super::*;
use crate::call::Kind;
use crate::protocol::sync_driver::RunSync;
use serde_json::json;

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

fn start_msg() -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m", "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 1}}})
}

fn block_start(i: u64, block: Value) -> Value {
    json!({"type": "content_block_start", "index": i, "content_block": block})
}

fn delta(i: u64, d: Value) -> Value {
    json!({"type": "content_block_delta", "index": i, "delta": d})
}

fn stop(i: u64) -> Value {
    json!({"type": "content_block_stop", "index": i})
}

fn tool(i: u64, id: &str, name: &str, parts: &[&str]) -> Vec<Value> {
    let mut v = vec![block_start(
        i,
        json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
    )];
    for p in parts {
        v.push(delta(
            i,
            json!({"type": "input_json_delta", "partial_json": p}),
        ));
    }
    v.push(stop(i));
    v
}

fn end(reason: &str) -> Vec<Value> {
    vec![
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null}, "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ]
}

/// Text, then a `shell` call and a `get` call, a ping between.
fn stream() -> String {
    let mut v = vec![
        start_msg(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Let me look."})),
        stop(0),
    ];
    v.extend(tool(
        1,
        "toolu_1",
        "shell",
        &["", "{\"cmd\":", " \"rm -rf /\"}"],
    ));
    v.push(json!({"type": "ping"}));
    v.extend(tool(2, "toolu_2", "get", &["", "{}"]));
    v.extend(end("tool_use"));
    v.into_iter().map(ev).collect()
}

fn indices(out: &str) -> Vec<(String, u64)> {
    events(out)
        .iter()
        .filter_map(|(n, v)| Some((n.clone(), v["index"].as_u64()?)))
        .collect()
}

#[test]
fn allow_all_is_byte_identical() {
    let s = stream();
    assert_eq!(run(&s, &[]), s);
}

#[test]
fn a_withheld_call_is_removed_and_later_blocks_renumbered() {
    let out = run(&stream(), &["shell"]);
    assert!(!out.contains("toolu_1") && !out.contains("rm -rf"), "{out}");
    let starts: Vec<(u64, String)> = events(&out)
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, v)| {
            (
                v["index"].as_u64().unwrap(),
                v["content_block"]["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(starts, [(0, "text".into()), (1, "tool_use".into())]);
    assert!(indices(&out).iter().all(|(_, i)| *i <= 1), "{out}");
    let last = events(&out);
    let md = last.iter().find(|(n, _)| n == "message_delta").unwrap();
    assert_eq!(md.1["delta"]["stop_reason"], "tool_use");
    assert!(!out.contains("NEUTRAL"));
}

#[test]
fn when_every_call_is_withheld_the_turn_ends_with_the_neutral_text() {
    let out = run(&stream(), &["shell", "get"]);
    let evs = events(&out);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(evs[5].1["index"], 1);
    assert_eq!(evs[6].1["delta"]["text"], "NEUTRAL");
    assert_eq!(evs[8].1["delta"]["stop_reason"], "end_turn");
    assert_eq!(evs[8].1["usage"]["output_tokens"], 9);
}

#[test]
fn calls_are_assembled_from_their_fragments() {
    let mut seen = Vec::new();
    let mut rw = StreamRewriter::new(&opts());
    rw.run_sync(&[stream().as_bytes()], |c| {
        seen.push((
            c.id.clone(),
            c.name.clone(),
            c.arguments.clone(),
            c.kind.clone(),
        ));
        true
    });
    assert_eq!(
        seen,
        [
            (
                "toolu_1".into(),
                "shell".into(),
                "{\"cmd\": \"rm -rf /\"}".into(),
                Kind::Function
            ),
            ("toolu_2".into(), "get".into(), "{}".into(), Kind::Function)
        ]
    );
    // A call with no fragment at all, or only an empty one, has input `{}`.
    let mut v = vec![start_msg()];
    v.extend(tool(0, "toolu_3", "ping_tool", &[]));
    v.extend(end("tool_use"));
    let mut args = Vec::new();
    let mut rw = StreamRewriter::new(&opts());
    let s: String = v.into_iter().map(ev).collect();
    rw.run_sync(&[s.as_bytes()], |c| {
        args.push(c.arguments.clone());
        true
    });
    assert_eq!(args, ["{}"]);
}

#[test]
fn input_in_the_start_alone_or_repeated_by_the_fragments_is_read() {
    let call = |start: Value, parts: &[&str]| {
        let mut v = vec![start_msg()];
        v.push(block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_s", "name": "get", "input": start}),
        ));
        for p in parts {
            v.push(delta(
                0,
                json!({"type": "input_json_delta", "partial_json": p}),
            ));
        }
        v.push(stop(0));
        v.extend(end("tool_use"));
        let s: String = v.into_iter().map(ev).collect();
        let mut args = Vec::new();
        let mut rw = StreamRewriter::new(&opts());
        let out = rw.run_sync(&[s.as_bytes()], |c| {
            args.push(c.arguments.clone());
            true
        });
        (args, String::from_utf8_lossy(&out).into_owned())
    };
    let (args, _) = call(json!({"q": "a"}), &[]);
    assert_eq!(args, ["{\"q\":\"a\"}"]);
    let (args, _) = call(json!({"q": "a"}), &["{\"q\": ", "\"a\"}"]);
    assert_eq!(args, ["{\"q\": \"a\"}"]);
    let (args, out) = call(json!({"q": "a"}), &["{\"q\": \"b\"}"]);
    assert!(args.is_empty(), "no call gated: {args:?}");
    assert!(
        out.contains("event: error") && !out.contains("toolu_s"),
        "{out}"
    );
}

#[test]
fn calls_in_a_row_are_gated_together() {
    let mut batches = Vec::new();
    let mut rw = StreamRewriter::new(&opts());
    let s = stream();
    rw.push(s.as_bytes());
    let mut out = BytesMut::new();
    loop {
        match rw.process(&mut out).unwrap() {
            Step::NeedMore => break,
            Step::Gate => {
                batches.push(rw.pending().len());
                rw.resolve(&[Release::Allow, Release::Allow], &mut out);
            }
        }
    }
    assert_eq!(batches, [2]);
}

#[test]
fn text_goes_out_before_a_call_is_held() {
    let s = stream();
    let cut = s.find("\"toolu_1\"").unwrap();
    let mut rw = StreamRewriter::new(&opts());
    rw.push(&s.as_bytes()[..cut]);
    let mut out = BytesMut::new();
    assert_eq!(rw.process(&mut out).unwrap(), Step::NeedMore);
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("Let me look.") && text.contains("content_block_stop"));
}

#[test]
fn any_split_gives_the_same_output() {
    let s = stream();
    let whole = run(&s, &["shell"]);
    for cut in (1..s.len()).step_by(7) {
        let mut rw = StreamRewriter::new(&opts());
        let (a, b) = s.as_bytes().split_at(cut);
        let out = rw.run_sync(&[a, b], |c| c.name != "shell");
        assert_eq!(String::from_utf8_lossy(&out), whole, "cut at {cut}");
    }
}

#[test]
fn an_event_without_a_name_is_written_with_one() {
    let s = stream().replacen("event: ping\n", "", 1);
    let out = run(&s, &[]);
    assert_eq!(out, stream());
}

#[test]
fn empty_events_and_a_chat_style_done_carry_nothing() {
    let s = stream();
    let quirky = format!(
        "{}event: ping\ndata: \n\n{}data: [DONE]\n\n",
        &s[..s.find("event: ping").unwrap()],
        &s[s.find("event: ping").unwrap()..]
    );
    assert_eq!(run(&quirky, &[]), s);
    // `[DONE]` while a call is held is the stream ending too early.
    let cut = s.find("event: ping").unwrap();
    let early = format!("{}data: [DONE]\n\n", &s[..cut]);
    let out = run(&early, &[]);
    assert!(
        out.ends_with("\n\n") && out.contains("event: error"),
        "{out}"
    );
    assert!(!out.contains("toolu_1"), "{out}");
}

#[test]
fn provider_run_calls_pass_and_are_reported() {
    let mut v = vec![
        start_msg(),
        block_start(
            0,
            json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
        ),
        delta(
            0,
            json!({"type": "input_json_delta", "partial_json": "{\"query\":\"q\"}"}),
        ),
        stop(0),
        block_start(
            1,
            json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}),
        ),
        stop(1),
    ];
    v.extend(tool(2, "toolu_c", "shell", &["{}"]));
    v.extend(end("tool_use"));
    let s: String = v.into_iter().map(ev).collect();
    let mut rw = StreamRewriter::new(&opts());
    let out = rw.run_sync(&[s.as_bytes()], |c| c.name != "shell");
    let out = String::from_utf8(out.to_vec()).unwrap();
    assert!(out.contains("srvtoolu_1") && out.contains("query"));
    assert!(!out.contains("toolu_c"));
    let hosted: Vec<Call> = std::iter::from_fn(|| rw.poll())
        .filter_map(|r| match r {
            crate::protocol::Update::Hosted(c) => Some(c),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(hosted.len(), 1);
    assert_eq!(
        (hosted[0].id.as_str(), hosted[0].name.as_str()),
        ("srvtoolu_1", "web_search")
    );
    assert!(out.contains("NEUTRAL"), "{out}");
}

#[test]
fn a_call_type_in_another_case_is_held_as_a_call_of_another_kind() {
    let mut v = vec![start_msg()];
    v.push(block_start(
        0,
        json!({"type": "Tool_Use", "id": "toolu_x", "name": "shell", "input": {}}),
    ));
    v.push(stop(0));
    v.extend(end("tool_use"));
    let s: String = v.into_iter().map(ev).collect();
    let mut kinds = Vec::new();
    let mut rw = StreamRewriter::new(&opts());
    let out = rw.run_sync(&[s.as_bytes()], |c| {
        kinds.push(c.kind.clone());
        false
    });
    assert_eq!(kinds, [Kind::Other("Tool_Use".into())]);
    assert!(!String::from_utf8_lossy(&out).contains("toolu_x"));
}

#[test]
fn an_oversized_call_is_withheld_without_its_events() {
    let mut o = opts();
    o.max_call_bytes = 16;
    let mut v = vec![start_msg()];
    v.extend(tool(
        0,
        "toolu_big",
        "get",
        &["{\"a\":\"", &"x".repeat(64), "\"}"],
    ));
    v.extend(end("tool_use"));
    let s: String = v.into_iter().map(ev).collect();
    let mut rw = StreamRewriter::new(&o);
    let mut oversized = Vec::new();
    let out = rw.run_sync(&[s.as_bytes()], |c| {
        oversized.push(c.oversized);
        true
    });
    assert_eq!(oversized, [true]);
    let out = String::from_utf8_lossy(&out);
    assert!(
        !out.contains("toolu_big") && out.contains("NEUTRAL"),
        "{out}"
    );
}

/// The stream fails closed: it ends with an error event, and no call block
/// (nor a stop reason saying one came) reached the agent.
fn fails_closed(what: &str, s: &str) {
    let out = run(s, &[]);
    let evs = events(&out);
    let last = evs.last().unwrap();
    assert_eq!(last.0, "error", "{what}: {out}");
    assert_eq!(last.1["type"], "error", "{what}");
    assert!(last.1["error"]["type"].is_string(), "{what}");
    assert!(!out.contains("\"tool_use\""), "{what}: {out}");
}

#[test]
fn broken_streams_fail_closed() {
    let s = stream();
    let ping = s.find("event: ping").unwrap();
    let first_call = s[..s.find("toolu_1").unwrap()].rfind("event:").unwrap();
    let get_start = |i: u64| {
        ev(block_start(
            i,
            json!({"type": "tool_use", "id": "toolu_2", "name": "get", "input": {}}),
        ))
    };
    let cases: Vec<(&str, String)> = vec![
        (
            "an error event while a call is held",
            format!(
                "{}event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}}}\n\n",
                &s[..ping]
            ),
        ),
        ("a stream cut inside a call", s[..ping - 40].to_string()),
        ("a call with no content_block_stop", s.replacen(&ev(stop(1)), "", 1)),
        (
            "a stream cut after complete calls",
            s[..s.find("event: message_delta").unwrap()].to_string(),
        ),
        (
            "an event name that is not the type",
            s.replacen(&ev(stop(1)), &format!("event: ping\ndata: {}\n\n", stop(1)), 1),
        ),
        (
            "a repeated key",
            s.replacen("\"name\":\"shell\"", "\"name\":\"get\",\"name\":\"shell\"", 1),
        ),
        (
            "a key that folds to a known one",
            s.replacen("\"name\":\"shell\"", "\"name\":\"get\",\"Name\":\"shell\"", 1),
        ),
        (
            "a block index that repeats",
            s.replacen(&get_start(2), &get_start(1), 1),
        ),
        (
            "a message_start that holds a call",
            s.replacen(
                "\"content\":[]",
                "\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"shell\",\"input\":{}}]",
                1,
            ),
        ),
        (
            "input in the start and in the deltas",
            s.replacen(
                "\"id\":\"toolu_1\",\"input\":{}",
                "\"id\":\"toolu_1\",\"input\":{\"cmd\":\"ls\"}",
                1,
            ),
        ),
        (
            "data that is not JSON",
            format!("{}data: {{nope\n\n{}", &s[..first_call], &s[first_call..]),
        ),
        (
            "an event type in another case",
            format!(
                "{}data: {{\"type\":\"Content_Block_Start\",\"index\":5}}\n\n{}",
                &s[..first_call],
                &s[first_call..]
            ),
        ),
        (
            "a delta that is not input on a call",
            s.replacen(
                "{\"partial_json\":\"{\\\"cmd\\\":\",\"type\":\"input_json_delta\"}",
                "{\"text\":\"x\",\"type\":\"text_delta\"}",
                1,
            ),
        ),
    ];
    for (what, case) in cases {
        assert_ne!(case, s, "{what}: the case changed nothing");
        fails_closed(what, &case);
    }
}

#[test]
fn an_error_event_is_generic_unless_passed_through() {
    let s = format!(
        "{}event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"internal detail\"}}}}\n\n",
        ev(start_msg())
    );
    let out = run(&s, &[]);
    let evs = events(&out);
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[1].1["error"]["type"], "overloaded_error");
    assert!(!out.contains("internal detail"));
}
