//! Unit tests of the envelope reader: it takes what the whole-tree path
//! would pass and leads to the same output, and leaves the rest to it.

use serde_json::json;

use super::*;
use crate::call::Call;
use crate::protocol::sync_driver::RunSync;
use crate::protocol::Rewriter;

fn rw(typed: bool) -> StreamRewriter {
    let r = StreamRewriter::new(&crate::protocol::sync_driver::testing::options());
    if typed {
        r
    } else {
        r.whole_tree_only()
    }
}

fn ev(v: &Value) -> String {
    format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap_or(""))
}

/// The response a real provider echoes: instructions and tools.
fn response(status: &str, output: Value) -> Value {
    json!({"id": "resp_1", "object": "response", "status": status, "instructions": "Be brief.",
           "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}],
           "output": output, "usage": null})
}

fn call_item(status: &str, args: &str) -> Value {
    json!({"id": "fc_1", "type": "function_call", "status": status, "arguments": args, "call_id": "call_1", "name": "shell"})
}

/// A turn with one call, its envelopes numbered.
fn turn(created: Value, completed: Value) -> String {
    let args = "{\"cmd\":\"ls\"}";
    [
        created,
        json!({"type": "response.in_progress", "response": response("in_progress", json!([]))}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": call_item("in_progress", "")}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_1", "delta": args}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": call_item("completed", args)}),
        completed,
    ]
    .iter()
    .enumerate()
    .map(|(i, e)| {
        let mut e = e.clone();
        if i > 0 && e.get("sequence_number").is_none() {
            e["sequence_number"] = json!(i);
        }
        ev(&e)
    })
    .collect()
}

fn created() -> Value {
    json!({"type": "response.created", "response": response("in_progress", json!([]))})
}

fn completed() -> Value {
    let args = "{\"cmd\":\"ls\"}";
    json!({"type": "response.completed", "response": response("completed", json!([call_item("completed", args)]))})
}

fn both(input: &str, allow: bool) -> String {
    let outs: Vec<String> = [true, false]
        .map(|typed| {
            let out = rw(typed).run_sync(&[input.as_bytes()], |_: &Call| allow);
            String::from_utf8_lossy(&out).into_owned()
        })
        .into();
    assert_eq!(outs[0], outs[1], "typed and whole-tree differ on:\n{input}");
    outs[0].clone()
}

/// Whether `data` (an event's) is taken by this reader on a fresh stream.
fn taken(data: &Value) -> bool {
    let mut r = rw(true);
    let text = Bytes::from(data.to_string());
    let raw = Bytes::from(format!("data: {}\n\n", data));
    let mut out = BytesMut::new();
    r.pass_envelope(None, &raw, &text, &data.to_string(), &mut out)
        .is_some()
}

#[test]
fn envelopes_pass_as_they_came_and_are_rewritten_alike() {
    let input = turn(created(), completed());
    assert!(taken(&created()) && taken(&completed()));
    assert_eq!(both(&input, true), input, "all allowed: byte for byte");
    let denied = both(&input, false);
    let last = denied.rsplit("data: ").next().unwrap_or("");
    let done: Value = serde_json::from_str(last.trim()).unwrap();
    assert_eq!(done["type"], "response.completed");
    assert_eq!(done["response"]["output"][0]["type"], "message", "{denied}");
    assert!(!denied.contains("\"ls\""), "{denied}");
}

#[test]
fn a_failure_after_a_typed_envelope_ends_with_its_snapshot() {
    // The stream breaks after the call opened: the ending carries the
    // response from the snapshot kept as text.
    let input = turn(created(), completed());
    let cut = input.find("event: response.output_item.done").unwrap_or(0);
    let broken = format!("{}data: {{\"type\":\n\n", &input[..cut]);
    let out = both(&broken, true);
    assert!(out.contains("event: response.failed"), "{out}");
    assert!(out.contains("\"instructions\":\"Be brief.\""), "{out}");
    assert!(!out.contains("\"ls\""), "{out}");
}

#[test]
fn odd_envelopes_go_to_the_whole_tree_path() {
    let resp = response("in_progress", json!([])).to_string();
    let with = |f: &dyn Fn(&mut Value)| {
        let mut e = created();
        f(&mut e);
        e.to_string()
    };
    let odd = [
        // A repeated key deep in the echoed tools, and in the response.
        r#"{"type":"response.created","response":{"id":"r","tools":[{"name":"a","name":"b"}],"output":[]}}"#.to_string(),
        r#"{"type":"response.created","response":{"id":"r","output":[],"output":[{"type":"function_call","id":"x","call_id":"y","name":"shell","arguments":"{}"}]}}"#.to_string(),
        format!(r#"{{"type":"response.created","response":{resp},"response":{resp}}}"#),
        with(&|e| e["response"]["Output"] = json!([call_item("completed", "{}")])),
        with(&|e| e["response"]["output"] = json!({})),
        with(&|e| e["response"] = json!([1])),
        with(&|e| e["sequence_number"] = json!("3")),
        with(&|e| e["extra"] = json!(1)),
        with(&|e| e["type"] = json!("response.output_text.done")),
        format!(r#"{{"type":"response.created","response":{resp},"Response":{resp}}}"#),
        with(&|e| {
            for i in 0..MAX_MEMBERS {
                e["response"][format!("m{i}")] = json!(i);
            }
        }),
    ];
    let first = created().to_string();
    let base = turn(created(), completed());
    for e in &odd {
        let mut r = rw(true);
        let raw = Bytes::from(format!("data: {e}\n\n"));
        let data = Bytes::from(e.clone());
        let passed = r.pass_envelope(None, &raw, &data, e, &mut BytesMut::new());
        assert!(passed.is_none(), "{e}");
        // Either path answers the same for a turn that opens with it.
        let input = base.replacen(&first, e, 1);
        assert_ne!(input, base);
        both(&input, true);
        both(&input, false);
    }
    // The repeated keys were refused, not passed.
    for e in &odd[..3] {
        let out = both(&base.replacen(&first, e, 1), true);
        assert!(out.contains("event: error"), "{out}");
    }
}

#[test]
fn usage_is_counted_alike() {
    let mut done = completed();
    done["response"]["model"] = json!("gpt-test");
    done["response"]["usage"] = json!({"input_tokens": 5, "input_tokens_details": {"cached_tokens": 1}, "output_tokens": 2, "total_tokens": 7});
    let input = turn(created(), done);
    for typed in [true, false] {
        let mut r = rw(typed);
        r.run_sync(&[input.as_bytes()], |_: &Call| true);
        let u = r.totals().usage;
        assert_eq!((u.input, u.output), (5, 2), "typed {typed}");
        assert_eq!(u.model.as_deref(), Some("gpt-test"), "typed {typed}");
    }
}

#[test]
fn an_id_that_is_not_a_string_is_read_alike() {
    let base = turn(created(), completed());
    let first = created().to_string();
    for id in [r#"5"#, r#"{"a":1}"#, r#"{"a":1,"a":2}"#, "null"] {
        let e = first.replacen(r#""id":"resp_1""#, &format!(r#""id":{id}"#), 1);
        assert_ne!(e, first);
        let input = base.replacen(&first, &e, 1);
        let out = both(&input, false);
        assert_eq!(
            out.contains("event: error"),
            id.contains("\"a\":2"),
            "{out}"
        );
    }
}

#[test]
fn with_calls_open_only_the_event_that_closes_them() {
    let input = turn(created(), completed());
    let text = Bytes::from(completed().to_string());
    let raw = Bytes::from(format!("data: {}\n\n", completed()));
    for (upto, closes) in [
        ("event: response.output_item.done", false),
        ("event: response.completed", true),
    ] {
        let mut r = rw(true);
        let cut = input.find(upto).unwrap_or(0);
        let mut out = BytesMut::new();
        r.push(&input.as_bytes()[..cut]);
        assert!(r.process(&mut out).is_ok());
        let taken = r.pass_envelope(None, &raw, &text, &completed().to_string(), &mut out);
        assert_eq!(taken.is_some(), closes, "{upto}");
        if closes {
            // Gated first; the envelope, as read, waits for the verdicts.
            assert!(matches!(taken, Some(Ok(()))));
            assert_eq!(r.pending().len(), 1);
            let ty = r.lookahead.as_ref().map(Ahead::ty);
            assert_eq!(ty, Some("response.completed"));
            assert!(matches!(r.lookahead, Some(Ahead::Envelope { .. })));
        }
    }
}
