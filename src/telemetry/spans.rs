//! The spans of one request: the request span (GenAI conventions), a child
//! per gate decision, a child of that per sensor call. Decision and sensor
//! spans are written after the fact from the timings the decision carries,
//! so the gates themselves know nothing of tracing.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, Method};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Array, KeyValue, StringValue, Value};
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracer;

use super::Telemetry;
use crate::call::{Tally, Verdict};

/// One sensor call made for a decision, for its trace span.
#[derive(Debug, Clone, PartialEq)]
pub struct SensorRun {
    pub sensor: &'static str,
    pub model: String,
    pub at: std::time::SystemTime,
    pub micros: u64,
    /// Answered from the judge's cache.
    pub cached: bool,
    /// The failure's kind (`timeout`, `status`, …) when it failed.
    pub failure: Option<&'static str>,
}

/// What a decision's span says: written by whoever audits the decision,
/// from the call, its context and its decision.
pub struct DecisionSpan<'a> {
    pub tool: &'a str,
    pub call_id: &'a str,
    /// The verdict as audited.
    pub verdict: &'a str,
    pub gate: &'static str,
    pub reason: &'a str,
    pub rule: Option<&'a str>,
    pub phase: &'a str,
    pub choice: u32,
    /// Which follow-up request the call came from (0: the agent's own).
    pub resume: u32,
    pub monitor: bool,
    /// When deciding began.
    pub at: SystemTime,
    /// Each gate and the microseconds it took, in order.
    pub steps: Vec<(&'static str, u64)>,
    pub sensors: &'a [SensorRun],
}

/// Longest model or tool name put in a span (both are agent or model text).
const MAX_NAME: usize = 128;

/// At most [`MAX_NAME`] characters, control characters dropped.
fn clip(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME)
        .collect()
}

/// One request's span, and the tracer its children come from.
#[derive(Debug, Clone)]
pub struct RequestTrace {
    cx: opentelemetry::Context,
    tracer: SdkTracer,
}

impl Telemetry {
    /// Starts a request's span, the child of the agent's `traceparent` when
    /// it sent one.
    pub fn request(&self, method: &Method, headers: &HeaderMap, request_id: &str) -> RequestTrace {
        let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
        let span = self
            .tracer
            .span_builder(method.to_string())
            .with_kind(SpanKind::Client)
            .with_attributes([
                KeyValue::new("http.request.method", method.to_string()),
                KeyValue::new("toolgate.request_id", request_id.to_string()),
            ])
            .start_with_context(&self.tracer, &parent);
        RequestTrace {
            cx: parent.with_span(span),
            tracer: self.tracer.clone(),
        }
    }
}

impl RequestTrace {
    /// The route the request took; a gated or passed-through route names
    /// the provider family.
    /// `system` is the provider family (`openai`, `anthropic`).
    pub fn route(&self, method: &Method, route: &'static str, system: Option<&'static str>) {
        let span = self.cx.span();
        span.update_name(format!("{method} {route}"));
        span.set_attribute(KeyValue::new("toolgate.route", route));
        if let Some(system) = system {
            span.set_attribute(KeyValue::new("gen_ai.system", system));
            span.set_attribute(KeyValue::new("gen_ai.provider.name", system));
        }
    }

    /// A gated request: a chat with a model (`gen_ai.operation.name` is
    /// `chat` for all three wire formats).
    pub fn chat(&self, model: Option<&str>) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new("gen_ai.operation.name", "chat"));
        match model.map(clip).filter(|m| !m.is_empty()) {
            Some(m) => {
                span.update_name(format!("chat {m}"));
                span.set_attribute(KeyValue::new("gen_ai.request.model", m));
            }
            None => span.update_name("chat"),
        }
    }

    /// Puts this span's context in `headers` (`traceparent`, `tracestate`)
    /// in place of the agent's, so the provider's spans are its children.
    pub fn inject(&self, headers: &mut HeaderMap) {
        headers.remove("traceparent");
        headers.remove("tracestate");
        TraceContextPropagator::new().inject_context(&self.cx, &mut HeaderInjector(headers));
    }

    /// A span for one call's wait for a person (`ask`): from the question
    /// to its ending (`decision`: approve, deny, timeout, left, shutdown,
    /// full) and who answered through which channel.
    pub fn approval(
        &self,
        call_name: &str,
        call_id: &str,
        at: SystemTime,
        decision: &'static str,
        channel: Option<&'static str>,
    ) {
        let mut attrs = vec![
            KeyValue::new("gen_ai.tool.name", clip(call_name)),
            KeyValue::new("gen_ai.tool.call.id", clip(call_id)),
            KeyValue::new("toolgate.approval.decision", decision),
        ];
        if let Some(c) = channel {
            attrs.push(KeyValue::new("toolgate.approval.channel", c));
        }
        let span = self
            .tracer
            .span_builder(format!("approval {}", clip(call_name)))
            .with_kind(SpanKind::Internal)
            .with_start_time(at)
            .with_attributes(attrs)
            .start_with_context(&self.tracer, &self.cx);
        opentelemetry::trace::Span::end_with_timestamp(&mut { span }, SystemTime::now());
    }

    /// A span for one decision, with its sensors' spans under it.
    pub fn decision(&self, d: DecisionSpan<'_>) {
        let took: u64 = d.steps.iter().map(|s| s.1).sum();
        let mut attrs = vec![
            KeyValue::new("gen_ai.tool.name", clip(d.tool)),
            KeyValue::new("gen_ai.tool.call.id", clip(d.call_id)),
            KeyValue::new("toolgate.verdict", d.verdict.to_string()),
            KeyValue::new("toolgate.gate", d.gate),
            KeyValue::new("toolgate.reason", d.reason.to_string()),
            KeyValue::new("toolgate.phase", clip(d.phase)),
            KeyValue::new("toolgate.choice", i64::from(d.choice)),
            KeyValue::new(
                "toolgate.gates",
                Value::Array(Array::String(
                    d.steps.iter().map(|s| StringValue::from(s.0)).collect(),
                )),
            ),
            KeyValue::new(
                "toolgate.gates.us",
                Value::Array(Array::I64(
                    d.steps
                        .iter()
                        .map(|s| i64::try_from(s.1).unwrap_or(i64::MAX))
                        .collect(),
                )),
            ),
        ];
        if let Some(rule) = d.rule {
            attrs.push(KeyValue::new("toolgate.rule", clip(rule)));
        }
        if d.resume > 0 {
            attrs.push(KeyValue::new("toolgate.resume", i64::from(d.resume)));
        }
        if d.monitor {
            attrs.push(KeyValue::new("toolgate.mode", "monitor"));
        }
        let span = self
            .tracer
            .span_builder(format!("gate {}", clip(d.tool)))
            .with_kind(SpanKind::Internal)
            .with_start_time(d.at)
            .with_attributes(attrs)
            .start_with_context(&self.tracer, &self.cx);
        let decided = self.cx.with_span(span);
        for run in d.sensors {
            let mut attrs = vec![
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new("toolgate.sensor", run.sensor),
                KeyValue::new("toolgate.sensor.cache_hit", run.cached),
            ];
            if !run.model.is_empty() {
                attrs.push(KeyValue::new("gen_ai.request.model", clip(&run.model)));
            }
            if let Some(kind) = run.failure {
                attrs.push(KeyValue::new("error.type", kind));
            }
            let mut s = self
                .tracer
                .span_builder(format!("chat {}", clip(&run.model)).trim_end().to_string())
                .with_kind(SpanKind::Client)
                .with_start_time(run.at)
                .with_attributes(attrs)
                .start_with_context(&self.tracer, &decided);
            if run.failure.is_some() {
                opentelemetry::trace::Span::set_status(&mut s, Status::error("sensor failed"));
            }
            opentelemetry::trace::Span::end_with_timestamp(
                &mut s,
                run.at + Duration::from_micros(run.micros),
            );
        }
        decided
            .span()
            .end_with_timestamp(d.at + Duration::from_micros(took));
    }

    /// Ends the request's span with its status and its calls' verdicts.
    /// The provider's address (`server.address`, `server.port`).
    pub fn server(&self, (host, port): (&str, u16)) {
        let span = self.cx.span();
        span.set_attributes([
            KeyValue::new("server.address", clip(host)),
            KeyValue::new("server.port", i64::from(port)),
        ]);
    }

    /// What the provider answered with, for a gated request: the model and
    /// the tokens it reported, its id for the answer (`gen_ai.response.model`,
    /// `gen_ai.response.id`, `gen_ai.response.finish_reasons`,
    /// `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`).
    pub fn answered(&self, x: &crate::metrics::genai::Exchange) {
        let span = self.cx.span();
        if let Some(m) = x.response_model().map(clip).filter(|m| !m.is_empty()) {
            span.set_attribute(KeyValue::new("gen_ai.response.model", m));
        }
        if let Some(i) = x.response_id().map(clip).filter(|i| !i.is_empty()) {
            span.set_attribute(KeyValue::new("gen_ai.response.id", i));
        }
        let finish = x.finish_reasons();
        if !finish.is_empty() {
            let reasons: Vec<opentelemetry::StringValue> =
                finish.iter().map(|r| clip(r).into()).collect();
            span.set_attribute(KeyValue::new(
                "gen_ai.response.finish_reasons",
                opentelemetry::Value::Array(reasons.into()),
            ));
        }
        let (input, output) = x.tokens();
        if input > 0 || output > 0 {
            let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
            span.set_attributes([
                KeyValue::new("gen_ai.usage.input_tokens", n(input)),
                KeyValue::new("gen_ai.usage.output_tokens", n(output)),
            ]);
        }
    }

    pub fn end(&self, status: u16, tally: &Tally) {
        let span = self.cx.span();
        span.set_attributes([
            KeyValue::new("http.response.status_code", i64::from(status)),
            KeyValue::new(
                "toolgate.calls.allowed",
                i64::from(tally.get(Verdict::Allow)),
            ),
            KeyValue::new("toolgate.calls.asked", i64::from(tally.get(Verdict::Ask))),
            KeyValue::new(
                "toolgate.calls.rejected",
                i64::from(tally.get(Verdict::Reject)),
            ),
            KeyValue::new("toolgate.calls.denied", i64::from(tally.get(Verdict::Deny))),
        ]);
        if status >= 500 || status == 0 {
            span.set_attribute(KeyValue::new("error.type", status.to_string()));
            span.set_status(Status::error(""));
        }
        span.end_with_timestamp(SystemTime::now());
    }
}
