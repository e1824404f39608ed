//! OpenTelemetry over OTLP/HTTP: a mock collector on a real port decodes
//! what toolgate exports (protobuf) and checks the request span (GenAI
//! conventions, the agent's trace continued and passed upstream), a span
//! per gate decision and one per sensor call, and that no prompt or
//! argument text is in any of it. Off, the agent's `traceparent` goes
//! upstream untouched; an unreachable collector costs requests nothing.

use std::collections::HashMap;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{json, Value};

use crate::bin::Bin;
use crate::support::{
    call_delta, chat_request, chunk, messages_upstream, send, start_gate, start_mock, Mock, Reply,
    Seen, KEY_ENV, UPSTREAM_KEY,
};

const POLICY: &str = r#"
[[tool]]
match = "write_file"
class = "modifies_state"

[[rule]]
name = "no-shell"
tools = ["shell"]
verdict = "deny"

[[rule]]
name = "reads"
tools = ["read_file"]
verdict = "allow"

[[rule]]
name = "judged"
tools = ["write_file"]
verdict = "allow"
require = ["sentinel"]
fail = "closed"
"#;

/// The agent's trace: its trace id and the id of its span.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const AGENT_SPAN: &str = "00f067aa0ba902b7";

fn traceparent() -> String {
    format!("00-{TRACE_ID}-{AGENT_SPAN}-01")
}

/// Text that must never reach a span: in the prompt and in the arguments.
const PROMPT_TEXT: &str = "PROMPT-TEXT-7351";
const ARG_TEXT: &str = "ARG-TEXT-9924";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One exported span with its attributes as JSON values.
#[derive(Debug, Clone)]
struct Got {
    span: Span,
    attrs: HashMap<String, Value>,
    service: String,
}

impl Got {
    fn attr(&self, key: &str) -> &Value {
        self.attrs.get(key).unwrap_or(&Value::Null)
    }
    fn id(&self) -> String {
        hex(&self.span.span_id)
    }
    fn parent(&self) -> String {
        hex(&self.span.parent_span_id)
    }
}

fn value(v: Option<&Any>) -> Value {
    match v {
        Some(Any::StringValue(s)) => json!(s),
        Some(Any::BoolValue(b)) => json!(b),
        Some(Any::IntValue(i)) => json!(i),
        Some(Any::DoubleValue(d)) => json!(d),
        Some(Any::ArrayValue(a)) => {
            Value::Array(a.values.iter().map(|x| value(x.value.as_ref())).collect())
        }
        _ => Value::Null,
    }
}

/// Every span the collector received, decoded.
fn spans(collector: &Mock) -> Vec<Got> {
    let mut out = Vec::new();
    for r in collector.requests() {
        let req = ExportTraceServiceRequest::decode(r.body.as_ref()).expect("OTLP protobuf");
        for rs in req.resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|a| a.key == "service.name")
                .map(|a| value(a.value.as_ref().and_then(|v| v.value.as_ref())))
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for span in ss.spans {
                    let attrs = span
                        .attributes
                        .iter()
                        .map(|a| {
                            (
                                a.key.clone(),
                                value(a.value.as_ref().and_then(|v| v.value.as_ref())),
                            )
                        })
                        .collect();
                    out.push(Got {
                        span,
                        attrs,
                        service: service.clone(),
                    });
                }
            }
        }
    }
    out
}

/// Waits until `done` holds for the spans received (at most 15 s).
async fn wait_for(collector: &Mock, done: impl Fn(&[Got]) -> bool) -> Vec<Got> {
    for _ in 0..300 {
        let got = spans(collector);
        if done(&got) {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the collector did not get the spans: {:#?}",
        spans(collector)
    );
}

fn judge_answer() -> Reply {
    let content = json!({"decision": "approve", "reason": "fits", "confidence": 0.95}).to_string();
    Reply::json(
        200,
        json!({"id": "j", "object": "chat.completion", "created": 1, "model": "judge-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": content}}]})
        .to_string(),
    )
}

/// Three calls: one allowed by a rule, one denied, one judged by the sentinel.
fn three_calls() -> String {
    let args = json!({"path": ARG_TEXT}).to_string();
    let mut s = String::new();
    for (i, name) in ["read_file", "shell", "write_file"].iter().enumerate() {
        s.push_str(&chunk(
            0,
            call_delta(i as u32, &format!("call_{i}"), name, &args),
            None,
        ));
    }
    s.push_str(&chunk(0, json!({}), Some("tool_calls")));
    s.push_str("data: [DONE]\n\n");
    s
}

fn header(seen: &Seen, name: &str) -> String {
    seen.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_follow_the_genai_conventions_continue_the_agents_trace_and_carry_no_text() {
    let collector = start_mock(vec![Reply::json(200, "")]).await;
    let judge = start_mock(vec![judge_answer()]).await;
    let whole = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn", "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 3}});
    let upstream = start_mock(vec![
        Reply::sse(three_calls()),
        Reply::json(200, whole.to_string()),
    ])
    .await;
    let extra = format!(
        "{}[judge]\nbase_url = \"{}\"\napi_key_env = \"{KEY_ENV}\"\nmodel = \"judge-model\"\n\n[telemetry]\notlp_endpoint = \"http://{}\"\nexport_interval_ms = 50\n",
        messages_upstream(&upstream.base_url()),
        judge.base_url(),
        collector.addr
    );
    let gate = start_gate(&upstream.base_url(), POLICY, &extra).await;
    let mut req = chat_request(true, &["read_file", "shell", "write_file"]);
    req["model"] = json!("gpt-test");
    req["messages"] = json!([{"role": "user", "content": format!("please {PROMPT_TEXT}")}]);
    let tp = traceparent();
    let a = send(
        "POST",
        &format!("{}/v1/chat/completions", gate.url),
        &[
            ("content-type", "application/json"),
            ("traceparent", &tp),
            ("tracestate", "agent=1"),
        ],
        req.to_string(),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let m = json!({"model": "claude-test", "max_tokens": 64,
        "messages": [{"role": "user", "content": PROMPT_TEXT}]});
    let b = send(
        "POST",
        &format!("{}/v1/messages", gate.url),
        &[
            ("content-type", "application/json"),
            ("anthropic-version", "2023-06-01"),
        ],
        m.to_string(),
    )
    .await;
    assert_eq!(b.status, 200, "{}", b.text());

    let got = wait_for(&collector, |g| {
        g.iter()
            .filter(|s| s.span.name.starts_with("chat "))
            .count()
            >= 3
            && g.iter()
                .filter(|s| s.span.name.starts_with("gate "))
                .count()
                >= 3
    })
    .await;

    // The request span: a GenAI client span, child of the agent's span.
    let request = got
        .iter()
        .find(|s| s.span.name == "chat gpt-test")
        .expect("the chat request's span");
    assert_eq!(hex(&request.span.trace_id), TRACE_ID);
    assert_eq!(request.parent(), AGENT_SPAN);
    assert_eq!(request.span.kind, SpanKind::Client as i32);
    assert_eq!(request.service, "toolgate");
    assert_eq!(request.attr("gen_ai.operation.name"), "chat");
    assert_eq!(request.attr("gen_ai.request.model"), "gpt-test");
    assert_eq!(request.attr("gen_ai.system"), "openai");
    assert_eq!(request.attr("http.response.status_code"), 200);
    assert_eq!(request.attr("toolgate.route"), "chat_completions");
    assert_eq!(request.attr("toolgate.calls.allowed"), 2);
    assert_eq!(request.attr("toolgate.calls.denied"), 1);
    // A stream with no usage event is still named by its chunks.
    assert_eq!(request.attr("gen_ai.response.id"), "chatcmpl-t");
    assert_eq!(request.attr("gen_ai.response.model"), "m");
    // Why the model stopped, as the provider said (a streamed finish).
    assert_eq!(
        request.attr("gen_ai.response.finish_reasons"),
        &json!(["tool_calls"])
    );
    assert!(request.span.end_time_unix_nano >= request.span.start_time_unix_nano);

    // The provider got toolgate's span as its parent, in the same trace.
    let seen = upstream.requests();
    let sent = header(&seen[0], "traceparent");
    assert_eq!(sent, format!("00-{TRACE_ID}-{}-01", request.id()), "{sent}");
    assert_eq!(header(&seen[0], "tracestate"), "agent=1");

    // A span per decision, under the request's.
    let decision = |tool: &str| {
        got.iter()
            .find(|s| s.span.name == format!("gate {tool}"))
            .unwrap_or_else(|| panic!("no span for {tool}: {got:#?}"))
    };
    let shell = decision("shell");
    assert_eq!(shell.parent(), request.id());
    assert_eq!(hex(&shell.span.trace_id), TRACE_ID);
    assert_eq!(shell.attr("gen_ai.tool.name"), "shell");
    assert_eq!(shell.attr("gen_ai.tool.call.id"), "call_1");
    assert_eq!(shell.attr("toolgate.verdict"), "deny");
    assert_eq!(shell.attr("toolgate.rule"), "no-shell");
    assert_eq!(shell.attr("toolgate.gate"), "policy");
    assert_eq!(
        shell.attr("toolgate.gates"),
        &json!(["integrity", "policy"])
    );
    let took = shell.attr("toolgate.gates.us").as_array().unwrap();
    assert_eq!(took.len(), 2);
    assert!(took.iter().all(Value::is_i64));
    let read = decision("read_file");
    assert_eq!(read.attr("toolgate.verdict"), "allow");
    assert_eq!(read.attr("toolgate.rule"), "reads");

    // The sentinel's call: a GenAI span under the decision it served.
    let write = decision("write_file");
    assert_eq!(write.attr("toolgate.verdict"), "allow");
    let sensor = got
        .iter()
        .find(|s| s.attr("toolgate.sensor") == "sentinel")
        .expect("the sentinel's span");
    assert_eq!(sensor.parent(), write.id());
    assert_eq!(sensor.span.name, "chat judge-model");
    assert_eq!(sensor.attr("gen_ai.request.model"), "judge-model");
    assert_eq!(sensor.attr("toolgate.sensor.cache_hit"), false);
    assert!(sensor.span.start_time_unix_nano >= write.span.start_time_unix_nano);
    assert!(sensor.span.end_time_unix_nano <= write.span.end_time_unix_nano);

    // A Messages request without a traceparent starts its own trace.
    let messages = got
        .iter()
        .find(|s| s.span.name == "chat claude-test")
        .expect("the Messages request's span");
    assert_eq!(messages.attr("gen_ai.system"), "anthropic");
    // What the provider answered with.
    assert_eq!(messages.attr("gen_ai.response.model"), "claude-test");
    assert_eq!(messages.attr("gen_ai.response.id"), "msg_1");
    assert_eq!(messages.attr("gen_ai.usage.input_tokens"), 5);
    assert_eq!(messages.attr("gen_ai.usage.output_tokens"), 3);
    assert_eq!(
        messages.attr("gen_ai.response.finish_reasons"),
        &json!(["end_turn"])
    );
    assert_eq!(messages.attr("server.address"), "127.0.0.1");
    assert_eq!(
        messages.attr("server.port"),
        i64::from(upstream.addr.port())
    );
    assert!(messages.span.parent_span_id.is_empty());
    assert_ne!(hex(&messages.span.trace_id), TRACE_ID);
    let up = header(&seen[1], "traceparent");
    assert!(up.contains(&hex(&messages.span.trace_id)), "{up}");

    // What the collector got: OTLP protobuf on /v1/traces, and no prompt,
    // argument or key text anywhere in it.
    for r in collector.requests() {
        assert_eq!(r.path, "/v1/traces");
        assert_eq!(header(&r, "content-type"), "application/x-protobuf");
        for needle in [PROMPT_TEXT, ARG_TEXT, UPSTREAM_KEY] {
            assert!(
                !r.body.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "{needle} was exported"
            );
        }
    }
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_the_agents_traceparent_goes_upstream_as_sent() {
    let upstream = start_mock(vec![Reply::sse(three_calls())]).await;
    let gate = start_gate(&upstream.base_url(), POLICY, "").await;
    assert!(gate.running.as_ref().unwrap().state.telemetry.is_none());
    let tp = traceparent();
    let a = send(
        "POST",
        &format!("{}/v1/chat/completions", gate.url),
        &[("content-type", "application/json"), ("traceparent", &tp)],
        chat_request(true, &["read_file", "shell"]).to_string(),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(header(&upstream.requests()[0], "traceparent"), tp);
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_costs_requests_nothing() {
    let upstream = start_mock(vec![Reply::sse(three_calls())]).await;
    // Port 9 (discard) has no listener here: every export fails to connect.
    let extra = "[telemetry]\notlp_endpoint = \"http://127.0.0.1:9\"\nexport_interval_ms = 10\n";
    let gate = start_gate(&upstream.base_url(), POLICY, extra).await;
    for _ in 0..5 {
        let a = send(
            "POST",
            &format!("{}/v1/chat/completions", gate.url),
            &[("content-type", "application/json")],
            chat_request(true, &["read_file", "shell"]).to_string(),
        )
        .await;
        assert_eq!(a.status, 200);
        let calls = crate::accumulate::Acc::from_sse(&a.body).all_calls();
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        assert!(
            names.contains(&"read_file") && !names.contains(&"shell"),
            "{names:?}"
        );
    }
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reads_the_standard_variables_and_sends_the_last_spans_on_sigterm() {
    let collector = start_mock(vec![Reply::json(200, "")]).await;
    let upstream = start_mock(vec![Reply::sse(three_calls())]).await;
    let endpoint = format!("http://{}", collector.addr);
    // The default batch delay (5 s) is longer than this test waits before
    // stopping: the spans arrive because shutdown sends them.
    let mut bin = Bin::start_env(
        &upstream.base_url(),
        &[("p.toml", POLICY)],
        "",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-token=tok-1"),
            ("OTEL_SERVICE_NAME", "gate-east"),
        ],
    )
    .await;
    let tp = traceparent();
    let a = send(
        "POST",
        &format!("{}/v1/chat/completions", bin.url),
        &[("content-type", "application/json"), ("traceparent", &tp)],
        chat_request(true, &["read_file", "shell"]).to_string(),
    )
    .await;
    assert_eq!(a.status, 200);
    assert!(
        collector.requests().is_empty(),
        "exported before the batch delay"
    );
    assert!(bin.terminate().await, "{}", bin.stderr());
    let got = spans(&collector);
    let request = got
        .iter()
        .find(|s| s.attr("gen_ai.operation.name") == "chat")
        .unwrap_or_else(|| panic!("no request span: {got:#?}\n{}", bin.stderr()));
    assert_eq!(hex(&request.span.trace_id), TRACE_ID);
    assert_eq!(request.service, "gate-east");
    assert!(got.iter().any(|s| s.span.name == "gate shell"));
    let sent = &collector.requests()[0];
    assert_eq!(sent.path, "/v1/traces");
    assert_eq!(header(sent, "x-collector-token"), "tok-1");
    assert!(bin.stderr().contains("traces go to an OTLP collector"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_approval_is_a_span_under_the_request() {
    use crate::approval::{answer_with, approval_config, approve, pending, spawn_chat, ARGS, ASK};
    let collector = start_mock(vec![Reply::json(200, "")]).await;
    let upstream = start_mock(vec![answer_with(&[("pay", "call_1", ARGS)])]).await;
    let extra = format!(
        "{}\n[telemetry]\notlp_endpoint = \"http://{}\"\nexport_interval_ms = 50\n",
        approval_config(30.0),
        collector.addr
    );
    let gate = start_gate(&upstream.base_url(), ASK, &extra).await;
    let waiting = spawn_chat(&gate, crate::approval::request(false));
    let q = pending(&gate, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(approve(&gate, &q[0]).await, 200);
    assert_eq!(waiting.await.unwrap().status, 200);
    // The wait's span and the request's span it sits under (they may come
    // in different batches).
    let got = wait_for(&collector, |g| {
        g.iter()
            .filter(|s| s.span.name == "approval pay")
            .any(|w| g.iter().any(|s| s.id() == w.parent()))
    })
    .await;
    let wait = got.iter().find(|s| s.span.name == "approval pay").unwrap();
    assert_eq!(wait.attr("toolgate.approval.decision"), &json!("approve"));
    assert_eq!(wait.attr("toolgate.approval.channel"), &json!("api"));
    assert_eq!(wait.attr("gen_ai.tool.call.id"), &json!("call_1"));
    let took = wait.span.end_time_unix_nano - wait.span.start_time_unix_nano;
    assert!(took >= 200_000_000, "the span covers the wait: {took} ns");
    let request = got
        .iter()
        .find(|s| s.id() == wait.parent())
        .expect("the request's span");
    assert_eq!(request.span.trace_id, wait.span.trace_id);
    assert!(
        !wait.attrs.values().any(|v| v.to_string().contains("acme")),
        "no arguments on the span"
    );
}
