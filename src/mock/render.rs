//! A model turn (text, then tool calls) written as a provider writes it, in
//! each wire format, streamed or whole.

use bytes::Bytes;
use serde_json::{json, Value};

use super::asked::{Asked, Wire};

/// One tool call the model makes.
#[derive(Debug, Clone, PartialEq)]
pub struct Use {
    pub name: String,
    pub arguments: Value,
}

/// What the model says in one turn: text, then its calls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    pub text: String,
    pub calls: Vec<Use>,
}

/// How a turn is cut into a stream.
#[derive(Debug, Clone, Copy)]
pub struct Cut {
    /// Fragments each call's arguments arrive in.
    pub fragments: usize,
    /// Send a usage chunk on Chat Completions streams even unasked.
    pub usage: bool,
}

/// `s` in `n` pieces of about equal length, cut at character boundaries.
fn pieces(s: &str, n: usize) -> Vec<&str> {
    let n = n.max(1);
    let step = s.len().div_ceil(n).max(1);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + step).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        out.push(&s[start..end]);
        start = end;
    }
    out
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive(' ')
}

/// The body a provider answers `asked` with, and its content type.
pub fn render(turn: &Turn, asked: &Asked, cut: Cut) -> (&'static str, Bytes) {
    let body = match (asked.wire, asked.stream) {
        (Wire::Chat, true) => chat_stream(turn, asked, cut),
        (Wire::Chat, false) => chat_whole(turn, asked).to_string(),
        (Wire::Responses, true) => responses_stream(turn, asked, cut),
        (Wire::Responses, false) => responses_whole(turn, asked).to_string(),
        (Wire::Messages, true) => messages_stream(turn, asked, cut),
        (Wire::Messages, false) => messages_whole(turn, asked).to_string(),
        (Wire::Gemini, true) => gemini_stream(turn, asked),
        (Wire::Gemini, false) => gemini_response(asked, gemini_parts(turn), true).to_string(),
    };
    let ct = match asked.stream {
        true => "text/event-stream",
        false => "application/json",
    };
    (ct, Bytes::from(body))
}

const USAGE_IN: u64 = 5;
const USAGE_OUT: u64 = 15;

fn arguments(u: &Use) -> String {
    u.arguments.to_string()
}

fn chat_chunk(model: &str, delta: Value, finish: Option<&str>) -> String {
    let c = json!({
        "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    format!("data: {c}\n\n")
}

fn chat_stream(turn: &Turn, asked: &Asked, cut: Cut) -> String {
    let m = asked.model.as_str();
    let mut out = chat_chunk(m, json!({"role": "assistant", "content": ""}), None);
    for w in words(&turn.text) {
        out.push_str(&chat_chunk(m, json!({"content": w}), None));
    }
    for (i, u) in turn.calls.iter().enumerate() {
        out.push_str(&chat_chunk(
            m,
            json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function",
                "function": {"name": u.name, "arguments": ""}}]}),
            None,
        ));
        for a in pieces(&arguments(u), cut.fragments) {
            out.push_str(&chat_chunk(
                m,
                json!({"tool_calls": [{"index": i, "function": {"arguments": a}}]}),
                None,
            ));
        }
    }
    let finish = if turn.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    out.push_str(&chat_chunk(m, json!({}), Some(finish)));
    if asked.include_usage || cut.usage {
        let u = json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0,
            "model": m, "choices": [], "usage": {"prompt_tokens": USAGE_IN,
            "completion_tokens": USAGE_OUT, "total_tokens": USAGE_IN + USAGE_OUT}});
        out.push_str(&format!("data: {u}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}

fn chat_whole(turn: &Turn, asked: &Asked) -> Value {
    let mut message = json!({"role": "assistant",
        "content": if turn.text.is_empty() { Value::Null } else { json!(turn.text) }});
    if !turn.calls.is_empty() {
        message["tool_calls"] = turn
            .calls
            .iter()
            .enumerate()
            .map(|(i, u)| {
                json!({"id": format!("call_{i}"), "type": "function",
                "function": {"name": u.name, "arguments": arguments(u)}})
            })
            .collect();
    }
    let finish = if turn.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    json!({"id": "chatcmpl-mock", "object": "chat.completion", "created": 0, "model": asked.model,
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT,
            "total_tokens": USAGE_IN + USAGE_OUT}})
}

/// The output items of a Responses turn, complete.
fn responses_items(turn: &Turn, namespaces: &[String]) -> Vec<Value> {
    let mut items = Vec::new();
    if !turn.text.is_empty() {
        items.push(
            json!({"type": "message", "id": "msg_mock", "status": "completed",
            "role": "assistant", "content": [{"type": "output_text", "text": turn.text,
            "annotations": []}]}),
        );
    }
    for (i, u) in turn.calls.iter().enumerate() {
        let mut item = json!({"type": "function_call", "id": format!("fc_{i}"),
            "call_id": format!("call_{i}"), "name": u.name, "arguments": arguments(u),
            "status": "completed"});
        // `ns.tool` of a declared namespace: a call of that namespace's tool.
        let split = u.name.split_once('.');
        if let Some((ns, name)) = split.filter(|(ns, _)| namespaces.iter().any(|n| n == ns)) {
            item["namespace"] = json!(ns);
            item["name"] = json!(name);
        }
        items.push(item);
    }
    items
}

fn response(asked: &Asked, status: &str, output: Vec<Value>) -> Value {
    let mut r = json!({"id": "resp_mock", "object": "response", "created_at": 0,
        "status": status, "model": asked.model, "output": output});
    if status == "completed" {
        r["usage"] = json!({"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT,
            "total_tokens": USAGE_IN + USAGE_OUT});
    }
    r
}

fn responses_whole(turn: &Turn, asked: &Asked) -> Value {
    response(asked, "completed", responses_items(turn, &asked.namespaces))
}

/// Named server-sent events, each with its `sequence_number` when `numbered`.
struct Events {
    out: String,
    seq: u64,
    numbered: bool,
}

impl Events {
    fn push(&mut self, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        if self.numbered {
            data["sequence_number"] = json!(self.seq);
            self.seq += 1;
        }
        self.out
            .push_str(&format!("event: {kind}\ndata: {data}\n\n"));
    }
}

fn responses_stream(turn: &Turn, asked: &Asked, cut: Cut) -> String {
    let mut e = Events {
        out: String::new(),
        seq: 0,
        numbered: true,
    };
    e.push(
        "response.created",
        json!({"response": response(asked, "in_progress", vec![])}),
    );
    let items = responses_items(turn, &asked.namespaces);
    for (at, item) in items.iter().enumerate() {
        let id = item["id"].clone();
        let mut open = item.clone();
        open["status"] = json!("in_progress");
        if item["type"] == "message" {
            open["content"] = json!([]);
            e.push(
                "response.output_item.added",
                json!({"output_index": at, "item": open}),
            );
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            e.push(
                "response.content_part.added",
                json!({"item_id": id, "output_index": at, "content_index": 0, "part": part}),
            );
            for w in words(&turn.text) {
                e.push(
                    "response.output_text.delta",
                    json!({"item_id": id, "output_index": at, "content_index": 0, "delta": w}),
                );
            }
            e.push(
                "response.output_text.done",
                json!({"item_id": id, "output_index": at, "content_index": 0, "text": turn.text}),
            );
            e.push(
                "response.content_part.done",
                json!({"item_id": id, "output_index": at, "content_index": 0,
                    "part": item["content"][0]}),
            );
        } else {
            open["arguments"] = json!("");
            e.push(
                "response.output_item.added",
                json!({"output_index": at, "item": open}),
            );
            let args = item["arguments"].as_str().unwrap_or_default();
            for a in pieces(args, cut.fragments) {
                e.push(
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": at, "delta": a}),
                );
            }
            e.push(
                "response.function_call_arguments.done",
                json!({"item_id": id, "output_index": at, "arguments": args}),
            );
        }
        e.push(
            "response.output_item.done",
            json!({"output_index": at, "item": item}),
        );
    }
    e.push(
        "response.completed",
        json!({"response": response(asked, "completed", items)}),
    );
    e.out
}

/// The content blocks of a Messages turn, complete.
fn messages_blocks(turn: &Turn) -> Vec<Value> {
    let mut blocks = Vec::new();
    if !turn.text.is_empty() {
        blocks.push(json!({"type": "text", "text": turn.text}));
    }
    for (i, u) in turn.calls.iter().enumerate() {
        blocks.push(json!({"type": "tool_use", "id": format!("toolu_mock{i}"),
            "name": u.name, "input": u.arguments}));
    }
    blocks
}

fn message(asked: &Asked, content: Vec<Value>, stop: Value) -> Value {
    json!({"id": "msg_mock", "type": "message", "role": "assistant", "model": asked.model,
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT}})
}

fn stop_reason(turn: &Turn) -> &'static str {
    if turn.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

fn messages_whole(turn: &Turn, asked: &Asked) -> Value {
    message(asked, messages_blocks(turn), json!(stop_reason(turn)))
}

fn messages_stream(turn: &Turn, asked: &Asked, cut: Cut) -> String {
    let mut e = Events {
        out: String::new(),
        seq: 0,
        numbered: false,
    };
    let mut start = message(asked, vec![], Value::Null);
    start["usage"]["output_tokens"] = json!(1);
    e.push("message_start", json!({"message": start}));
    for (i, b) in messages_blocks(turn).into_iter().enumerate() {
        if b["type"] == "text" {
            e.push(
                "content_block_start",
                json!({"index": i, "content_block": {"type": "text", "text": ""}}),
            );
            for w in words(&turn.text) {
                e.push(
                    "content_block_delta",
                    json!({"index": i, "delta": {"type": "text_delta", "text": w}}),
                );
            }
        } else {
            let mut open = b.clone();
            open["input"] = json!({});
            e.push(
                "content_block_start",
                json!({"index": i, "content_block": open}),
            );
            for a in pieces(&b["input"].to_string(), cut.fragments) {
                e.push(
                    "content_block_delta",
                    json!({"index": i, "delta": {"type": "input_json_delta", "partial_json": a}}),
                );
            }
        }
        e.push("content_block_stop", json!({"index": i}));
    }
    e.push(
        "message_delta",
        json!({"delta": {"stop_reason": stop_reason(turn),
        "stop_sequence": null}, "usage": {"output_tokens": USAGE_OUT}}),
    );
    e.push("message_stop", json!({}));
    e.out
}

/// A turn's parts: its text, then a `functionCall` part per call.
fn gemini_parts(turn: &Turn) -> Vec<Value> {
    let mut parts = Vec::new();
    if !turn.text.is_empty() {
        parts.push(json!({"text": turn.text}));
    }
    for u in &turn.calls {
        parts.push(json!({"functionCall": {"name": u.name, "args": u.arguments}}));
    }
    parts
}

/// A `GenerateContentResponse` of `parts`, finished when `last`.
fn gemini_response(asked: &Asked, parts: Vec<Value>, last: bool) -> Value {
    let mut c = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if last {
        c["finishReason"] = json!("STOP");
    }
    json!({
        "candidates": [c],
        "usageMetadata": {"promptTokenCount": USAGE_IN, "candidatesTokenCount": USAGE_OUT,
            "totalTokenCount": USAGE_IN + USAGE_OUT},
        "modelVersion": asked.model, "responseId": "mock-gemini-response",
    })
}

/// The text a word at a time, each call whole in an event of its own (as
/// Google sends them), the finish last; events end in CRLF pairs.
fn gemini_stream(turn: &Turn, asked: &Asked) -> String {
    let mut events: Vec<Vec<Value>> = words(&turn.text)
        .map(|w| vec![json!({"text": w})])
        .collect();
    for u in &turn.calls {
        events.push(vec![
            json!({"functionCall": {"name": u.name, "args": u.arguments}}),
        ]);
    }
    events.push(vec![json!({"text": ""})]);
    let n = events.len();
    let mut out = String::new();
    for (i, parts) in events.into_iter().enumerate() {
        let r = gemini_response(asked, parts, i + 1 == n);
        out.push_str(&format!("data: {r}\r\n\r\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_named_ns_dot_tool_is_a_namespaced_responses_call() {
        let turn = Turn {
            text: String::new(),
            calls: vec![
                Use {
                    name: "mcp__crm.delete_contact".into(),
                    arguments: json!({}),
                },
                Use {
                    name: "shell".into(),
                    arguments: json!({}),
                },
            ],
        };
        // Not a declared namespace: a name with a dot.
        let plain = responses_items(&turn, &[]);
        assert_eq!(plain[0]["name"], "mcp__crm.delete_contact");
        assert!(plain[0].get("namespace").is_none());
        let items = responses_items(&turn, &["mcp__crm".to_string()]);
        assert_eq!(items[0]["namespace"], "mcp__crm");
        assert_eq!(items[0]["name"], "delete_contact");
        assert_eq!(items[1]["name"], "shell");
        assert!(items[1].get("namespace").is_none());
    }

    #[test]
    fn pieces_cover_the_text_at_character_boundaries() {
        for s in ["", "a", "{\"city\":\"Paris\"}", "héllo wörld ☃"] {
            for n in 1..6 {
                let p = pieces(s, n);
                assert_eq!(p.concat(), s);
                assert!(p.len() <= n.max(1), "{s:?} in {n}: {p:?}");
            }
        }
    }
}
