//! `/metrics` through the real binary: decisions by protocol, verdict, gate,
//! rule and catalog tool (others `other`), gate and sensor latency, sensor
//! errors by kind, CEL run-time errors, and token usage by model.

use serde_json::json;

use crate::bin::Bin;
use crate::support::{
    call_delta, chat_request, chunk, messages_upstream, send, start_mock, Reply, KEY_ENV,
    UPSTREAM_KEY,
};

const POLICY: &str = r#"
[[tool]]
match = "read_file"
class = "read_only"

[[tool]]
match = "mcp__fs__*"
class = "read_only"

[[tool]]
match = "write_file"
class = "modifies_state"

[[rule]]
name = "reads"
tools = ["read_file", "mcp__fs__list"]
verdict = "allow"

[[rule]]
name = "big-args"
tools = ["read_file"]
when = "args.size > 3"
verdict = "reject"

[[rule]]
name = "no-shell"
tools = ["shell"]
verdict = "deny"

[[rule]]
name = "judged"
tools = ["write_file"]
verdict = "allow"
require = ["sentinel"]
fail = "closed"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_decisions_latencies_errors_and_tokens_with_bounded_labels() {
    let mut stream = String::new();
    for (i, name) in ["read_file", "shell", "mcp__fs__list"].iter().enumerate() {
        let id = format!("c{i}");
        stream.push_str(&chunk(
            0,
            call_delta(i as u32, &id, name, r#"{"path":"a"}"#),
            None,
        ));
    }
    stream.push_str(&chunk(0, json!({}), Some("tool_calls")));
    let usage = json!({"id": "x", "object": "chat.completion.chunk", "model": "gpt-test", "choices": [],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}});
    stream.push_str(&format!("data: {usage}\n\n"));
    stream.push_str("data: [DONE]\n\n");
    let whole = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "tool_use", "id": "tu1", "name": "write_file", "input": {"path": "a"}}],
        "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 3}});
    let responses = json!({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-r-1",
        "output": [{"type": "message", "id": "msg_r", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "hello", "annotations": []}]}],
        "usage": {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}});
    let mock = start_mock(vec![
        Reply::sse(stream),
        Reply::json(200, whole.to_string()),
        Reply::json(200, responses.to_string()),
    ])
    .await;
    // The judge is a port nothing listens on: the sensor fails to connect.
    let extra = format!(
        "{}[judge]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"{KEY_ENV}\"\ntimeout_ms = 2000\n",
        messages_upstream(&mock.base_url())
    );
    let bin = Bin::start(&mock.base_url(), &[("p.toml", POLICY)], &extra).await;
    // A tool result that holds the upstream key: redacted on its way up.
    let mut req = chat_request(true, &["read_file", "shell", "mcp__fs__list"]);
    req["messages"] = json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "t0", "type": "function",
            "function": {"name": "read_file", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t0", "content": format!("the key is {UPSTREAM_KEY}")},
    ]);
    let chat = send(
        "POST",
        &format!("{}/v1/chat/completions", bin.url),
        &[("content-type", "application/json")],
        req.to_string(),
    )
    .await;
    assert_eq!(chat.status, 200);
    let req = json!({"model": "claude-test", "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "write_file", "input_schema": {"type": "object"}}]});
    let messages = send(
        "POST",
        &format!("{}/v1/messages", bin.url),
        &[
            ("content-type", "application/json"),
            ("anthropic-version", "2023-06-01"),
        ],
        req.to_string(),
    )
    .await;
    assert_eq!(messages.status, 200);
    let r = send(
        "POST",
        &format!("{}/v1/responses", bin.url),
        &[("content-type", "application/json")],
        json!({"model": "gpt-r", "input": "hi"}).to_string(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

    let m = bin.metrics().await;
    for needle in [
        // A CEL error at run time counts its rule as matched (fail closed).
        r#"toolgate_tool_calls_total{protocol="chat_completions",verdict="reject",gate="policy",rule="big-args",tool="read_file"} 1"#,
        r#"toolgate_cel_errors_total{rule="big-args"} 1"#,
        // `shell` is not in the catalog: its label is `other`.
        r#"toolgate_tool_calls_total{protocol="chat_completions",verdict="deny",gate="policy",rule="no-shell",tool="other"} 1"#,
        // A glob entry labels the tools it matched.
        r#"toolgate_tool_calls_total{protocol="chat_completions",verdict="allow",gate="policy",rule="reads",tool="mcp__fs__*"} 1"#,
        r#"toolgate_tool_calls_total{protocol="messages",verdict="reject",gate="policy",rule="judged",tool="write_file"} 1"#,
        r#"toolgate_sensor_errors_total{sensor="sentinel",kind="connect"} 1"#,
        r#"toolgate_sensor_duration_seconds_count{sensor="sentinel"} 1"#,
        r#"toolgate_gate_duration_seconds_count{gate="policy"} 4"#,
        r#"toolgate_gate_duration_seconds_count{gate="integrity"} 4"#,
        r#"toolgate_tokens_total{model="gpt-test",kind="input"} 11"#,
        r#"toolgate_tokens_total{model="gpt-test",kind="output"} 7"#,
        r#"toolgate_tokens_total{model="claude-test",kind="input"} 5"#,
        r#"toolgate_tokens_total{model="claude-test",kind="output"} 3"#,
        r#"toolgate_requests_total{route="messages",status="200"} 1"#,
        // The OpenTelemetry GenAI families, by operation, provider, and the
        // models asked for and answered with.
        r#"gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="m",gen_ai_response_model="gpt-test",gen_ai_token_type="input"} 11.0"#,
        r#"gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="m",gen_ai_response_model="gpt-test",gen_ai_token_type="output"} 7.0"#,
        r#"gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_provider_name="anthropic",gen_ai_request_model="claude-test",gen_ai_response_model="claude-test",gen_ai_token_type="input"} 1"#,
        r#"gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-r",gen_ai_response_model="gpt-r-1",gen_ai_token_type="output"} 4.0"#,
        r#"gen_ai_server_request_duration_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="anthropic",gen_ai_request_model="claude-test",gen_ai_response_model="claude-test"} 1"#,
        r#"gen_ai_server_request_duration_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-r",gen_ai_response_model="gpt-r-1"} 1"#,
        // A stream's first token, and what toolgate added to it.
        r#"gen_ai_server_time_to_first_token_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="m",gen_ai_response_model="gpt-test"} 1"#,
        r#"toolgate_added_time_to_first_token_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="m",gen_ai_response_model="gpt-test"} 1"#,
        r#"gen_ai_server_time_per_output_token_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="m",gen_ai_response_model="gpt-test"} 1"#,
        // The upstream latency by upstream and protocol; a protocol with no
        // traffic yet has its zero series.
        r#"toolgate_upstream_latency_seconds_count{upstream="default",protocol="chat_completions"} 1"#,
        r#"toolgate_upstream_latency_seconds_count{upstream="messages",protocol="messages"} 1"#,
        r#"toolgate_upstream_latency_seconds_count{upstream="default",protocol="responses"} 1"#,
        // Families whose labels are known show 0 before their first event.
        r#"toolgate_overloads_total{limit="memory"} 0"#,
        r#"toolgate_redactions_total{kind="jwt"} 0"#,
        r#"toolgate_sensor_duration_seconds_count{sensor="injection"} 0"#,
    ] {
        assert!(m.contains(needle), "missing {needle} in\n{m}");
    }
    assert!(m.ends_with("# EOF\n"), "OpenMetrics text ends with # EOF");
    // The audit record of the call names the rule whose condition failed.
    let audit = bin.audit();
    let read = audit
        .iter()
        .find(|r| r["tool"] == "read_file")
        .expect("read_file audited");
    assert_eq!(read["cel_errors"], json!(["big-args"]), "{read}");
    assert!(
        audit
            .iter()
            .filter(|r| r["tool"] != "read_file")
            .all(|r| r.get("cel_errors").is_none()),
        "{audit:?}"
    );
    // Payload never becomes a label.
    assert!(!m.contains("\"path\""), "{m}");
    the_dashboard_reads_only_exported_metrics(&m);
}

/// Every metric deploy/grafana/toolgate.json queries is one toolgate exports.
fn the_dashboard_reads_only_exported_metrics(exposition: &str) {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/toolgate.json");
    let dash: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let exprs: Vec<String> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().clone())
        .map(|t| t["expr"].as_str().unwrap().to_string())
        .collect();
    // A metric's name stands before its selector; label names do not.
    let re = regex::Regex::new(r"((?:toolgate|gen_ai)_[a-z_]+)\{").unwrap();
    let mut names: Vec<&str> = exprs
        .iter()
        .flat_map(|e| {
            re.captures_iter(e)
                .filter_map(|c| c.get(1))
                .map(|m| m.as_str())
        })
        .collect();
    names.sort();
    names.dedup();
    assert!(names.len() >= 15, "{names:?}");
    for name in names {
        let family = ["_total", "_bucket", "_count", "_sum"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        assert!(
            exposition.contains(&format!("# TYPE {family} ")),
            "the dashboard reads {name}, which toolgate does not export"
        );
    }
}
