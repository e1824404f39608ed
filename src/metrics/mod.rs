//! Prometheus metrics on the admin port (`/metrics`, OpenMetrics text),
//! kept with the `prometheus-client` crate. Label values are bounded (see
//! [`labels`]).

pub mod genai;
pub mod labels;

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use labels::{Decided, Gate, Kind, RouteStatus, Rule, Sensor, SensorError, Tokens};

/// Seconds, from 100 µs (a gate's work) to a minute (a slow provider).
const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0, 60.0,
];

/// Distinct model names counted in `toolgate_tokens_total`; later ones are
/// `other` (a provider's model names are not ours to bound).
const MAX_MODELS: usize = 64;

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

pub struct Metrics {
    registry: Registry,
    requests: Family<RouteStatus, Counter>,
    decisions: Family<Decided, Counter>,
    gate_latency: Histograms<Gate>,
    sensor_latency: Histograms<Sensor>,
    sensor_errors: Family<SensorError, Counter>,
    state_errors: Family<labels::StateError, Counter>,
    cel_errors: Family<Rule, Counter>,
    tokens: Family<Tokens, Counter>,
    models: Mutex<HashSet<String>>,
    redactions: Family<Kind, Counter>,
    /// The OpenTelemetry GenAI families and the upstream latency.
    pub genai: genai::GenAi,
    pub release_latency: Histogram,
    pub stream_faults: Counter,
    pub late_tool_deltas: Counter,
    pub resumes: Counter,
    pub auth_failures: Counter,
    pub resume_failures: Counter,
    pub policy_reload_failures: Counter,
    pub fenced_tool_results: Counter,
    pub tls_handshake_failures: Counter,
    pub tls_reload_failures: Counter,
    overloads: Family<labels::Overload, Counter>,
    upstream_faults: Family<Kind, Counter>,
    /// Audit records that could not be written (the trail counts them).
    pub audit_write_failures: Counter,
    /// Client connections open now.
    pub open_connections: Gauge,
    /// Calls waiting for a person now (`ask`).
    pub approvals_pending: Gauge,
    approvals: Family<labels::Approval, Counter>,
    /// Upstream exchanges, tokio tasks and budget bytes in use, read at
    /// each scrape ([`Metrics::render_live`]).
    open_streams: Gauge,
    tasks: Gauge,
    held_bytes: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut m = Metrics {
            registry: Registry::default(),
            requests: Family::default(),
            decisions: Family::default(),
            gate_latency: Family::new_with_constructor(histogram),
            sensor_latency: Family::new_with_constructor(histogram),
            sensor_errors: Family::default(),
            state_errors: Family::default(),
            cel_errors: Family::default(),
            tokens: Family::default(),
            models: Mutex::default(),
            redactions: Family::default(),
            genai: genai::GenAi::default(),
            release_latency: histogram(),
            stream_faults: Counter::default(),
            late_tool_deltas: Counter::default(),
            resumes: Counter::default(),
            auth_failures: Counter::default(),
            resume_failures: Counter::default(),
            policy_reload_failures: Counter::default(),
            fenced_tool_results: Counter::default(),
            tls_handshake_failures: Counter::default(),
            tls_reload_failures: Counter::default(),
            overloads: Family::default(),
            upstream_faults: Family::default(),
            audit_write_failures: Counter::default(),
            open_connections: Gauge::default(),
            approvals_pending: Gauge::default(),
            approvals: Family::default(),
            open_streams: Gauge::default(),
            tasks: Gauge::default(),
            held_bytes: Gauge::default(),
        };
        m.register();
        m.genai.register(&mut m.registry);
        // Endings no one answers are shown at zero before the first one,
        // so a dashboard or an alert has a series to read.
        for decision in ["timeout", "left", "shutdown", "full"] {
            drop(m.approvals.get_or_create(&labels::Approval {
                decision,
                channel: "none",
            }));
        }
        m
    }
}

impl Metrics {
    fn register(&mut self) {
        let r = &mut self.registry;
        r.register(
            "toolgate_requests",
            "Requests by route and response status",
            self.requests.clone(),
        );
        r.register(
            "toolgate_tool_calls",
            "Gated tool calls by protocol, verdict, deciding gate and rule, and catalog tool (others: other)",
            self.decisions.clone(),
        );
        r.register(
            "toolgate_gate_duration_seconds",
            "Time each gate took for one call",
            self.gate_latency.clone(),
        );
        r.register(
            "toolgate_sensor_duration_seconds",
            "Time an LLM sensor (sentinel, output) took for one call, cache hits included",
            self.sensor_latency.clone(),
        );
        r.register(
            "toolgate_state_errors",
            "Shared state ([state] backend = redis) that could not be read, by what needed it and what followed (fail_closed: rejected; local: this replica's own count)",
            self.state_errors.clone(),
        );
        r.register(
            "toolgate_sensor_errors",
            "LLM sensor failures by kind (the rule's fail setting decides what follows)",
            self.sensor_errors.clone(),
        );
        r.register(
            "toolgate_cel_errors",
            "CEL conditions that failed at run time, by rule (the rule counts as matched)",
            self.cel_errors.clone(),
        );
        r.register(
            "toolgate_tokens",
            "Tokens by model and kind (input, output), from the responses' usage",
            self.tokens.clone(),
        );
        r.register(
            "toolgate_redactions",
            "Secrets redacted from tool results, by kind",
            self.redactions.clone(),
        );
        r.register(
            "toolgate_overloads",
            "Requests or connections refused with 503 because a limit was full, by limit",
            self.overloads.clone(),
        );
        r.register(
            "toolgate_upstream_faults",
            "Upstream exchanges that failed, by kind (refused, connect_timeout, tls, reset, goaway, protocol, timeout, idle, rate_limited, status_4xx, status_5xx, unreadable, error_event)",
            self.upstream_faults.clone(),
        );
        r.register(
            "toolgate_tool_call_release_seconds",
            "Time from the last upstream tool-call chunk to the release of the gated calls",
            self.release_latency.clone(),
        );
        r.register(
            "toolgate_approvals",
            "Calls that waited for a person, by how the wait ended (approve, deny, timeout, left, shutdown, full) and the channel that answered (api, ui, cli, webhook, session, none)",
            self.approvals.clone(),
        );
        for (name, help, g) in [
            (
                "toolgate_approvals_pending",
                "Calls waiting for a person now (the ask verdict)",
                &self.approvals_pending,
            ),
            (
                "toolgate_open_connections",
                "Client connections open now",
                &self.open_connections,
            ),
            (
                "toolgate_open_streams",
                "Upstream exchanges in flight now (limits.max_streams)",
                &self.open_streams,
            ),
            (
                "toolgate_runtime_tasks",
                "Tasks alive in the async runtime now",
                &self.tasks,
            ),
            (
                "toolgate_body_bytes_held",
                "Bytes of the body budget in use now (limits.max_body_bytes_in_flight)",
                &self.held_bytes,
            ),
        ] {
            r.register(name, help, g.clone());
        }
        for (name, help, c) in [
            ("toolgate_fenced_tool_results", "Tool results fenced before going upstream", &self.fenced_tool_results),
            ("toolgate_stream_faults", "Streams ended with an error event (upstream error, truncation, malformed data)", &self.stream_faults),
            ("toolgate_late_tool_deltas", "Tool-call deltas stripped because their choice had already finished", &self.late_tool_deltas),
            ("toolgate_auth_failures", "Requests refused because client authentication failed", &self.auth_failures),
            ("toolgate_resumes", "Follow-up requests made so the model continues without its withheld calls (rewrite mode resume)", &self.resumes),
            ("toolgate_resume_failures", "Follow-up requests that failed; the response ended with the neutral text", &self.resume_failures),
            ("toolgate_policy_reload_failures", "Policy reloads rejected because a file was invalid", &self.policy_reload_failures),
            ("toolgate_tls_handshake_failures", "TLS handshakes on the data port that failed (e.g. no or untrusted client certificate)", &self.tls_handshake_failures),
            ("toolgate_audit_write_failures", "Audit records that could not be written (with on_error = fail_closed their calls were not released)", &self.audit_write_failures),
            ("toolgate_tls_reload_failures", "Certificate reloads rejected because a file was invalid; the last good certificate stays", &self.tls_reload_failures),
        ] {
            r.register(name, help, c.clone());
        }
    }

    /// Counts one request by its route label (a protocol's label,
    /// `passthrough` or `refused`: names in the code, so the label set is
    /// bounded by it) and status.
    pub fn request(&self, route: &'static str, status: u16) {
        self.requests
            .get_or_create(&RouteStatus { route, status })
            .inc();
    }

    /// Counts how one wait for a person ended.
    pub fn approval_decided(&self, decision: &'static str, channel: &'static str) {
        self.approvals
            .get_or_create(&labels::Approval { decision, channel })
            .inc();
    }

    /// Counts one decided call.
    pub fn decided(&self, d: Decided) {
        self.decisions.get_or_create(&d).inc();
    }

    pub fn gate_took(&self, gate: &'static str, d: Duration) {
        self.gate_latency
            .get_or_create(&Gate { gate })
            .observe(d.as_secs_f64());
    }

    pub fn sensor_took(&self, sensor: &'static str, d: Duration) {
        self.sensor_latency
            .get_or_create(&Sensor { sensor })
            .observe(d.as_secs_f64());
    }

    /// A 503 because `limit` was full (see [`labels::Overload`]).
    pub fn overloaded(&self, limit: &'static str) {
        self.overloads
            .get_or_create(&labels::Overload { limit })
            .inc();
    }

    /// Counts an upstream failure under its kind ([`Error::fault`]); other
    /// errors are not counted here.
    pub fn upstream_fault(&self, e: &crate::error::Error) {
        if let Some(kind) = e.fault() {
            self.upstream_faults.get_or_create(&Kind { kind }).inc();
        }
    }

    /// Counts a provider fault found after its answer was passed on (an
    /// answer id given to two threads), under `kind`.
    pub fn provider_fault(&self, kind: &'static str) {
        self.upstream_faults.get_or_create(&Kind { kind }).inc();
    }

    /// Counts shared state that could not be read or written for `op`
    /// (`limit`, `remember`, `recall`) and what followed (`fail_closed`, `local`).
    pub fn state_failed(&self, op: &'static str, then: &'static str) {
        self.state_errors
            .get_or_create(&labels::StateError { op, then })
            .inc();
    }

    pub fn sensor_failed(&self, sensor: &'static str, kind: &'static str) {
        self.sensor_errors
            .get_or_create(&SensorError { sensor, kind })
            .inc();
    }

    pub fn cel_failed(&self, rule: &str) {
        self.cel_errors
            .get_or_create(&Rule {
                rule: rule.to_string(),
            })
            .inc();
    }

    /// A model name as a label value: the first [`MAX_MODELS`] names seen
    /// (at most 128 characters), later ones `other` (a provider's model
    /// names are not ours to bound).
    fn model_label(&self, model: &str) -> String {
        let model = match model.char_indices().nth(128) {
            Some((end, _)) => &model[..end],
            None => model,
        };
        match self.models.lock() {
            Ok(seen) if seen.contains(model) => model.to_string(),
            Ok(mut seen) if seen.len() < MAX_MODELS => {
                seen.insert(model.to_string());
                model.to_string()
            }
            _ => "other".to_string(),
        }
    }

    /// The zero series of the families whose labels are known before
    /// their first event, so a dashboard or an alert reads 0, not "no
    /// data": each overload limit, each sensor, each redaction kind, each
    /// upstream and protocol.
    pub fn zero(
        &self,
        sensors: &[&'static str],
        redactions: &[&'static str],
        upstreams: &[(&'static str, &'static str)],
    ) {
        for limit in ["connections", "streams", "body_bytes", "memory"] {
            drop(self.overloads.get_or_create(&labels::Overload { limit }));
        }
        for &sensor in sensors {
            drop(self.sensor_latency.get_or_create(&Sensor { sensor }));
        }
        for &kind in redactions {
            drop(self.redactions.get_or_create(&Kind { kind }));
        }
        self.genai.known(upstreams);
    }

    /// The zero series of `toolgate_cel_errors_total` for each rule named
    /// (those with a condition, at each policy load).
    pub fn zero_rules<'a>(&self, rules: impl Iterator<Item = &'a str>) {
        for rule in rules {
            drop(self.cel_errors.get_or_create(&Rule {
                rule: rule.to_string(),
            }));
        }
    }

    /// Records a gated request's exchange that ended (the GenAI families).
    pub fn exchange_ended(&self, x: &genai::Exchange) {
        self.genai.ended(x, |m| self.model_label(m));
    }

    /// Counts a response's tokens under its model (see [`Self::model_label`]).
    pub fn tokens(&self, model: &str, input: u64, output: u64) {
        // One label set, its kind changed: `get_or_create` copies it only
        // for a new series.
        let mut key = Tokens {
            model: self.model_label(model),
            kind: "input",
        };
        for (kind, n) in [("input", input), ("output", output)] {
            if n > 0 {
                key.kind = kind;
                self.tokens.get_or_create(&key).inc_by(n);
            }
        }
    }

    /// Counts redactions by kind.
    pub fn redacted(&self, counts: &std::collections::BTreeMap<&'static str, u64>) {
        for (kind, n) in counts {
            self.redactions.get_or_create(&Kind { kind }).inc_by(*n);
        }
    }

    /// The OpenMetrics text exposition.
    /// Renders with the gauges read now: upstream exchanges in flight,
    /// tasks alive and budget bytes in use.
    pub fn render_live(&self, streams: usize, tasks: usize, held_bytes: usize) -> String {
        let as_gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.open_streams.set(as_gauge(streams));
        self.tasks.set(as_gauge(tasks));
        self.held_bytes.set(as_gauge(held_bytes));
        self.render()
    }

    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8192);
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_labelled_counters_histograms_and_bounded_models() {
        let m = Metrics::default();
        m.request("chat_completions", 200);
        m.request("chat_completions", 200);
        m.request("refused", 404);
        m.decided(Decided {
            protocol: "chat_completions",
            verdict: "deny",
            gate: "policy",
            rule: "no-shell".into(),
            tool: "shell".into(),
        });
        m.genai.upstream_took("default", "chat_completions", 0.0003);
        m.genai.upstream_took("default", "chat_completions", 100.0);
        for i in 0..MAX_MODELS + 3 {
            m.tokens(&format!("model-{i}"), 10, 2);
        }
        m.tokens("model-0", 5, 0);
        let t = m.render();
        assert!(
            t.contains("toolgate_requests_total{route=\"chat_completions\",status=\"200\"} 2"),
            "{t}"
        );
        assert!(
            t.contains("toolgate_requests_total{route=\"refused\",status=\"404\"} 1"),
            "{t}"
        );
        assert!(t.contains("toolgate_tool_calls_total{protocol=\"chat_completions\",verdict=\"deny\",gate=\"policy\",rule=\"no-shell\",tool=\"shell\"} 1"), "{t}");
        assert!(
            t.contains("toolgate_upstream_latency_seconds_bucket{le=\"0.0005\",upstream=\"default\",protocol=\"chat_completions\"} 1"),
            "{t}"
        );
        assert!(
            t.contains("toolgate_upstream_latency_seconds_bucket{le=\"+Inf\",upstream=\"default\",protocol=\"chat_completions\"} 2"),
            "{t}"
        );
        assert!(
            t.contains("toolgate_upstream_latency_seconds_count{upstream=\"default\",protocol=\"chat_completions\"} 2"),
            "{t}"
        );
        assert!(
            t.contains("toolgate_tokens_total{model=\"model-0\",kind=\"input\"} 15"),
            "{t}"
        );
        assert!(
            t.contains("toolgate_tokens_total{model=\"other\",kind=\"output\"} 6"),
            "{t}"
        );
        assert!(t.ends_with("# EOF\n"));
    }
}
