//! Codex through toolgate: its Responses WebSocket transport is refused
//! with a 426 (Codex falls back to HTTP at once), and a Codex-shaped
//! request (namespaced sub-agent tools, `web_search`, a custom
//! `apply_patch`, `shell_command`) works under the shipped default policy.

use serde_json::{json, Value};

use crate::support::*;

/// A request shaped as Codex sends it.
fn codex_request() -> Value {
    json!({
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "input": [{"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Ask a helper to review the diff."}]}],
        "tools": [
            {"type": "function", "name": "shell_command", "description": "Runs a shell command.",
             "strict": false, "parameters": {"type": "object",
                "properties": {"command": {"type": "string"}}, "required": ["command"]}},
            {"type": "custom", "name": "apply_patch", "description": "Applies a patch.",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
            {"type": "web_search", "external_web_access": false},
            {"type": "namespace", "name": "collaboration", "description": "Sub-agents.", "tools": [
                {"type": "function", "name": "spawn_agent", "description": "Spawns an agent.",
                 "parameters": {"type": "object", "properties": {"message": {"type": "string"}}}},
                {"type": "function", "name": "wait_agent", "description": "Waits for an agent.",
                 "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}
            ]}
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": false,
        "store": false,
        "stream": true,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "conv-1"
    })
}

/// The model asks for a sub-agent (a call in the `collaboration` namespace).
fn spawn_stream() -> String {
    let args = r#"{"message":"Review the diff in src/."}"#;
    let item = |done: bool| {
        json!({"id": "fc_1", "type": "function_call",
        "status": if done {"completed"} else {"in_progress"}, "call_id": "call_1",
        "namespace": "collaboration", "name": "spawn_agent", "arguments": if done {args} else {""}})
    };
    let base = json!({"id": "resp_C", "object": "response", "created_at": 1, "model": "gpt-5-codex",
        "status": "in_progress", "output": []});
    let mut fin = base.clone();
    fin["status"] = json!("completed");
    fin["output"] = json!([item(true)]);
    numbered_events([
        json!({"type": "response.created", "response": base}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item(false)}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_1", "delta": args}),
        json!({"type": "response.function_call_arguments.done", "output_index": 0, "item_id": "fc_1", "arguments": args}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item(true)}),
        json!({"type": "response.completed", "response": fin}),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_falls_back_to_http_at_once_and_works_under_the_default_policy() {
    let mock = start_mock(vec![Reply::sse(spawn_stream())]).await;
    let gate = start_gate_files(&mock.base_url(), &shipped(&["default.toml"]), "").await;
    let base = format!("{}/v1", gate.url);
    let Some(out) = run_sdk(
        "codex_transport.py",
        vec![base, codex_request().to_string()],
    )
    .await
    else {
        return;
    };
    let ws = &out["websocket"];
    assert_eq!(ws["status"], 426, "{out}");
    assert_eq!(
        ws["body"]["error"]["type"], "invalid_request_error",
        "{out}"
    );
    assert_eq!(out["http"]["status"], 200, "{out}");
    assert_eq!(
        out["http"]["calls"],
        json!([["collaboration", "spawn_agent", {"message": "Review the diff in src/."}]]),
        "{out}"
    );
    // The upgrade never reached the provider; the HTTP request did, with
    // every tool Codex declared.
    let sent = mock.requests();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(body["tools"].as_array().map(Vec::len), Some(4), "{body}");
    let audit = gate.audit_flushed().await;
    let call = audit.iter().find(|r| r["tool"].is_string()).unwrap();
    assert_eq!(call["tool"], "collaboration.spawn_agent");
    assert_eq!(call["verdict"], "allow", "{call}");
    gate.stop().await;
}

#[tokio::test]
async fn a_websocket_upgrade_on_any_gated_route_is_a_426_in_its_shape() {
    let mock = start_mock(vec![Reply::json(500, "{}")]).await;
    let gate = start_gate(
        &mock.base_url(),
        ALLOW_ALL,
        &messages_upstream(&mock.base_url()),
    )
    .await;
    let ws = [
        ("upgrade", "websocket"),
        ("connection", "Upgrade"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    for (path, shape) in [
        ("/v1/responses", "openai"),
        ("/v1/chat/completions", "openai"),
        ("/v1/messages", "messages"),
    ] {
        let a = send("GET", &format!("{}{path}", gate.url), &ws, "").await;
        assert_eq!(a.status, 426, "{path}: {}", a.text());
        let v = a.json();
        match shape {
            "messages" => assert_eq!(v["type"], "error", "{v}"),
            _ => assert!(
                v["error"]["message"].as_str().unwrap().contains("HTTP"),
                "{v}"
            ),
        }
    }
    // A plain GET is still a 405.
    let a = send("GET", &format!("{}/v1/responses", gate.url), &[], "").await;
    assert_eq!(a.status, 405);
    assert!(mock.requests().is_empty());
    gate.stop().await;
}
