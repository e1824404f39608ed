//! The OpenTelemetry GenAI metrics, in the names the OpenTelemetry-to-
//! Prometheus mapping writes (`gen_ai.client.token.usage` is
//! `gen_ai_client_token_usage`, seconds get `_seconds`), so dashboards
//! and alerts written for other AI gateways read toolgate too; and what
//! toolgate itself added to a stream's first token. One [`Exchange`] per
//! gated request collects what they need as the request goes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The labels of every GenAI family (attribute names with `_` for `.`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Labels {
    pub gen_ai_operation_name: &'static str,
    pub gen_ai_provider_name: &'static str,
    pub gen_ai_request_model: String,
    pub gen_ai_response_model: String,
}

/// [`Labels`] and the token type (`input`, `output`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    pub gen_ai_operation_name: &'static str,
    pub gen_ai_provider_name: &'static str,
    pub gen_ai_request_model: String,
    pub gen_ai_response_model: String,
    pub gen_ai_token_type: &'static str,
}

/// The upstream a request went to and its wire format.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Upstream {
    /// `default` (`[upstream]`) or the section's name (`messages`).
    pub upstream: &'static str,
    pub protocol: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

// The buckets the GenAI semantic conventions advise.
fn tokens() -> Histogram {
    Histogram::new([
        1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
        4194304.0, 16777216.0, 67108864.0,
    ])
}
fn duration() -> Histogram {
    Histogram::new([
        0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
    ])
}
fn first_token() -> Histogram {
    Histogram::new([
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    ])
}
fn per_token() -> Histogram {
    Histogram::new([
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
    ])
}
fn added() -> Histogram {
    Histogram::new(super::BUCKETS)
}

/// The GenAI families and toolgate's upstream latency by upstream.
pub struct GenAi {
    token_usage: Histograms<TokenLabels>,
    request_duration: Histograms<Labels>,
    first_token: Histograms<Labels>,
    per_output_token: Histograms<Labels>,
    added_first_token: Histograms<Labels>,
    upstream_latency: Histograms<Upstream>,
}

impl Default for GenAi {
    fn default() -> Self {
        GenAi {
            token_usage: Family::new_with_constructor(tokens),
            request_duration: Family::new_with_constructor(duration),
            first_token: Family::new_with_constructor(first_token),
            per_output_token: Family::new_with_constructor(per_token),
            added_first_token: Family::new_with_constructor(added),
            upstream_latency: Family::new_with_constructor(super::histogram),
        }
    }
}

impl GenAi {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "gen_ai_client_token_usage",
            "Tokens used per request, by token type (OpenTelemetry gen_ai.client.token.usage)",
            self.token_usage.clone(),
        );
        r.register(
            "gen_ai_server_request_duration_seconds",
            "Time from the request to the answer's last byte (gen_ai.server.request.duration)",
            self.request_duration.clone(),
        );
        r.register(
            "gen_ai_server_time_to_first_token_seconds",
            "Time from the request to a stream's first byte to the agent (gen_ai.server.time_to_first_token)",
            self.first_token.clone(),
        );
        r.register(
            "gen_ai_server_time_per_output_token_seconds",
            "Time per output token after the first, streams only (gen_ai.server.time_per_output_token)",
            self.per_output_token.clone(),
        );
        r.register(
            "toolgate_added_time_to_first_token_seconds",
            "What toolgate added to a stream's first byte: from the provider's first byte to the agent's (held calls, gates)",
            self.added_first_token.clone(),
        );
        r.register(
            "toolgate_upstream_latency_seconds",
            "Time from sending the request upstream to its response head, by upstream and protocol",
            self.upstream_latency.clone(),
        );
    }

    /// The zero series of each upstream and protocol.
    pub fn known(&self, pairs: &[(&'static str, &'static str)]) {
        for &(upstream, protocol) in pairs {
            drop(
                self.upstream_latency
                    .get_or_create(&Upstream { upstream, protocol }),
            );
        }
    }

    pub fn upstream_took(&self, upstream: &'static str, protocol: &'static str, secs: f64) {
        self.upstream_latency
            .get_or_create(&Upstream { upstream, protocol })
            .observe(secs);
    }

    /// Records an exchange that ended, its models bounded by `bound`.
    pub(super) fn ended(&self, x: &Exchange, bound: impl Fn(&str) -> String) {
        let end = Instant::now();
        let labels = Labels {
            gen_ai_operation_name: x.operation,
            gen_ai_provider_name: x.provider,
            gen_ai_request_model: bound(x.request_model.get().map_or("unknown", String::as_str)),
            gen_ai_response_model: bound(x.response_model.get().map_or("unknown", String::as_str)),
        };
        self.request_duration
            .get_or_create(&labels)
            .observe(end.duration_since(x.started).as_secs_f64());
        let (input, output) = (
            x.input.load(Ordering::Relaxed),
            x.output.load(Ordering::Relaxed),
        );
        let mut tl = TokenLabels {
            gen_ai_operation_name: labels.gen_ai_operation_name,
            gen_ai_provider_name: labels.gen_ai_provider_name,
            gen_ai_request_model: labels.gen_ai_request_model.clone(),
            gen_ai_response_model: labels.gen_ai_response_model.clone(),
            gen_ai_token_type: "input",
        };
        for (kind, n) in [("input", input), ("output", output)] {
            if n > 0 {
                tl.gen_ai_token_type = kind;
                self.token_usage.get_or_create(&tl).observe(n as f64);
            }
        }
        let Some(first) = x.agent_first.get().filter(|_| x.streamed()) else {
            return;
        };
        self.first_token
            .get_or_create(&labels)
            .observe(first.duration_since(x.started).as_secs_f64());
        if let Some(up) = x.upstream_first.get() {
            self.added_first_token
                .get_or_create(&labels)
                .observe(first.saturating_duration_since(*up).as_secs_f64());
        }
        if output > 1 {
            let each = end.duration_since(*first).as_secs_f64() / (output - 1) as f64;
            self.per_output_token.get_or_create(&labels).observe(each);
        }
    }
}

/// One gated request as the GenAI metrics see it, filled in as it goes
/// (each part once) and recorded when its response ends.
#[derive(Debug)]
pub struct Exchange {
    operation: &'static str,
    provider: &'static str,
    started: Instant,
    request_model: OnceLock<String>,
    response_model: OnceLock<String>,
    response_id: OnceLock<String>,
    finish_reasons: OnceLock<Vec<String>>,
    streamed: OnceLock<bool>,
    upstream_first: OnceLock<Instant>,
    agent_first: OnceLock<Instant>,
    input: AtomicU64,
    output: AtomicU64,
}

impl Exchange {
    /// A chat exchange (`gen_ai.operation.name` `chat`: Chat Completions,
    /// Responses and Messages alike) with `provider`, started now.
    pub fn chat(provider: &'static str) -> Arc<Exchange> {
        Arc::new(Exchange {
            operation: "chat",
            provider,
            started: Instant::now(),
            request_model: OnceLock::new(),
            response_model: OnceLock::new(),
            response_id: OnceLock::new(),
            finish_reasons: OnceLock::new(),
            streamed: OnceLock::new(),
            upstream_first: OnceLock::new(),
            agent_first: OnceLock::new(),
            input: AtomicU64::new(0),
            output: AtomicU64::new(0),
        })
    }

    /// What the request asked for: its model and whether it streams.
    pub fn requested(&self, model: Option<&str>, streamed: bool) {
        if let Some(m) = model {
            let _ = self.request_model.set(m.to_string());
        }
        let _ = self.streamed.set(streamed);
    }

    fn streamed(&self) -> bool {
        self.streamed.get().copied().unwrap_or(false)
    }

    /// The provider's first byte of the answer's body.
    /// Called for every frame: the clock is read for the first only.
    pub fn upstream_began(&self) {
        if self.upstream_first.get().is_none() {
            let _ = self.upstream_first.set(Instant::now());
        }
    }

    /// The agent's first byte of the answer's body.
    /// Called for every frame: the clock is read for the first only.
    pub fn agent_began(&self) {
        if self.agent_first.get().is_none() {
            let _ = self.agent_first.set(Instant::now());
        }
    }

    /// The tokens reported so far: `(input, output)`.
    pub fn tokens(&self) -> (u64, u64) {
        (
            self.input.load(Ordering::Relaxed),
            self.output.load(Ordering::Relaxed),
        )
    }

    /// The provider's id for its answer, once it said.
    pub fn response_id(&self) -> Option<&str> {
        self.response_id.get().map(String::as_str)
    }

    /// Why the model stopped, by choice, as the provider said; the first
    /// report stands (a continued answer's later parts add none).
    pub fn finished(&self, reasons: Vec<String>) {
        if !reasons.is_empty() {
            let _ = self.finish_reasons.set(reasons);
        }
    }

    /// Why the model stopped, once the provider said.
    pub fn finish_reasons(&self) -> &[String] {
        self.finish_reasons.get().map_or(&[], Vec::as_slice)
    }

    /// The model the provider answered with, once it said.
    pub fn response_model(&self) -> Option<&str> {
        self.response_model.get().map(String::as_str)
    }

    /// The tokens the provider reported, the model it answered with and
    /// its id for the answer.
    pub fn used(&self, (model, id): (Option<&str>, Option<&str>), input: u64, output: u64) {
        if let Some(m) = model {
            let _ = self.response_model.set(m.to_string());
        }
        if let Some(i) = id {
            let _ = self.response_id.set(i.to_string());
        }
        self.input.fetch_add(input, Ordering::Relaxed);
        self.output.fetch_add(output, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exchange_is_recorded_in_the_genai_families() {
        let m = super::super::Metrics::default();
        let x = Exchange::chat("openai");
        x.requested(Some("gpt-x"), true);
        x.upstream_began();
        x.agent_began();
        x.used((Some("gpt-x-2026"), Some("chatcmpl-1")), 12, 5);
        assert_eq!(x.response_id(), Some("chatcmpl-1"));
        m.exchange_ended(&x);
        let t = m.render();
        for want in [
            "gen_ai_client_token_usage_count{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"gpt-x\",gen_ai_response_model=\"gpt-x-2026\",gen_ai_token_type=\"input\"} 1",
            "gen_ai_client_token_usage_sum{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"gpt-x\",gen_ai_response_model=\"gpt-x-2026\",gen_ai_token_type=\"output\"} 5.0",
            "gen_ai_server_request_duration_seconds_count{gen_ai_operation_name=\"chat\"",
            "gen_ai_server_time_to_first_token_seconds_count{",
            "gen_ai_server_time_per_output_token_seconds_count{",
            "toolgate_added_time_to_first_token_seconds_count{",
        ] {
            assert!(t.contains(want), "{want} missing:\n{t}");
        }
        // A family whose labels are known reads 0 before its first event.
        m.zero(&["sentinel"], &["jwt"], &[("default", "responses")]);
        m.zero_rules(["big-args"].into_iter());
        let t = m.render();
        for want in [
            "toolgate_overloads_total{limit=\"memory\"} 0",
            "toolgate_redactions_total{kind=\"jwt\"} 0",
            "toolgate_sensor_duration_seconds_count{sensor=\"sentinel\"} 0",
            "toolgate_cel_errors_total{rule=\"big-args\"} 0",
            "toolgate_upstream_latency_seconds_count{upstream=\"default\",protocol=\"responses\"} 0",
        ] {
            assert!(t.contains(want), "{want} missing:\n{t}");
        }
        // A whole answer has no first token.
        let m = super::super::Metrics::default();
        let x = Exchange::chat("anthropic");
        x.requested(Some("claude-x"), false);
        x.agent_began();
        m.exchange_ended(&x);
        let t = m.render();
        assert!(t.contains("gen_ai_server_request_duration_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"anthropic\",gen_ai_request_model=\"claude-x\",gen_ai_response_model=\"unknown\"} 1"), "{t}");
        assert!(
            !t.contains("gen_ai_server_time_to_first_token_seconds_count{"),
            "{t}"
        );
    }
}
