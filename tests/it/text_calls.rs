//! Tool calls written as text (`[gate] text_tool_calls`) through a real
//! toolgate: held from their marker, gated like structured calls, taken out
//! when withheld; the official openai SDK reads the result.

use serde_json::{json, Value};

use crate::support::*;

const ON: &str = "[gate]\ntext_tool_calls = true\n";

/// A Qwen-style stream: text, then a Hermes call cut at awkward places.
fn hermes_stream(tool: &str) -> String {
    let call = format!("<tool_call>\n{{\"name\": \"{tool}\", \"arguments\": {{\"path\": \"notes.txt\"}}}}\n</tool_call>");
    let (a, rest) = call.split_at(3);
    let (b, c) = rest.split_at(20);
    [
        chunk(
            0,
            json!({"role": "assistant", "content": "Let me check."}),
            None,
        ),
        chunk(0, json!({"content": format!(" {a}")}), None),
        chunk(0, json!({"content": b}), None),
        chunk(0, json!({"content": c}), None),
        chunk(0, json!({}), Some("stop")),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat()
}

fn whole(content: &str) -> String {
    json!({"id": "chatcmpl-w", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": content}}]})
    .to_string()
}

/// The text a streamed answer carries.
fn streamed_text(body: &str) -> String {
    body.split("\n\n")
        .filter_map(|b| b.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect()
}

#[tokio::test]
async fn a_text_call_to_a_denied_tool_never_reaches_the_agent() {
    let mock = start_mock(vec![
        Reply::sse(hermes_stream("shell")),
        Reply::json(
            200,
            whole("ok <tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>"),
        ),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), &deny(&["shell"]), ON).await;
    let tools = ["shell", "read_file"];
    let streamed = post_chat(&gate, &chat_request(true, &tools)).await.text();
    assert!(
        !streamed.contains("tool_call") && !streamed.contains("shell"),
        "{streamed}"
    );
    let text = streamed_text(&streamed);
    assert!(text.starts_with("Let me check. \n\n"), "{text}");
    let whole = post_chat(&gate, &chat_request(false, &tools)).await.json();
    let content = whole["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        content.starts_with("ok \n\n") && !content.contains("shell"),
        "{content}"
    );
    let audit = gate.audit_flushed().await;
    let withheld: Vec<&Value> = audit.iter().filter(|r| r["tool"] == "shell").collect();
    assert_eq!(withheld.len(), 2, "{audit:?}");
    assert!(withheld.iter().all(|r| r["verdict"] == "deny"), "{audit:?}");
    gate.stop().await;
}

#[tokio::test]
async fn an_allowed_text_call_goes_out_as_the_model_wrote_it() {
    let mock = start_mock(vec![Reply::sse(hermes_stream("read_file"))]).await;
    let gate = start_gate(&mock.base_url(), &deny(&["shell"]), ON).await;
    let streamed = post_chat(&gate, &chat_request(true, &["read_file"]))
        .await
        .text();
    assert_eq!(
        streamed_text(&streamed),
        "Let me check. <tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n</tool_call>"
    );
    let audit = gate.audit_flushed().await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["tool"], "read_file");
    gate.stop().await;
}

#[tokio::test]
async fn without_the_setting_text_is_only_text() {
    let mock = start_mock(vec![Reply::sse(hermes_stream("shell"))]).await;
    let gate = start_gate(&mock.base_url(), &deny(&["shell"]), "").await;
    let streamed = post_chat(&gate, &chat_request(true, &["shell"]))
        .await
        .text();
    assert!(streamed_text(&streamed).contains("\"name\": \"shell\""));
    gate.stop().await;
}

#[tokio::test]
async fn a_text_call_that_cannot_be_read_is_withheld() {
    let broken =
        "<tool_call>{\"name\": \"read_file\", \"name\": \"shell\", \"arguments\": {}}</tool_call>";
    let mock = start_mock(vec![Reply::json(200, whole(broken))]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, ON).await;
    let whole = post_chat(&gate, &chat_request(false, &["read_file", "shell"]))
        .await
        .json();
    let content = whole["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(!content.contains("tool_call"), "{content}");
    let audit = gate.audit_flushed().await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_ne!(audit[0]["verdict"], "allow", "{audit:?}");
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_reads_text_calls_as_gated() {
    let mock = start_mock(vec![
        Reply::sse(hermes_stream("shell")),
        Reply::sse(hermes_stream("read_file")),
        Reply::json(200, whole("[TOOL_CALLS]shell[ARGS]{\"command\": \"ls\"}")),
        Reply::json(
            200,
            whole("<|python_tag|>{\"name\": \"read_file\", \"parameters\": {\"path\": \"a\"}}"),
        ),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), &deny(&["shell"]), ON).await;
    let Some(r) = run_sdk("text_calls_check.py", vec![format!("{}/v1", gate.url)]).await else {
        return;
    };
    let text = |case: &str| r[case]["text"].as_str().unwrap_or("").to_string();
    assert!(!text("stream_denied").contains("shell"), "{r}");
    assert!(text("stream_denied").starts_with("Let me check."), "{r}");
    assert!(
        text("stream_allowed").contains("\"name\": \"read_file\""),
        "{r}"
    );
    assert!(!text("whole_denied").contains("TOOL_CALLS"), "{r}");
    assert!(!text("whole_denied").is_empty(), "{r}");
    assert_eq!(
        text("whole_allowed"),
        "<|python_tag|>{\"name\": \"read_file\", \"parameters\": {\"path\": \"a\"}}"
    );
    for case in [
        "stream_denied",
        "stream_allowed",
        "whole_denied",
        "whole_allowed",
    ] {
        assert_eq!(r[case]["finish"], "stop", "{case}: {r}");
    }
    gate.stop().await;
}
