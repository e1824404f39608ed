//! `rewrite = "resume"` on the Messages API: a message whose calls are all
//! withheld is continued by a follow-up, spliced into the same message
//! (streamed, read by the strict reference reader, and whole).

use serde_json::{json, Value};

use crate::messages::{post, scripted_stream};
use crate::messages_reader::Reader;
use crate::support::*;

const POLICY: &str = "[[rule]]\nname = \"no-tools\"\ntools = [\"shell\", \"get_weather\"]\nverdict = \"reject\"\nrewrite = \"resume\"\n";

fn ev(v: Value) -> String {
    format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap())
}

/// A message of text only, under another id.
fn answering(text: &str) -> String {
    [
        json!({"type": "message_start", "message": {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 20, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 7}}),
        json!({"type": "message_stop"}),
    ]
    .into_iter()
    .map(ev)
    .collect()
}

fn request(stream: bool) -> Value {
    json!({"model": "claude-test", "max_tokens": 256, "stream": stream,
        "messages": [{"role": "user", "content": "weather, then clean up"}],
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}},
                  {"name": "shell", "input_schema": {"type": "object"}},
                  {"name": "read", "input_schema": {"type": "object"}}]})
}

async fn start(upstream: &str, extra: &str) -> Gate {
    let extra = format!("{}{extra}", messages_upstream(upstream));
    start_gate("http://127.0.0.1:9/v1", POLICY, &extra).await
}

fn sent(mock: &Mock) -> Vec<Value> {
    mock.requests()
        .iter()
        .map(|s| serde_json::from_slice(&s.body).unwrap())
        .collect()
}

fn check_follow_up(body: &Value) {
    let m = body["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3, "{body}");
    let turn = m[1]["content"].as_array().unwrap();
    assert_eq!(m[1]["role"], "assistant");
    assert_eq!(turn[0], json!({"type": "text", "text": "Let me check."}));
    assert_eq!(turn[1]["type"], "tool_use");
    assert_eq!(turn[1]["input"], json!({"city": "Paris"}));
    assert_eq!(turn[2]["input"], json!({"cmd": "rm -rf /srv/data"}));
    assert_eq!(m[2]["role"], "user");
    assert_eq!(
        m[2]["content"][1],
        json!({"type": "tool_result", "tool_use_id": "toolu_S", "content": "The action could not be completed."})
    );
    assert_eq!(body["tools"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn a_message_whose_calls_are_withheld_is_continued_in_the_same_stream() {
    let mock = start_mock(vec![
        Reply::sse(scripted_stream()),
        Reply::sse(answering("I cannot do that, but Paris is usually mild.")),
    ])
    .await;
    let gate = start(&mock.base_url(), "").await;
    let a = post(&gate, "/v1/messages", &request(true), &[]).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let r = Reader::read(&a.body).unwrap_or_else(|e| panic!("{e}\n{}", a.text()));
    assert!(r.errors.is_empty() && r.stopped, "{}", a.text());
    let msg = r.message();
    assert_eq!(msg["id"], "msg_s", "one id: {}", a.text());
    let content = msg["content"].as_array().unwrap();
    assert_eq!(content.len(), 2, "{msg}");
    assert_eq!(content[0]["text"], "Let me check.");
    assert_eq!(
        content[1]["text"],
        "I cannot do that, but Paris is usually mild."
    );
    assert_eq!(msg["stop_reason"], "end_turn");
    assert_eq!(msg["usage"]["output_tokens"], 37, "{msg}");
    assert_eq!(msg["usage"]["input_tokens"], 30, "{msg}");
    assert_eq!(a.text().matches("event: message_start").count(), 1);
    assert_eq!(a.text().matches("event: message_stop").count(), 1);
    assert!(!a.text().contains("toolu_"), "{}", a.text());
    let bodies = sent(&mock);
    assert_eq!(bodies.len(), 2);
    check_follow_up(&bodies[1]);
    let audit = gate.audit_flushed().await;
    assert!(audit
        .iter()
        .any(|r| r["event"] == "resume" && r["protocol"] == "messages"));
}

#[tokio::test]
async fn a_failed_messages_follow_up_ends_with_the_neutral_block() {
    let mock = start_mock(vec![
        Reply::sse(scripted_stream()),
        Reply::json(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#,
        ),
    ])
    .await;
    let gate = start(&mock.base_url(), "").await;
    let a = post(&gate, "/v1/messages", &request(true), &[]).await;
    let r = Reader::read(&a.body).unwrap_or_else(|e| panic!("{e}\n{}", a.text()));
    assert!(r.errors.is_empty() && r.stopped, "{}", a.text());
    let msg = r.message();
    assert_eq!(
        msg["content"][1]["text"], "I wasn't able to complete that action.",
        "{msg}"
    );
    assert_eq!(msg["stop_reason"], "end_turn");
    assert_eq!(msg["usage"]["output_tokens"], 30, "{msg}");
    assert!(!a.text().contains("busy"));
}

#[tokio::test]
async fn a_whole_message_is_continued_too() {
    let first = Reader::read(scripted_stream().as_bytes())
        .unwrap()
        .message();
    let second = Reader::read(answering("Done.").as_bytes())
        .unwrap()
        .message();
    let mock = start_mock(vec![
        Reply::json(200, first.to_string()),
        Reply::json(200, second.to_string()),
    ])
    .await;
    let gate = start(&mock.base_url(), "").await;
    let a = post(&gate, "/v1/messages", &request(false), &[]).await;
    let v = a.json();
    assert_eq!(v["id"], "msg_s");
    let content = v["content"].as_array().unwrap();
    assert_eq!(content.len(), 2, "{v}");
    assert_eq!(content[0]["text"], "Let me check.");
    assert_eq!(content[1]["text"], "Done.");
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["usage"]["output_tokens"], 37);
    check_follow_up(&sent(&mock)[1]);

    // Bounded: the same calls every time, then the neutral text.
    let mock = start_mock(vec![Reply::json(200, first.to_string())]).await;
    let gate = start(&mock.base_url(), "[rewrite]\nmax_resumes = 1\n").await;
    let v = post(&gate, "/v1/messages", &request(false), &[])
        .await
        .json();
    let texts: Vec<&str> = v["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert_eq!(
        texts,
        [
            "Let me check.",
            "Let me check.",
            "I wasn't able to complete that action."
        ]
    );
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(mock.requests().len(), 2);
}
