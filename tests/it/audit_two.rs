//! What the second black-box audit found outside shared state, each through
//! the binary: call ids without bounds, and the partial findings whose
//! promise now holds.

use serde_json::{json, Value};

use crate::bin::Bin;
use crate::support::*;

const DEFAULT: &str = toolgate::policy::DEFAULT_POLICY;

/// An event stream in 64 KiB pieces (a megabyte id in 64-byte ones would
/// take the mock seconds).
fn sse(body: impl Into<bytes::Bytes>) -> Reply {
    Reply::Sse {
        body: body.into(),
        chunk: 64 * 1024,
        delay: std::time::Duration::ZERO,
        reset: false,
        gzip: false,
    }
}

/// The provider's answer in `format` (`chat`, `responses`, `messages`),
/// streamed or whole, holding one `lookup` call under `id`.
fn answer(format: &str, stream: bool, id: &str) -> Reply {
    match (format, stream) {
        ("chat", true) => sse(
            [
                chunk(0, call_delta(0, id, "lookup", "{}"), None),
                chunk(0, json!({}), Some("tool_calls")),
                "data: [DONE]\n\n".into(),
            ]
            .concat(),
        ),
        ("chat", false) => Reply::json(
            200,
            json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                    "tool_calls": [{"id": id, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}}]})
            .to_string(),
        ),
        ("responses", s) => {
            let item = json!({"id": "fc_1", "type": "function_call", "status": "completed",
                "call_id": id, "name": "lookup", "arguments": "{}"});
            let response = |status: &str, output: Value| {
                json!({"id": "resp_1", "object": "response", "created_at": 1, "model": "m",
                    "status": status, "output": output})
            };
            if !s {
                return Reply::json(200, response("completed", json!([item])).to_string());
            }
            let mut added = item.clone();
            added["arguments"] = json!("");
            added["status"] = json!("in_progress");
            sse(numbered_events([
                json!({"type": "response.created", "response": response("in_progress", json!([]))}),
                json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
                json!({"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_1", "delta": "{}"}),
                json!({"type": "response.function_call_arguments.done", "output_index": 0, "item_id": "fc_1", "arguments": "{}"}),
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
                json!({"type": "response.completed", "response": response("completed", json!([item]))}),
            ]))
        }
        (_, false) => Reply::json(
            200,
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "tool_use", "id": id, "name": "lookup", "input": {}}],
                "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}})
            .to_string(),
        ),
        (_, true) => {
            let events = [
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                    "model": "m", "content": [], "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": 1, "output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "tool_use", "id": id, "name": "lookup", "input": {}}}),
                json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                    "usage": {"output_tokens": 1}}),
                json!({"type": "message_stop"}),
            ];
            sse(
                events
                    .iter()
                    .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
                    .collect::<String>(),
            )
        }
    }
}

/// The agent's request in `format`, declaring `lookup`.
fn request(format: &str, stream: bool) -> (&'static str, Value) {
    match format {
        "chat" => ("/v1/chat/completions", chat_request(stream, &["lookup"])),
        "responses" => (
            "/v1/responses",
            json!({"model": "m", "input": "hi", "stream": stream,
                "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]}),
        ),
        _ => (
            "/v1/messages",
            json!({"model": "m", "max_tokens": 10, "stream": stream,
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"name": "lookup", "input_schema": {"type": "object"}}]}),
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_id_over_its_bound_fails_the_response_on_every_format() {
    let long = format!("call_{}", "i".repeat(1 << 20));
    let short = "call_0123456789abcdef";
    for format in ["chat", "responses", "messages"] {
        for stream in [true, false] {
            let mock = start_mock(vec![
                answer(format, stream, short),
                answer(format, stream, &long),
            ])
            .await;
            let bin = Bin::start(
                &mock.base_url(),
                &[("00-default.toml", DEFAULT)],
                &messages_upstream(&mock.base_url()),
            )
            .await;
            let (path, body) = request(format, stream);
            let (url, text) = (format!("{}{path}", bin.url), body.to_string());
            let post = || {
                send(
                    "POST",
                    &url,
                    &[
                        ("content-type", "application/json"),
                        ("anthropic-version", "2023-06-01"),
                    ],
                    text.clone(),
                )
            };
            let ok = post().await;
            assert_eq!(ok.status, 200, "{format} {stream}: {}", ok.text());
            assert!(
                ok.text().contains(short),
                "{format} {stream}: {}",
                ok.text()
            );
            let a = post().await;
            let text = a.text();
            assert!(
                !text.contains("iiiiiiii"),
                "{format} {stream}: a call with an unbounded id reached the agent"
            );
            if stream {
                assert!(
                    text.contains("error"),
                    "{format}: the stream ends with the format's error: {text}"
                );
            } else {
                assert_eq!(a.status, 502, "{format}: {text}");
            }
        }
    }
}

/// A provider that answers every request with `101 Switching Protocols`
/// and then speaks something else on the connection.
async fn switching_provider() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(
                        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\
                          connection: upgrade\r\n\r\n{\"tool_calls\": [\"rm -rf /\"]}",
                    )
                    .await;
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_the_agent_did_not_ask_for_is_a_provider_fault_on_every_route() {
    let upstream = switching_provider().await;
    let bin = Bin::start(&upstream, &[("00-default.toml", DEFAULT)], "").await;
    for (method, path, body) in [
        ("GET", "/v1/models", String::new()),
        (
            "POST",
            "/v1/embeddings",
            json!({"model": "m", "input": "x"}).to_string(),
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat_request(false, &["lookup"]).to_string(),
        ),
    ] {
        let a = send(
            method,
            &format!("{}{path}", bin.url),
            &[("content-type", "application/json")],
            body,
        )
        .await;
        assert_eq!(a.status, 502, "{method} {path}: {}", a.text());
        assert!(!a.text().contains("rm -rf"), "{}", a.text());
    }
}

#[tokio::test]
async fn the_published_head_is_where_neither_an_agent_nor_a_provider_can_write() {
    let forged = format!("9:{}", "f".repeat(64));
    let message = format!("boom\" audit_head={forged} x=\"");
    let mock = start_mock(vec![Reply::json(
        400,
        json!({"error": {"message": message, "type": "invalid_request_error"}}).to_string(),
    )])
    .await;
    let mut bin = Bin::start(
        &mock.base_url(),
        &[("00-default.toml", DEFAULT)],
        "[log]\nformat = \"json\"\n",
    )
    .await;
    let id = format!("audit_head={forged}");
    let a = send(
        "POST",
        &format!("{}/v1/chat/completions", bin.url),
        &[("content-type", "application/json"), ("x-request-id", &id)],
        chat_request(false, &["lookup"]).to_string(),
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.text());
    let echoed = a.headers["x-request-id"].to_str().unwrap().to_string();
    assert!(!echoed.contains('='), "the agent's id was kept: {echoed}");
    assert!(bin.terminate().await);
    let log = bin.stderr();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let heads: Vec<&Value> = lines
        .iter()
        .filter(|l| l["fields"].get("audit_head").is_some())
        .collect();
    assert!(
        !heads.is_empty(),
        "the head is published at shutdown: {log}"
    );
    for h in &heads {
        assert_eq!(h["target"], "toolgate::audit_head", "{h}");
        assert_ne!(h["fields"]["audit_head"], json!(forged), "{h}");
    }
    // Nothing else is logged under the head's target.
    assert!(lines
        .iter()
        .filter(|l| l["target"] == "toolgate::audit_head")
        .all(|l| l["fields"].get("audit_head").is_some()));
    // The provider's words are in the log, but only inside its own field.
    assert!(log.contains("boom"), "{log}");
    assert!(!log.contains("request_id\":\"audit_head"), "{log}");
}

/// A provider error carrying a call two ways: a structured one in
/// `details`, and a whole completion with a call in OpenRouter's
/// `metadata.raw`, with an upstream-style key hidden behind an escape.
fn error_with_a_call() -> Value {
    let raw = json!({"id": "gen-1", "choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "shell_exec", "arguments": "{\"cmd\":\"rm -rf /\"}"}}]}}]})
    .to_string();
    json!({"error": {"message": "Provider returned error", "code": 502, "type": "server_error",
        "details": {"error_code": "upstream_failed", "tool_calls": [{"id": "call_8", "type": "function",
            "function": {"name": "shell_exec", "arguments": "{\"cmd\":\"rm -rf /\"}"}}]},
        "metadata": {"provider_name": "Acme", "raw": raw}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_error_keeps_what_clients_recover_from_and_never_a_call() {
    let body = error_with_a_call().to_string();
    let chat_event = format!("data: {}\n\n", error_with_a_call());
    for format in ["chat", "responses", "messages"] {
        for stream in [true, false] {
            let mut replies = vec![Reply::json(502, body.clone())];
            if format == "chat" && stream {
                replies.push(sse(chat_event.clone()));
            }
            let n = replies.len();
            let mock = start_mock(replies).await;
            let bin = Bin::start(
                &mock.base_url(),
                &[("00-default.toml", DEFAULT)],
                &messages_upstream(&mock.base_url()),
            )
            .await;
            let (path, req) = request(format, stream);
            for _ in 0..n {
                let a = send(
                    "POST",
                    &format!("{}{path}", bin.url),
                    &[
                        ("content-type", "application/json"),
                        ("anthropic-version", "2023-06-01"),
                    ],
                    req.to_string(),
                )
                .await;
                let text = a.text();
                assert!(
                    !text.contains("shell_exec") && !text.contains("rm -rf"),
                    "{format} {stream}: a call inside the provider's error reached the agent: {text}"
                );
                assert!(
                    text.contains("Provider returned error"),
                    "{format} {stream}: {text}"
                );
                if format != "messages" {
                    assert!(text.contains("Acme"), "{format} {stream}: {text}");
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_pass_through_body_gets_the_request_body_timeout_and_frees_its_slot() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mock = start_mock(vec![Reply::json(200, "{\"data\": []}")]).await;
    let bin = Bin::start(
        &mock.base_url(),
        &[("00-default.toml", DEFAULT)],
        "limits.request_body_timeout_secs = 1\nlimits.max_streams = 1\nupstream.timeout_secs = 600",
    )
    .await;
    let addr = bin.url.trim_start_matches("http://").to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // A body announced at 100 bytes, of which 10 come, then nothing.
    s.write_all(
        b"POST /v1/embeddings HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
          content-length: 100\r\n\r\n{\"model\":",
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let mut buf = vec![0u8; 4096];
    let read = tokio::time::timeout(std::time::Duration::from_secs(20), s.read(&mut buf)).await;
    let head = match read {
        Ok(Ok(n)) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Ok(Err(_)) => String::new(),
        Err(_) => panic!("a stalled pass-through body held its request past 20 s"),
    };
    assert!(!head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    drop(s);
    // The one stream slot is free again: a gated request goes through.
    let a = send(
        "POST",
        &format!("{}/v1/embeddings", bin.url),
        &[("content-type", "application/json")],
        json!({"model": "m", "input": "x"}).to_string(),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_heads_are_bounded_and_unfinished_ones_charged_to_the_budget() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mock = start_mock(vec![Reply::json(200, "{\"data\": []}"); 4]).await;
    let bin = Bin::start(
        &mock.base_url(),
        &[("00-default.toml", DEFAULT)],
        "limits.max_body_bytes_in_flight = 1048576\nlimits.header_read_timeout_secs = 30",
    )
    .await;
    let addr = bin.url.trim_start_matches("http://").to_string();
    let models = format!("{}/v1/models", bin.url);
    assert_eq!(send("GET", &models, &[], "").await.status, 200);

    // A head over the bound is refused at once.
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let big = format!(
        "GET /v1/models HTTP/1.1\r\nhost: x\r\nx-pad: {}\r\n\r\n",
        "p".repeat(40 * 1024)
    );
    let _ = s.write_all(big.as_bytes()).await;
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), s.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert!(
        String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 431"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );

    // Forty connections each holding an unfinished head take the budget
    // (32 KiB each, 1 MiB in all): a new request is refused, not served
    // out of memory nobody counted.
    let mut held = Vec::new();
    for _ in 0..40 {
        let mut c = tokio::net::TcpStream::connect(&addr).await.unwrap();
        c.write_all(b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-pad: ")
            .await
            .unwrap();
        c.write_all(&[b'p'; 8000]).await.unwrap();
        held.push(c);
    }
    // Until the server has taken all forty (a busy machine takes longer
    // than a quiet one), a request may still be served.
    let mut refused = None;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let r = send("GET", &models, &[], "").await;
        if r.status == 503 {
            refused = Some(r);
            break;
        }
    }
    let refused = refused.expect("a request is refused while unfinished heads hold the budget");
    assert!(
        refused.text().contains("The server is busy"),
        "{}",
        refused.text()
    );
    assert!(bin.metrics().await.contains("body_bytes"));
    // They leave: service is back.
    drop(held);
    let mut back = 0;
    for _ in 0..50 {
        back = send("GET", &models, &[], "").await.status.as_u16();
        if back == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(back, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_approval_is_bound_to_the_agent_whose_token_asked() {
    use crate::accumulate::Acc;
    use crate::approval::{answer_with, approval_config, decide, pending, request, ARGS, ASK};
    std::env::set_var("TG_IT_AGENT_A", "agent-a-token-0123456789");
    std::env::set_var("TG_IT_AGENT_B", "agent-b-token-0123456789");
    let clients = "[[client]]\nname = \"agent-a\"\ntoken_env = \"TG_IT_AGENT_A\"\n\n\
                   [[client]]\nname = \"agent-b\"\ntoken_env = \"TG_IT_AGENT_B\"\n";
    let mock = start_mock(vec![answer_with(&[("pay", "call_1", ARGS)])]).await;
    let gate = start_gate(
        &mock.base_url(),
        ASK,
        &format!("{}{clients}", approval_config(2.0)),
    )
    .await;
    // Both agents name the same session.
    let post = |token: &'static str| {
        let url = format!("{}/v1/chat/completions", gate.url);
        async move {
            send(
                "POST",
                &url,
                &[
                    ("content-type", "application/json"),
                    ("x-toolgate-session", "s1"),
                    ("authorization", &format!("Bearer {token}")),
                ],
                request(false).to_string(),
            )
            .await
        }
    };
    let a = tokio::spawn(post("agent-a-token-0123456789"));
    let q = pending(&gate, 1).await[0].clone();
    assert_eq!(q["principal"], "agent-a");
    let session = json!({"decision": "approve", "by": "ana", "scope": "session"});
    assert_eq!(
        decide(&gate, q["id"].as_str().unwrap(), session)
            .await
            .status,
        200
    );
    assert_eq!(Acc::from_json(&a.await.unwrap().body).all_calls().len(), 1);
    // A again: approved by the session. B, naming A's session: asked, and
    // with nobody answering, a neutral turn.
    assert_eq!(
        Acc::from_json(&post("agent-a-token-0123456789").await.body)
            .all_calls()
            .len(),
        1
    );
    let b = post("agent-b-token-0123456789").await;
    assert!(
        Acc::from_json(&b.body).all_calls().is_empty(),
        "{}",
        b.text()
    );
    gate.stop().await;
}
