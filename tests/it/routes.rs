//! Pass-through paths, refused endpoints, key handling, the admin port, shutdown.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;

use serde_json::json;

use crate::accumulate::Acc;
use crate::support::*;

#[tokio::test]
async fn other_paths_pass_through_with_the_key_injected_and_the_agents_removed() {
    let mock = start_mock(vec![Reply::json(
        200,
        r#"{"object":"list","data":[{"id":"m1"}]}"#,
    )])
    .await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let a = send(
        "GET",
        &format!("{}/v1/models?x=1", gate.url),
        &[
            ("authorization", "Bearer agent-token"),
            ("x-toolgate-phase", "planning"),
        ],
        "",
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["data"][0]["id"], "m1");
    let seen = &mock.requests()[0];
    assert_eq!(seen.path, "/v1/models?x=1");
    assert_eq!(
        seen.headers["authorization"],
        format!("Bearer {UPSTREAM_KEY}")
    );
    assert!(seen.headers.get("x-toolgate-phase").is_none());
    gate.stop().await;
}

#[tokio::test]
async fn auth_passthrough_forwards_the_agents_authorization() {
    let mock = start_mock(vec![Reply::json(200, "{}")]).await;
    let gate = start_gate(
        &mock.base_url(),
        ALLOW_ALL,
        "upstream.auth = \"passthrough\"",
    )
    .await;
    send(
        "GET",
        &format!("{}/v1/models", gate.url),
        &[("authorization", "Bearer agent-token")],
        "",
    )
    .await;
    assert_eq!(
        mock.requests()[0].headers["authorization"],
        "Bearer agent-token"
    );
    gate.stop().await;
}

#[tokio::test]
async fn the_upstream_key_never_reaches_the_agent_or_the_logs_of_an_error() {
    let mock = start_mock(vec![Reply::json(
        401,
        format!(r#"{{"error":{{"message":"Incorrect API key provided: {UPSTREAM_KEY}"}}}}"#),
    )])
    .await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    for path in ["/v1/chat/completions", "/v1/embeddings"] {
        let a = send(
            "POST",
            &format!("{}{path}", gate.url),
            &[("content-type", "application/json")],
            chat_request(false, &[]).to_string(),
        )
        .await;
        assert_eq!(a.status, 401);
        assert!(!a.text().contains(UPSTREAM_KEY), "{}", a.text());
    }
    gate.stop().await;
}

#[tokio::test]
async fn endpoints_that_could_return_ungated_tool_calls_are_refused() {
    let mock = start_mock(vec![Reply::json(200, "{}")]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    for path in [
        "/v1/responses/resp_1",
        "/v1/messages/msg_1/content",
        "/v1/chat/completions/cmpl_1",
        "/v1/threads/t/runs",
        "/v1/RESPONSES/x/y",
    ] {
        let a = send("POST", &format!("{}{path}", gate.url), &[], "{}").await;
        assert_eq!(a.status, 404, "{path}");
        assert!(
            a.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("/v1/chat/completions"),
            "{path}"
        );
        // Paths of the Messages family answer in its error shape.
        assert_eq!(
            a.json()["type"] == "error",
            path.contains("messages"),
            "{path}"
        );
    }
    let a = send("GET", &format!("{}/v1/chat/completions", gate.url), &[], "").await;
    assert_eq!(a.status, 405);
    let a = send(
        "POST",
        &format!("{}/v1/chat%2Fcompletions", gate.url),
        &[],
        "{}",
    )
    .await;
    assert_eq!(a.status, 400);
    assert!(
        mock.requests().is_empty(),
        "nothing refused may reach the upstream"
    );
    gate.stop().await;
}

#[tokio::test]
async fn h2c_clients_are_served_on_the_data_port() {
    let body = [
        chunk(0, json!({"content": "hi"}), Some("stop")),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let mock = start_mock(vec![Reply::sse(body)]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let (version, body) = open_stream(&gate, &chat_request(true, &[]), true).await;
    assert_eq!(version, http::Version::HTTP_2);
    use http_body_util::BodyExt;
    let b = body.collect().await.unwrap().to_bytes();
    assert_eq!(Acc::from_sse(&b).content[&0], "hi");
    gate.stop().await;
}

#[tokio::test]
async fn admin_port_serves_health_readiness_and_metrics() {
    let body = [
        chunk(0, call_delta(0, "a", "ok", "{}"), None),
        chunk(0, call_delta(1, "b", "no", "{}"), None),
        chunk(0, json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let mock = start_mock(vec![Reply::sse(body)]).await;
    let gate = start_gate(&mock.base_url(), &deny(&["no"]), "").await;
    assert_eq!(
        send("GET", &format!("{}/healthz", gate.admin), &[], "")
            .await
            .status,
        200
    );
    assert_eq!(
        send("GET", &format!("{}/readyz", gate.admin), &[], "")
            .await
            .status,
        200
    );
    post_chat(&gate, &chat_request(true, &["ok", "no"])).await;
    let m = send("GET", &format!("{}/metrics", gate.admin), &[], "")
        .await
        .text();
    for needle in [
        "toolgate_requests_total{route=\"chat_completions\",status=\"200\"} 1",
        "toolgate_tool_calls_total{protocol=\"chat_completions\",verdict=\"allow\",gate=\"policy\",rule=\"\",tool=\"other\"} 1",
        "toolgate_tool_calls_total{protocol=\"chat_completions\",verdict=\"deny\",gate=\"policy\",rule=\"test-deny\",tool=\"other\"} 1",
        "toolgate_upstream_latency_seconds_count{upstream=\"default\",protocol=\"chat_completions\"} 1",
        // Each call went out on its own, complete before the finish.
        "toolgate_tool_call_release_seconds_count 2",
    ] {
        assert!(m.contains(needle), "missing {needle} in\n{m}");
    }
    gate.stop().await;
}

#[tokio::test]
async fn shutdown_lets_an_in_flight_stream_finish() {
    let mock = start_mock(vec![slow_text_then_call(Duration::from_millis(25))]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let url = gate.url.clone();
    let req = tokio::spawn(async move {
        send(
            "POST",
            &format!("{url}/v1/chat/completions"),
            &[],
            chat_request(true, &["t"]).to_string(),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopping = tokio::spawn(gate.stop());
    let a = req.await.unwrap();
    let dir = stopping.await.unwrap();
    let acc = Acc::from_sse(&a.body);
    assert!(acc.done && !acc.error, "{}", a.text());
    assert_eq!(acc.all_calls().len(), 1);
    assert!(acc.content[&0].starts_with("0 1 2"));
    let audit = std::fs::read_to_string(dir.0.join("audit.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r| !crate::support::trail_record(r))
        .collect();
    assert_eq!(records.len(), 1, "the audit trail is flushed at shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_pass_through_body_is_cut_off_at_the_upstream_deadline() {
    // The head and a first piece arrive at once, then the upstream stalls.
    let mock = start_mock(vec![Reply::Sse {
        body: Bytes::from(vec![b'x'; 64 * 1024]),
        chunk: 1024,
        delay: Duration::from_secs(30),
        reset: false,
        gzip: false,
    }])
    .await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "upstream.timeout_secs = 1\n").await;
    let client: hyper_util::client::legacy::Client<_, http_body_util::Empty<Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let started = std::time::Instant::now();
    let resp = client
        .get(format!("{}/v1/models", gate.url).parse().unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(10), resp.into_body().collect())
        .await
        .expect("the body hung past the deadline");
    assert!(body.is_err(), "a cut-off body must not look complete");
    assert!(started.elapsed() < Duration::from_secs(5));
    gate.stop().await;
}

#[tokio::test]
async fn every_response_carries_the_request_id_its_audit_records_carry() {
    let mut body = String::new();
    body.push_str(&chunk(0, call_delta(0, "c1", "shell", "{}"), None));
    body.push_str(&chunk(0, json!({}), Some("tool_calls")));
    body.push_str("data: [DONE]\n\n");
    let mock = start_mock(vec![Reply::sse(body)]).await;
    let gate = start_gate(&mock.base_url(), &deny(&["shell"]), "").await;
    let req = chat_request(true, &["shell"]);
    // The agent's own id comes back and is in the audit trail.
    let a = post_chat_at(
        &gate,
        "/v1/chat/completions",
        &req,
        &[("x-request-id", "agent-42.a_b")],
    )
    .await;
    assert_eq!(a.headers["x-request-id"], "agent-42.a_b");
    // Without one, or with one that is not an id, toolgate makes one.
    let long = "x".repeat(129);
    let mut made = Vec::new();
    for bad in [None, Some("two words"), Some(long.as_str()), Some("")] {
        let h: Vec<(&str, &str)> = bad.iter().map(|b| ("x-request-id", *b)).collect();
        let a = post_chat_at(&gate, "/v1/chat/completions", &req, &h).await;
        let id = a.headers["x-request-id"].to_str().unwrap().to_string();
        assert!(Some(id.as_str()) != bad && !id.is_empty(), "{bad:?} → {id}");
        made.push(id);
    }
    made.sort();
    made.dedup();
    assert_eq!(made.len(), 4, "a new id each time: {made:?}");
    let audit = gate.audit_flushed().await;
    let ids: Vec<&str> = audit
        .iter()
        .filter_map(|r| r["request_id"].as_str())
        .collect();
    assert!(ids.contains(&"agent-42.a_b"), "{ids:?}");
    assert!(
        made.iter().all(|m| ids.contains(&m.as_str())),
        "{ids:?} {made:?}"
    );
    // Errors too: a refused route, a bad body, a pass-through.
    let refused = send(
        "POST",
        &format!("{}/v1/assistants", gate.url),
        &[("x-request-id", "r-1")],
        "{}",
    )
    .await;
    assert_eq!(refused.status, 404);
    assert_eq!(refused.headers["x-request-id"], "r-1");
    // A route toolgate does not serve says which ones it does.
    let text = String::from_utf8_lossy(&refused.body);
    assert!(
        text.contains("Use POST /v1/chat/completions, POST /v1/responses or POST /v1/messages"),
        "{text}"
    );
    let bad = post_chat_at(&gate, "/v1/chat/completions", &json!([]), &[]).await;
    assert_eq!(bad.status, 400);
    assert!(bad.headers.contains_key("x-request-id"));
    let passed = send(
        "GET",
        &format!("{}/v1/models", gate.url),
        &[("x-request-id", "p-1")],
        "",
    )
    .await;
    assert_eq!(passed.headers["x-request-id"], "p-1");
}

/// An upstream that answers every request with this raw HTTP response.
async fn raw_answer(response: &'static str) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = vec![0; 65536];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(response.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/v1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_error_is_logged_redacted_and_its_rate_limit_headers_pass() {
    const BODY: &str = r#"{"error":{"message":"Rate limit reached for key sk-or-v1-test-upstream-key-0123456789abcdef in org-x"}}"#;
    let resp: &'static str = Box::leak(
        format!(
            "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 7\r\nx-ratelimit-remaining-requests: 0\r\nx-ratelimit-reset-requests: 6s\r\nset-cookie: s=1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{BODY}",
            BODY.len()
        )
        .into_boxed_str(),
    );
    assert!(BODY.contains(UPSTREAM_KEY));
    let up = raw_answer(resp).await;
    let bin = crate::bin::Bin::start(&up, &[("p.toml", ALLOW_ALL)], "").await;
    let a = send(
        "POST",
        &format!("{}/v1/chat/completions", bin.url),
        &[
            ("content-type", "application/json"),
            ("x-request-id", "rl-1"),
        ],
        chat_request(false, &[]).to_string(),
    )
    .await;
    assert_eq!(a.status, 429);
    assert_eq!(a.headers["retry-after"], "7");
    assert_eq!(a.headers["x-ratelimit-remaining-requests"], "0");
    assert_eq!(a.headers["x-ratelimit-reset-requests"], "6s");
    assert!(!a.headers.contains_key("set-cookie"));
    // The provider's message passes with its key redacted.
    assert!(
        a.text().contains("org-x") && !a.text().contains(UPSTREAM_KEY),
        "the provider's message, redacted: {}",
        a.text()
    );
    let mut log = String::new();
    for _ in 0..50 {
        log = bin.stderr();
        if log.contains("Rate limit reached") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let line = log
        .lines()
        .find(|l| l.contains("Rate limit reached"))
        .unwrap_or_else(|| panic!("the provider's message is logged: {log}"));
    assert!(line.contains("rl-1"), "with the request id: {line}");
    assert!(line.contains("in org-x"), "{line}");
    assert!(!log.contains(UPSTREAM_KEY), "the key is redacted: {line}");
    assert!(
        !log.contains('\x1b'),
        "no colour codes in a log that is not a terminal: {line}"
    );
}

#[tokio::test]
async fn the_model_list_goes_to_the_upstream_of_the_clients_family() {
    let openai = start_mock(vec![Reply::json(
        200,
        r#"{"object":"list","data":[{"id":"gpt"}]}"#,
    )])
    .await;
    let anthropic = start_mock(vec![Reply::json(
        200,
        r#"{"data":[{"id":"claude","type":"model"}],"has_more":false}"#,
    )])
    .await;
    let gate = start_gate(
        &openai.base_url(),
        ALLOW_ALL,
        &messages_upstream(&anthropic.base_url()),
    )
    .await;
    // The anthropic SDK sends `anthropic-version` on every request.
    let a = send(
        "GET",
        &format!("{}/v1/models?limit=5", gate.url),
        &[
            ("anthropic-version", "2023-06-01"),
            ("x-api-key", "client-key"),
        ],
        "",
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["data"][0]["id"], "claude");
    let seen = anthropic.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/models?limit=5");
    assert_eq!(
        seen[0].headers["x-api-key"], UPSTREAM_KEY,
        "the Messages upstream's key"
    );
    assert!(openai.requests().is_empty());
    // Without it, the OpenAI-style upstream answers.
    let a = send("GET", &format!("{}/v1/models", gate.url), &[], "").await;
    assert_eq!(a.json()["data"][0]["id"], "gpt");
    assert_eq!(openai.requests().len(), 1);
    assert_eq!(anthropic.requests().len(), 1);
    gate.stop().await;
}

#[tokio::test]
async fn the_providers_request_id_reaches_the_agent_and_toolgates_has_its_own_name() {
    let ok = Reply::Headed(
        vec![("x-request-id", "req_provider_1".into())],
        Box::new(Reply::json(200, r#"{"object":"list","data":[]}"#)),
    );
    let mock = start_mock(vec![ok]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let a = send(
        "GET",
        &format!("{}/v1/models", gate.url),
        &[("x-request-id", "agent-7")],
        "",
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.headers["x-request-id"], "req_provider_1",
        "where the SDKs read it"
    );
    assert_eq!(a.headers["x-toolgate-request-id"], "agent-7");
    gate.stop().await;

    // An error the provider answered keeps its request id too (Anthropic's
    // `request-id`), beside the rate-limit headers.
    let refused = Reply::Headed(
        vec![
            ("request-id", "req_ant_9".into()),
            ("retry-after", "3".into()),
        ],
        Box::new(Reply::json(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        )),
    );
    let mock = start_mock(vec![refused]).await;
    let gate = start_gate(
        &mock.base_url(),
        ALLOW_ALL,
        &messages_upstream(&mock.base_url()),
    )
    .await;
    let body =
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
    let a = send(
        "POST",
        &format!("{}/v1/messages", gate.url),
        &[("content-type", "application/json")],
        body.to_string(),
    )
    .await;
    assert_eq!(a.status, 429, "{}", a.text());
    assert_eq!(a.headers["request-id"], "req_ant_9");
    assert_eq!(a.headers["retry-after"], "3");
    assert!(a.headers.contains_key("x-toolgate-request-id"));
    // Without a provider id, x-request-id is toolgate's own.
    let mock = start_mock(vec![Reply::json(200, "{}")]).await;
    let gate2 = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let a = send("GET", &format!("{}/v1/models", gate2.url), &[], "").await;
    assert_eq!(
        a.headers["x-request-id"],
        a.headers["x-toolgate-request-id"]
    );
    gate.stop().await;
    gate2.stop().await;
}
