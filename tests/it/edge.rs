//! Bad inputs and provider failures, each with its expected outcome.

use std::time::Duration;

use serde_json::json;

use crate::accumulate::Acc;
use crate::support::*;

fn assert_openai_error(a: &Answer, status: u16) -> serde_json::Value {
    assert_eq!(a.status.as_u16(), status, "{}", a.text());
    let v = a.json();
    assert!(v["error"]["message"].is_string(), "{v}");
    assert!(v["error"]["type"].is_string(), "{v}");
    let t = a.text().to_lowercase();
    assert!(!t.contains("toolgate") && !t.contains(UPSTREAM_KEY), "{t}");
    v
}

fn two_call_stream(first: (&str, &str), second: (&str, &str)) -> String {
    [
        chunk(
            0,
            json!({"role": "assistant", "content": "Working on it."}),
            None,
        ),
        chunk(0, call_delta(0, "call_a", first.0, first.1), None),
        chunk(0, call_delta(1, "call_b", second.0, second.1), None),
        chunk(0, json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".into(),
    ]
    .concat()
}

#[tokio::test]
async fn malformed_request_json_is_a_400_and_nothing_goes_upstream() {
    let mock = start_mock(vec![Reply::sse("data: [DONE]\n\n")]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    for body in ["{\"model\":", "[1,2]", "{\"tools\":\"x\"}"] {
        let a = send(
            "POST",
            &format!("{}/v1/chat/completions", gate.url),
            &[("content-type", "application/json")],
            body,
        )
        .await;
        let v = assert_openai_error(&a, 400);
        assert_eq!(v["error"]["type"], "invalid_request_error");
    }
    assert!(mock.requests().is_empty());
    gate.stop().await;
}

#[tokio::test]
async fn an_oversized_body_is_a_413_in_the_openai_shape() {
    let mock = start_mock(vec![Reply::sse("data: [DONE]\n\n")]).await;
    let gate = start_gate(
        &mock.base_url(),
        ALLOW_ALL,
        "[limits]\nmax_request_bytes = 1024\n",
    )
    .await;
    let mut req = chat_request(true, &["t"]);
    req["messages"][0]["content"] = json!("x".repeat(2000));
    let a = post_chat(&gate, &req).await;
    assert_openai_error(&a, 413);
    assert!(mock.requests().is_empty());
    let small = post_chat(&gate, &chat_request(true, &["t"])).await;
    assert_eq!(small.status, 200);
    gate.stop().await;
}

#[tokio::test]
async fn upstream_500_becomes_a_generic_502_when_generic_and_passthrough_keeps_it() {
    let upstream_body =
        r#"{"error":{"message":"internal detail: key sk-live-123 rejected by shard 7"}}"#;
    let mock = start_mock(vec![Reply::json(500, upstream_body)]).await;
    let generic = "[rewrite]\nerrors = \"generic\"\n";
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, generic).await;
    let a = post_chat(&gate, &chat_request(true, &["t"])).await;
    assert_openai_error(&a, 502);
    assert!(!a.text().contains("shard 7"));
    gate.stop().await;
    let gate = start_gate(
        &mock.base_url(),
        ALLOW_ALL,
        "[rewrite]\nerrors = \"passthrough\"\n",
    )
    .await;
    let a = post_chat(&gate, &chat_request(true, &["t"])).await;
    assert_eq!(a.status, 500);
    assert_eq!(a.text(), upstream_body);
    gate.stop().await;
}

#[tokio::test]
async fn upstream_429_keeps_its_status_with_a_generic_message_when_generic() {
    let mock = start_mock(vec![Reply::json(
        429,
        r#"{"error":{"message":"slow down, org-123"}}"#,
    )])
    .await;
    let generic = "[rewrite]\nerrors = \"generic\"\n";
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, generic).await;
    let a = post_chat(&gate, &chat_request(false, &["t"])).await;
    let v = assert_openai_error(&a, 429);
    assert_eq!(v["error"]["type"], "rate_limit_error");
    assert!(!a.text().contains("org-123"));
    gate.stop().await;
}

#[tokio::test]
async fn an_upstream_reset_mid_stream_ends_with_an_error_event_and_releases_nothing() {
    let body = [
        chunk(0, json!({"content": "partial "}), None),
        chunk(0, call_delta(0, "call_a", "t", "{\"a\":"), None),
    ]
    .concat();
    let mock = start_mock(vec![Reply::Sse {
        body: body.into(),
        chunk: 50,
        delay: Duration::ZERO,
        reset: true,
        gzip: false,
    }])
    .await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let a = post_chat(&gate, &chat_request(true, &["t"])).await;
    assert_eq!(a.status, 200);
    let acc = Acc::from_sse(&a.body);
    assert!(acc.error, "{}", a.text());
    assert!(acc.all_calls().is_empty());
    assert_eq!(
        acc.content.get(&0).map(String::as_str),
        Some("partial "),
        "{}",
        a.text()
    );
    assert!(a.text().ends_with("data: [DONE]\n\n"));
    let audit = gate.audit_flushed().await;
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (audit[0]["verdict"].as_str(), audit[0]["gate"].as_str()),
        (Some("reject"), Some("stream"))
    );
    gate.stop().await;
}

#[tokio::test]
async fn a_stream_that_ends_without_its_finish_never_releases_held_calls() {
    let body = [chunk(0, call_delta(0, "call_a", "t", "{\"q\":"), None)].concat();
    let mock = start_mock(vec![Reply::sse(body)]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let a = post_chat(&gate, &chat_request(true, &["t"])).await;
    let acc = Acc::from_sse(&a.body);
    assert!(acc.error && acc.all_calls().is_empty(), "{}", a.text());
    assert!(!a.text().contains("call_a"));
    gate.stop().await;
}

/// A call complete before the stream is cut went out when it completed
/// (gated); the cut still ends the stream with an error and no finish.
#[tokio::test]
async fn a_stream_cut_after_a_complete_call_ends_with_an_error() {
    let body = [chunk(0, call_delta(0, "call_a", "t", "{}"), None)].concat();
    let mock = start_mock(vec![Reply::sse(body)]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let a = post_chat(&gate, &chat_request(true, &["t"])).await;
    let acc = Acc::from_sse(&a.body);
    assert!(acc.error, "{}", a.text());
    assert_eq!(acc.all_calls().len(), 1, "{}", a.text());
    assert!(
        !a.text().contains("\"finish_reason\":\"tool_calls\""),
        "{}",
        a.text()
    );
    assert_eq!(gate.audit_flushed().await.len(), 1);
    gate.stop().await;
}

#[tokio::test]
async fn gzip_encoded_upstream_bodies_are_decoded_and_gated() {
    let stream = two_call_stream(("keep", "{}"), ("drop", "{}"));
    let mock = start_mock(vec![
        Reply::Sse {
            body: stream.into(),
            chunk: 20,
            delay: Duration::ZERO,
            reset: false,
            gzip: true,
        },
        Reply::Body {
            status: 200,
            content_type: "application/json",
            body: Acc::from_sse(two_call_stream(("keep", "{}"), ("drop", "{}")).as_bytes())
                .to_completion()
                .to_string()
                .into(),
            gzip: true,
            encoding: None,
        },
    ])
    .await;
    let gate = start_gate(&mock.base_url(), &deny(&["drop"]), "").await;
    let a = post_chat(&gate, &chat_request(true, &["keep", "drop"])).await;
    assert!(a.headers.get("content-encoding").is_none());
    let names: Vec<String> = Acc::from_sse(&a.body)
        .all_calls()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["keep"]);
    let a = post_chat(&gate, &chat_request(false, &["keep", "drop"])).await;
    let names: Vec<String> = Acc::from_json(&a.body)
        .all_calls()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["keep"]);
    assert_eq!(mock.requests()[0].headers["accept-encoding"], "identity");
    gate.stop().await;
}

#[tokio::test]
async fn an_encoding_toolgate_cannot_read_is_refused_not_forwarded() {
    let mock = start_mock(vec![Reply::Body {
        status: 200,
        content_type: "text/event-stream",
        body: two_call_stream(("a", "{}"), ("b", "{}")).into(),
        gzip: false,
        encoding: Some("br"),
    }])
    .await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let a = post_chat(&gate, &chat_request(true, &["a", "b"])).await;
    assert_openai_error(&a, 502);
    gate.stop().await;
}

#[tokio::test]
async fn an_unexpected_content_type_is_a_502() {
    let mock = start_mock(vec![Reply::Body {
        status: 200,
        content_type: "text/plain",
        body: "hello".into(),
        gzip: false,
        encoding: None,
    }])
    .await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    assert_openai_error(&post_chat(&gate, &chat_request(false, &[])).await, 502);
    gate.stop().await;
}

#[tokio::test]
async fn n_equals_2_gates_each_choice_on_its_own() {
    let body = [
        chunk(0, json!({"role": "assistant"}), None),
        chunk(1, json!({"role": "assistant"}), None),
        chunk(0, call_delta(0, "c0", "keep", "{\"x\":1}"), None),
        chunk(1, call_delta(0, "c1", "drop", "{}"), None),
        chunk(0, json!({}), Some("tool_calls")),
        chunk(1, json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let mock = start_mock(vec![
        Reply::sse(body.clone()),
        Reply::json(
            200,
            Acc::from_sse(body.as_bytes()).to_completion().to_string(),
        ),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), &deny(&["drop"]), "").await;
    let mut req = chat_request(true, &["keep", "drop"]);
    req["n"] = json!(2);
    for stream in [true, false] {
        req["stream"] = json!(stream);
        let a = post_chat(&gate, &req).await;
        let acc = if stream {
            Acc::from_sse(&a.body)
        } else {
            Acc::from_json(&a.body)
        };
        assert_eq!(
            acc.calls_of(0)
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            ["keep"],
            "{}",
            a.text()
        );
        assert!(acc.calls_of(1).is_empty());
        assert_eq!(acc.content[&1], "I wasn't able to complete that action.");
        assert_eq!(
            (acc.finish[&0].as_str(), acc.finish[&1].as_str()),
            ("tool_calls", "stop")
        );
    }
    gate.stop().await;
}

#[tokio::test]
async fn legacy_function_call_is_gated_streaming_and_not() {
    crate::need_fixtures!();
    let dir = fixtures_dir().unwrap();
    let stream = std::fs::read(dir.join("openai-chat-legacy-function-call-stream.sse")).unwrap();
    let whole = std::fs::read(dir.join("openai-chat-legacy-function-call-nonstream.json")).unwrap();
    let mock = start_mock(vec![Reply::sse(stream), Reply::json(200, whole)]).await;
    let gate = start_gate(&mock.base_url(), &deny(&["repl", "book_a_flight"]), "").await;
    let req = |stream: bool| {
        json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "x"}],
        "functions": [{"name": "repl"}, {"name": "book_a_flight"}]})
    };
    let a = post_chat(&gate, &req(true)).await;
    assert!(!a.text().contains("\"function_call\":{"), "{}", a.text());
    assert_eq!(Acc::from_sse(&a.body).finish[&0], "stop");
    let a = post_chat(&gate, &req(false)).await;
    let v = a.json();
    assert!(
        v["choices"][0]["message"].get("function_call").is_none(),
        "{v}"
    );
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    gate.stop().await;
}

#[tokio::test]
async fn arguments_that_are_not_json_and_undeclared_tools_are_rejected() {
    let body = two_call_stream(("declared", "{\"a\": tru"), ("undeclared", "{}"));
    let mock = start_mock(vec![Reply::sse(body)]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let a = post_chat(&gate, &chat_request(true, &["declared"])).await;
    let acc = Acc::from_sse(&a.body);
    assert!(acc.all_calls().is_empty(), "{}", a.text());
    assert_eq!(
        acc.content[&0],
        "Working on it.\n\nI wasn't able to complete that action."
    );
    let audit = gate.audit_flushed().await;
    let why: Vec<(&str, &str)> = audit
        .iter()
        .map(|r| {
            (
                r["gate"].as_str().unwrap(),
                r["rule"].as_str().or(r["reason"].as_str()).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        why,
        [
            ("integrity", "args_not_json"),
            ("policy", "undeclared-tool")
        ]
    );
    gate.stop().await;
}

#[tokio::test]
async fn oversized_tool_arguments_are_rejected_and_audited() {
    let big = format!("{{\"blob\":\"{}\"}}", "z".repeat(5000));
    let body = two_call_stream(("t", &big), ("t", "{}"));
    let mock = start_mock(vec![Reply::sse(body)]).await;
    let gate = start_gate(
        &mock.base_url(),
        ALLOW_ALL,
        "[limits]\nmax_tool_args_bytes = 1000\n",
    )
    .await;
    let a = post_chat(&gate, &chat_request(true, &["t"])).await;
    let acc = Acc::from_sse(&a.body);
    assert_eq!(acc.all_calls().len(), 1);
    assert_eq!(acc.all_calls()[0].id, "call_b");
    let audit = gate.audit_flushed().await;
    assert_eq!(audit[0]["reason"], "args_too_large");
    assert_eq!(audit[0]["args_oversized"], true);
    gate.stop().await;
}

#[tokio::test]
async fn the_audit_trail_has_a_hash_of_the_arguments_never_the_arguments() {
    let secret_args = "{\"note\":\"SECRET-ARG-MARKER-42\"}";
    let body = two_call_stream(("t", secret_args), ("u", "{}"));
    let mock = start_mock(vec![Reply::sse(body)]).await;
    let gate = start_gate(&mock.base_url(), &deny(&["u"]), "").await;
    let mut req = chat_request(true, &["t", "u"]);
    req["messages"][0]["content"] = json!("PROMPT-MARKER-77");
    post_chat(&gate, &req).await;
    let audit = gate.audit_flushed().await;
    let raw = std::fs::read_to_string(gate.dir.0.join("audit.jsonl")).unwrap();
    assert!(
        !raw.contains("SECRET-ARG-MARKER")
            && !raw.contains("PROMPT-MARKER")
            && !raw.contains(UPSTREAM_KEY)
    );
    assert_eq!(audit.len(), 2);
    let r = &audit[0];
    for k in [
        "ts",
        "request_id",
        "principal",
        "tool",
        "call_id",
        "verdict",
        "gate",
        "reason",
        "gates",
        "args_sha256",
        "args_bytes",
        "policy",
    ] {
        assert!(r.get(k).is_some(), "missing {k} in {r}");
    }
    assert_eq!(
        r["args_sha256"],
        toolgate::digest::sha256_hex(secret_args.as_bytes())
    );
    assert_eq!(r["args_bytes"], secret_args.len());
    assert_eq!(
        (r["verdict"].as_str(), audit[1]["verdict"].as_str()),
        (Some("allow"), Some("deny"))
    );
    assert_eq!(audit[1]["rule"], "test-deny");
    assert_eq!(r["request_id"], audit[1]["request_id"]);
    gate.stop().await;
}

/// Opens a stream, reads its first frame and goes away; whether the mock
/// then saw its stream cancelled within `polls` × 20 ms.
async fn leave_after_first_frame(gate: &Gate, mock: &Mock, polls: usize) -> bool {
    {
        use http_body_util::BodyExt;
        let (_, mut body) = open_stream(gate, &chat_request(true, &[]), false).await;
        let first = body.frame().await.unwrap().unwrap();
        assert!(first.is_data());
        // Dropping the body closes the connection.
    }
    for _ in 0..polls {
        if mock.cancelled.load(std::sync::atomic::Ordering::SeqCst) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Between two upstream events nothing is written to the agent, so only
/// the read that watches the agent's connection while its answer streams
/// (hyper's server reads it while the response streams) can tell that it
/// left.
#[tokio::test]
async fn a_client_that_goes_away_between_events_cancels_the_upstream_at_once() {
    let mut body = String::new();
    for i in 0..3 {
        body.push_str(&chunk(0, json!({"content": format!("tok{i} ")}), None));
    }
    // The first event at once, the next 30 s later.
    let mock = start_mock(vec![Reply::Paced {
        body: body.into(),
        delay: Duration::from_secs(30),
    }])
    .await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let cancelled = leave_after_first_frame(&gate, &mock, 250).await;
    assert!(
        cancelled,
        "the upstream stream was not cancelled while it waited for its next event"
    );
    gate.stop().await;
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_the_upstream_stream() {
    let mut body = String::new();
    for i in 0..200 {
        body.push_str(&chunk(0, json!({"content": format!("tok{i} ")}), None));
    }
    let mock = start_mock(vec![Reply::Sse {
        body: body.into(),
        chunk: 120,
        delay: Duration::from_millis(20),
        reset: false,
        gzip: false,
    }])
    .await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let cancelled = leave_after_first_frame(&gate, &mock, 100).await;
    assert!(
        cancelled,
        "the upstream kept streaming after the agent left"
    );
    gate.stop().await;
}
