//! Requests and chat streams written by the tests.

use serde_json::{json, Value};

/// A chat request declaring `tools` (plain function tools with an open schema).
pub fn chat_request(stream: bool, tools: &[&str]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| json!({"type": "function", "function": {"name": t, "parameters": {"type": "object"}}}))
        .collect();
    json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}], "tools": tools})
}

/// One SSE chunk of a chat-completions stream.
pub fn chunk(choice: u32, delta: Value, finish: Option<&str>) -> String {
    let v = json!({"id": "chatcmpl-t", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": choice, "delta": delta, "finish_reason": finish}]});
    format!("data: {v}\n\n")
}

/// A Responses stream of `events`, named by their type and numbered from 0.
pub fn numbered_events(events: impl IntoIterator<Item = Value>) -> String {
    events
        .into_iter()
        .enumerate()
        .map(|(n, mut e)| {
            e["sequence_number"] = json!(n);
            format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())
        })
        .collect()
}

/// A whole tool call in one delta entry.
pub fn call_delta(index: u32, id: &str, name: &str, args: &str) -> Value {
    json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": args}}]})
}

/// A stream whose only event is one complete call, then the finish.
pub fn one_call_stream(name: &str, args: &str) -> String {
    [
        chunk(0, call_delta(0, "call_1", name, args), None),
        chunk(0, serde_json::json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".into(),
    ]
    .concat()
}
