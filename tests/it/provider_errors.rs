//! The provider's errors reach the agent as the provider said them (status,
//! type, code, param, message, details, request id; secrets redacted), in
//! the shape of the route, read by the official SDKs; toolgate's own errors
//! stay generic, and `errors = "generic"` hides the provider's words too.

use serde_json::{json, Value};

use crate::support::*;

fn headed(id_header: &'static str, id: &str, reply: Reply) -> Reply {
    Reply::Headed(vec![(id_header, id.to_string())], Box::new(reply))
}

fn anthropic_error(status: u16, kind: &str, message: &str, details: Value) -> Reply {
    let mut e = json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011abc"});
    if !details.is_null() {
        e["error"]["details"] = details;
    }
    headed(
        "request-id",
        "req_011abc",
        Reply::json(status, e.to_string()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdks_read_the_providers_errors_through_toolgate() {
    let invalid = json!({"error": {"message": "Invalid 'tools[0].function.name': string too long.",
        "type": "invalid_request_error", "param": "tools[0].function.name", "code": "string_above_max_length"}});
    let limited = json!({"error": {"message": "Rate limit reached for gpt-4o on tokens per min (TPM).",
        "type": "tokens", "param": null, "code": "rate_limit_exceeded"}});
    let mid_stream = format!(
        "{}data: {{\"error\":{{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\",\"code\":\"internal_error\"}}}}\n\n",
        chunk(0, json!({"content": "Let me "}), None)
    );
    let overloaded_event = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n\
        event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let mock = start_mock(vec![
        headed(
            "x-request-id",
            "req_openai_1",
            Reply::json(400, invalid.to_string()),
        ),
        Reply::Headed(
            vec![
                ("x-request-id", "req_openai_2".into()),
                ("retry-after", "7".into()),
                ("x-ratelimit-remaining-tokens", "0".into()),
            ],
            Box::new(Reply::json(429, limited.to_string())),
        ),
        headed("x-request-id", "req_openai_3", Reply::sse(mid_stream)),
        anthropic_error(
            404,
            "not_found_error",
            "thread not found",
            json!({"error_code": "thread_not_found"}),
        ),
        anthropic_error(
            400,
            "invalid_request_error",
            "prompt is too long: 212000 tokens > 200000 maximum",
            Value::Null,
        ),
        anthropic_error(529, "overloaded_error", "Overloaded", Value::Null),
        headed("request-id", "req_011stream", Reply::sse(overloaded_event)),
    ])
    .await;
    let gate = start_gate(
        &mock.base_url(),
        ALLOW_ALL,
        &messages_upstream(&mock.base_url()),
    )
    .await;
    let cases = json!([
        ["openai", false],
        ["openai", false],
        ["openai", true],
        ["anthropic", false],
        ["anthropic", false],
        ["anthropic", false],
        ["anthropic", true]
    ]);
    let Some(got) = run_sdk(
        "provider_errors.py",
        vec![gate.url.clone(), cases.to_string()],
    )
    .await
    else {
        return;
    };
    let [bad, limit, mid, thread, long, overloaded, event] = got.as_array().unwrap().as_slice()
    else {
        panic!("{got}");
    };
    assert_eq!(bad["class"], "BadRequestError", "{bad}");
    assert_eq!(bad["status"], 400);
    assert_eq!(bad["code"], "string_above_max_length");
    assert_eq!(bad["param"], "tools[0].function.name");
    assert_eq!(bad["type"], "invalid_request_error");
    // The SDK prefixes the status: "Error code: 400 - <the provider's message>".
    assert!(
        bad["message"]
            .as_str()
            .unwrap()
            .ends_with("Invalid 'tools[0].function.name': string too long."),
        "{bad}"
    );
    assert_eq!(bad["request_id"], "req_openai_1");

    assert_eq!(limit["class"], "RateLimitError", "{limit}");
    assert_eq!(
        (&limit["type"], &limit["code"]),
        (&json!("tokens"), &json!("rate_limit_exceeded"))
    );
    assert!(
        limit["message"]
            .as_str()
            .unwrap()
            .contains("tokens per min"),
        "{limit}"
    );

    assert_eq!(mid["class"], "APIError", "{mid}");
    assert_eq!(mid["code"], "internal_error");
    assert_eq!(
        mid["message"],
        "The server had an error while processing your request."
    );

    assert_eq!(thread["class"], "ThreadNotFoundError", "{thread}");
    assert_eq!(thread["type"], "not_found_error");
    assert_eq!(thread["details"], json!({"error_code": "thread_not_found"}));
    assert_eq!(thread["request_id"], "req_011abc");

    assert_eq!(long["class"], "BadRequestError", "{long}");
    assert!(
        long["message"]
            .as_str()
            .unwrap()
            .contains("prompt is too long"),
        "{long}"
    );

    assert_eq!(overloaded["status"], 529, "{overloaded}");
    assert_eq!(overloaded["type"], "overloaded_error");

    assert_eq!(event["type"], "overloaded_error", "{event}");
    assert!(
        event["message"].as_str().unwrap().contains("Overloaded"),
        "{event}"
    );

    // Every id toolgate answered with stays under a name of its own.
    gate.stop().await;
}

#[tokio::test]
async fn provider_errors_are_redacted_and_toolgate_keeps_its_own_generic() {
    let secret = format!(
        r#"{{"error":{{"message":"upstream key {UPSTREAM_KEY} and AKIAIOSFODNN7EXAMPLE rejected by shard 7","type":"server_error"}}}}"#
    );
    let mock = start_mock(vec![Reply::json(500, secret.clone())]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let a = post_chat(&gate, &chat_request(false, &["t"])).await;
    assert_eq!(a.status, 500);
    let v = a.json();
    let m = v["error"]["message"].as_str().unwrap();
    assert!(m.contains("rejected by shard 7"), "{m}");
    assert!(
        !a.text().contains(UPSTREAM_KEY) && !a.text().contains("AKIAIOSFODNN7EXAMPLE"),
        "{m}"
    );
    // toolgate's own refusal says nothing of the provider.
    let bad = send(
        "POST",
        &format!("{}/v1/chat/completions", gate.url),
        &[],
        "{",
    )
    .await;
    assert_eq!(bad.status, 400);
    assert!(!bad.text().contains("shard"));
    gate.stop().await;

    // A 401 is about toolgate's key: its message, which may quote part of it, is replaced.
    let mock = start_mock(vec![Reply::json(401,
        r#"{"error":{"message":"Incorrect API key provided: sk-or-v1-****cdef.","type":"invalid_request_error","code":"invalid_api_key"}}"#)]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let a = post_chat(&gate, &chat_request(false, &["t"])).await;
    assert_eq!(a.status, 401);
    assert_eq!(a.json()["error"]["code"], "invalid_api_key");
    assert!(!a.text().contains("cdef"), "{}", a.text());
    gate.stop().await;

    // errors = "generic": the provider's words only in the log.
    let mock = start_mock(vec![Reply::json(500, secret)]).await;
    let gate = start_gate(
        &mock.base_url(),
        ALLOW_ALL,
        "[rewrite]\nerrors = \"generic\"\n",
    )
    .await;
    let a = post_chat(&gate, &chat_request(true, &["t"])).await;
    assert_eq!(a.status, 502);
    assert!(!a.text().contains("shard 7"));
    gate.stop().await;
}

#[tokio::test]
async fn a_provider_error_mid_stream_reaches_each_route_in_its_shape() {
    let responses = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n\
        event: error\ndata: {\"type\":\"error\",\"sequence_number\":1,\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model.\",\"param\":\"input\"}\n\n";
    let mock = start_mock(vec![Reply::sse(responses)]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    let body = json!({"model": "m", "stream": true, "input": "hi"});
    let a = send(
        "POST",
        &format!("{}/v1/responses", gate.url),
        &[],
        body.to_string(),
    )
    .await;
    let text = a.text();
    let error = text
        .split("\n\n")
        .find_map(|e| e.strip_prefix("event: error\ndata: "))
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(error["code"], "context_length_exceeded");
    assert_eq!(error["param"], "input");
    assert!(error["message"]
        .as_str()
        .unwrap()
        .contains("context window"));
    let failed = responses_failed(&text);
    assert_eq!(
        failed["response"]["error"]["code"], "context_length_exceeded",
        "{text}"
    );
    gate.stop().await;
}

/// The `response.failed` event of a Responses stream.
fn responses_failed(sse: &str) -> Value {
    sse.split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v["type"] == "response.failed")
        .unwrap_or(Value::Null)
}

/// `errors = "passthrough"` forwards the provider's error bodies as they
/// came, but never a call inside one: an error that also carries a call
/// (in a stream's event, or a whole body) reaches the agent as the error
/// alone, in the route's shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_never_forwards_a_call_inside_an_error() {
    let call = json!([{"index": 0, "id": "call_smuggled", "type": "function",
        "function": {"name": "delete_file", "arguments": "{}"}}]);
    let event = json!({"error": {"message": "overloaded", "code": 529},
        "choices": [{"index": 0, "delta": {"tool_calls": call}}]});
    let whole = json!({"error": {"message": "overloaded"},
        "choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": call}}]});
    let plain = json!({"error": {"message": "overloaded", "code": 529}});
    let cases = [
        (
            Reply::sse(format!("data: {event}\n\ndata: [DONE]\n\n")),
            true,
            true,
        ),
        (Reply::json(500, whole.to_string()), false, true),
        (Reply::json(200, whole.to_string()), false, true),
        // An event stream under an error status: no JSON error to read.
        (
            Reply::Headed(
                vec![("content-type", "text/event-stream".into())],
                Box::new(Reply::json(500, format!("data: {event}\n\n"))),
            ),
            true,
            false,
        ),
    ];
    for (reply, stream, said) in cases {
        let mock = start_mock(vec![reply]).await;
        let config = "[rewrite]\nerrors = \"passthrough\"\n";
        let gate = start_gate(&mock.base_url(), ALLOW_ALL, config).await;
        let a = post_chat(&gate, &chat_request(stream, &["delete_file"])).await;
        assert!(!a.text().contains("call_smuggled"), "{}", a.text());
        assert_eq!(a.text().contains("overloaded"), said, "{}", a.text());
        gate.stop().await;
    }
    // The same on the Responses API: an error event that also carries a
    // response with a call.
    let item = json!({"id": "fc_1", "type": "function_call", "status": "completed",
        "call_id": "call_smuggled", "name": "delete_file", "arguments": "{}"});
    let events = numbered_events([json!({"type": "error", "code": "server_error",
        "message": "overloaded", "param": null, "response": {"output": [item]}})]);
    let mock = start_mock(vec![Reply::sse(events)]).await;
    let config = "[rewrite]\nerrors = \"passthrough\"\n";
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, config).await;
    let req = json!({"model": "m", "stream": true, "input": "hi",
        "tools": [{"type": "function", "name": "delete_file", "parameters": {"type": "object"}}]});
    let a = post_chat_at(&gate, "/v1/responses", &req, &[]).await;
    assert!(!a.text().contains("call_smuggled"), "{}", a.text());
    assert!(a.text().contains("overloaded"), "{}", a.text());
    gate.stop().await;
    // An error alone still passes byte for byte.
    let mock = start_mock(vec![Reply::json(500, plain.to_string())]).await;
    let config = "[rewrite]\nerrors = \"passthrough\"\n";
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, config).await;
    let a = post_chat(&gate, &chat_request(false, &["delete_file"])).await;
    assert_eq!(a.status, 500);
    assert_eq!(a.text(), plain.to_string());
    gate.stop().await;
}
