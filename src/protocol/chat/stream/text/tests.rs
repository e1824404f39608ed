//! Calls written as text in a streamed choice, over hand-written streams.

use serde_json::{json, Value};

use super::super::StreamRewriter;
use crate::protocol::sync_driver::testing::{options, run_denying};

fn run(deltas: &[&str], finish: &str, deny: &[&str], on: bool) -> String {
    let contents: Vec<Value> = deltas.iter().map(|d| json!(d)).collect();
    run_contents(&contents, finish, deny, on)
}

/// Like [`run`], each delta's `content` given as JSON (a string, or parts).
fn run_contents(contents: &[Value], finish: &str, deny: &[&str], on: bool) -> String {
    let mut o = options();
    o.text_calls = on;
    let mut input = String::new();
    for (i, d) in contents.iter().enumerate() {
        let last = i + 1 == contents.len();
        let delta = json!({ "content": d });
        let fin = if last {
            format!("\"{finish}\"")
        } else {
            "null".into()
        };
        input.push_str(&format!(
            "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{fin}}}]}}\n\n"
        ));
    }
    input.push_str("data: [DONE]\n\n");
    run_denying(&mut StreamRewriter::new(&o), &input, deny)
}

/// The text the agent reads, the finishes it is sent, and the events as they came.
fn read(out: &str) -> (String, Vec<String>, Vec<String>) {
    let (mut text, mut finishes, mut raw) = (String::new(), Vec::new(), Vec::new());
    for block in out.split("\n\n").filter_map(|b| b.strip_prefix("data: ")) {
        raw.push(block.to_string());
        let Ok(v) = serde_json::from_str::<Value>(block) else {
            continue;
        };
        let c = &v["choices"][0];
        match &c["delta"]["content"] {
            Value::Array(parts) => parts
                .iter()
                .filter(|p| p["type"] == "text")
                .for_each(|p| text.push_str(p["text"].as_str().unwrap_or(""))),
            t => text.push_str(t.as_str().unwrap_or("")),
        }
        if let Some(f) = c["finish_reason"].as_str() {
            finishes.push(f.to_string());
        }
    }
    (text, finishes, raw)
}

const CALL: &str =
    "<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>";

#[test]
fn an_allowed_text_call_reaches_the_agent_as_it_was_written() {
    let parts = [
        "Let me look. <tool",
        "_call>\n{\"name\": \"shell\", ",
        "\"arguments\": {\"command\": \"ls\"}}\n</tool_call>",
    ];
    let (text, finishes, raw) = read(&run(&parts, "stop", &[], true));
    assert_eq!(text, format!("Let me look. {CALL}"));
    assert_eq!(finishes, ["stop"]);
    // The text before the marker went out at once; the call only as a whole.
    assert!(raw[0].contains("Let me look. ") && !raw[0].contains("<tool"));
    assert!(raw
        .iter()
        .any(|e| e.contains("\\\"command\\\": \\\"ls\\\"")));
}

#[test]
fn a_withheld_text_call_is_taken_out_and_the_turn_ends_neutrally() {
    let parts = [
        "Running it.",
        "\n<tool_call>",
        "{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}</tool_call>",
    ];
    let out = run(&parts, "stop", &["shell"], true);
    let (text, finishes, _) = read(&out);
    assert!(
        !out.contains("tool_call") && !out.contains("shell"),
        "{out}"
    );
    assert!(text.starts_with("Running it.\n\n"), "{text}");
    assert!(text.ends_with(&*options().neutral_message), "{text}");
    assert_eq!(finishes, ["stop"]);
}

#[test]
fn only_the_withheld_block_goes_when_another_is_allowed() {
    let a = "<tool_call>{\"name\": \"read\", \"arguments\": {}}</tool_call>";
    let b = "<tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>";
    let (text, _, _) = read(&run(&[a, "\n", b], "stop", &["shell"], true));
    assert_eq!(text, format!("{a}\n"));
}

#[test]
fn every_format_is_held_and_gated() {
    for call in [
        "<|python_tag|>{\"name\": \"shell\", \"parameters\": {\"command\": \"ls\"}}",
        "[TOOL_CALLS][{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}]",
        "[TOOL_CALLS]shell[ARGS]{\"command\": \"ls\"}",
    ] {
        let (pieces, at) = call.split_at(5);
        let out = run(&[pieces, at], "stop", &["shell"], true);
        assert!(!out.contains("shell"), "{call}: {out}");
        let (text, _, _) = read(&run(&[pieces, at], "stop", &[], true));
        assert_eq!(text, call);
    }
}

#[test]
fn text_that_only_looked_like_a_marker_goes_out_at_the_finish() {
    let (text, finishes, _) = read(&run(&["Compare a [TOOL", "_"], "stop", &["shell"], true));
    assert_eq!(text, "Compare a [TOOL_");
    assert_eq!(finishes, ["stop"]);
}

#[test]
fn off_by_default_the_text_is_not_read() {
    let out = run(&[CALL], "stop", &["shell"], false);
    assert_eq!(read(&out).0, CALL);
}

#[test]
fn a_stream_that_ends_while_holding_call_text_releases_none_of_it() {
    let mut o = options();
    o.text_calls = true;
    let input = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok <tool_call>{\\\"name\\\": \\\"shell\\\"\"},\"finish_reason\":null}]}\n\n";
    let out = run_denying(&mut StreamRewriter::new(&o), input, &[]);
    assert!(
        !out.contains("shell") && !out.contains("tool_call"),
        "{out}"
    );
    assert!(out.contains("\"error\""), "{out}");
}

#[test]
fn a_content_key_written_with_escapes_is_still_scanned() {
    let mut o = options();
    o.text_calls = true;
    let input = "data: {\"choices\":[{\"index\":0,\"delta\":{\"\\u0063ontent\":\"<tool_call>{\\\"name\\\": \\\"shell\\\", \\\"arguments\\\": {}}</tool_call>\"},\"finish_reason\":null}]}\n\n\
                 data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let out = run_denying(&mut StreamRewriter::new(&o), input, &["shell"]);
    assert!(
        !out.contains("shell") && !out.contains("tool_call"),
        "{out}"
    );
}

#[test]
fn a_held_back_tail_released_as_another_is_held_keeps_the_text_in_order() {
    let (text, _, _) = read(&run(&["a<", "b<"], "stop", &[], true));
    assert_eq!(text, "a<b<");
}

#[test]
fn content_in_parts_is_scanned_part_by_part() {
    let think = json!({"type": "thinking", "thinking": [{"type": "text", "text": "<tool_call>"}]});
    let contents = [
        json!([think, {"type": "text", "text": "Running it. <tool"}]),
        json!([{"type": "text", "text": "_call>{\"name\": \"shell\", "}]),
        json!([{"text": "\"arguments\": {}}</tool_call>"}]),
    ];
    let out = run_contents(&contents, "stop", &["shell"], true);
    assert!(!out.contains("shell") && !out.contains("<tool\""), "{out}");
    let (text, finishes, raw) = read(&out);
    assert!(text.starts_with("Running it. \n\n"), "{text}");
    assert!(text.ends_with(&*options().neutral_message), "{text}");
    assert_eq!(finishes, ["stop"]);
    // A part that is not text went out as it came.
    assert!(raw[0].contains("\"thinking\""), "{}", raw[0]);

    let (text, _, _) = read(&run_contents(&contents, "stop", &[], true));
    assert_eq!(
        text,
        "Running it. <tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>"
    );
}

#[test]
fn a_tail_held_back_from_parts_goes_out_as_a_part() {
    let contents = [json!([{"type": "text", "text": "a [TOOL"}]), json!([])];
    let (text, _, raw) = read(&run_contents(&contents, "stop", &[], true));
    assert_eq!(text, "a [TOOL");
    assert!(
        raw.iter()
            .any(|e| e.contains("{\"text\":\"[TOOL\",\"type\":\"text\"}")),
        "{raw:?}"
    );
}
