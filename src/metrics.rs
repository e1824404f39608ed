//! Prometheus metrics, rendered as text on the admin port.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::policy::Verdict;

const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0, 60.0,
];

/// A fixed-bucket histogram of seconds.
#[derive(Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(BUCKETS.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(d.as_micros() as u64, Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cum = 0;
        for (i, b) in BUCKETS.iter().enumerate() {
            cum += self.counts[i].load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cum}");
        }
        cum += self.counts[BUCKETS.len()].load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cum}");
        let _ = writeln!(
            out,
            "{name}_sum {}",
            self.sum_micros.load(Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count {cum}");
    }
}

/// Route labels, in the order of [`Metrics::requests`]'s rows.
pub const ROUTES: [&str; 5] = [
    "chat_completions",
    "responses",
    "messages",
    "passthrough",
    "refused",
];

pub struct Metrics {
    /// Requests by route and status: one lock-free counter per (route, status 0..600).
    requests: Vec<AtomicU64>,
    tool_calls: [AtomicU64; 3],
    pub upstream_latency: Histogram,
    pub release_latency: Histogram,
    pub stream_faults: AtomicU64,
    pub late_tool_deltas: AtomicU64,
    pub resumes: AtomicU64,
    pub auth_failures: AtomicU64,
    pub resume_failures: AtomicU64,
    pub policy_reload_failures: AtomicU64,
    pub fenced_tool_results: AtomicU64,
    pub tls_handshake_failures: AtomicU64,
    pub tls_reload_failures: AtomicU64,
    redactions: std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: (0..ROUTES.len() * 600).map(|_| AtomicU64::new(0)).collect(),
            tool_calls: Default::default(),
            upstream_latency: Histogram::default(),
            release_latency: Histogram::default(),
            stream_faults: AtomicU64::new(0),
            late_tool_deltas: AtomicU64::new(0),
            resumes: AtomicU64::new(0),
            auth_failures: AtomicU64::new(0),
            resume_failures: AtomicU64::new(0),
            policy_reload_failures: AtomicU64::new(0),
            fenced_tool_results: AtomicU64::new(0),
            tls_handshake_failures: AtomicU64::new(0),
            tls_reload_failures: AtomicU64::new(0),
            redactions: Default::default(),
        }
    }
}

impl Metrics {
    pub fn request(&self, route: &'static str, status: u16) {
        let r = ROUTES
            .iter()
            .position(|x| *x == route)
            .unwrap_or(ROUTES.len() - 1);
        if let Some(c) = self.requests.get(r * 600 + usize::from(status.min(599))) {
            c.fetch_add(1, Relaxed);
        }
    }

    /// Counts redactions by kind (only requests that had any take the lock).
    pub fn redacted(&self, counts: &std::collections::BTreeMap<&'static str, u64>) {
        if let Ok(mut m) = self.redactions.lock() {
            for (k, n) in counts {
                *m.entry(k).or_default() += n;
            }
        }
    }

    pub fn tool_call(&self, v: Verdict) {
        self.tool_calls[v as usize].fetch_add(1, Relaxed);
    }

    pub fn tool_calls(&self, v: Verdict) -> u64 {
        self.tool_calls[v as usize].load(Relaxed)
    }

    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP toolgate_requests_total Requests by route and response status.\n# TYPE toolgate_requests_total counter\n");
        for (i, c) in self.requests.iter().enumerate() {
            let n = c.load(Relaxed);
            if n > 0 {
                let (route, status) = (ROUTES[i / 600], i % 600);
                let _ = writeln!(
                    out,
                    "toolgate_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
                );
            }
        }
        out.push_str("# HELP toolgate_tool_calls_total Gated tool calls by verdict.\n# TYPE toolgate_tool_calls_total counter\n");
        for v in [Verdict::Allow, Verdict::Reject, Verdict::Deny] {
            let _ = writeln!(
                out,
                "toolgate_tool_calls_total{{verdict=\"{}\"}} {}",
                v.as_str(),
                self.tool_calls(v)
            );
        }
        self.upstream_latency.render(
            &mut out,
            "toolgate_upstream_latency_seconds",
            "Time from sending a request upstream to its response headers.",
        );
        self.release_latency.render(
            &mut out,
            "toolgate_tool_call_release_seconds",
            "Time from the last upstream tool-call chunk to the release of the gated calls.",
        );
        out.push_str("# HELP toolgate_redactions_total Secrets redacted from tool results, by kind.\n# TYPE toolgate_redactions_total counter\n");
        if let Ok(m) = self.redactions.lock() {
            for (k, n) in m.iter() {
                let _ = writeln!(out, "toolgate_redactions_total{{kind=\"{k}\"}} {n}");
            }
        }
        for (name, help, v) in [
            (
                "toolgate_fenced_tool_results_total",
                "Tool results fenced before going upstream.",
                &self.fenced_tool_results,
            ),
            (
                "toolgate_stream_faults_total",
                "Streams ended with an error event (upstream error, truncation, malformed data).",
                &self.stream_faults,
            ),
            (
                "toolgate_late_tool_deltas_total",
                "Tool-call deltas stripped because their choice had already finished.",
                &self.late_tool_deltas,
            ),
            (
                "toolgate_auth_failures_total",
                "Requests refused because client authentication failed.",
                &self.auth_failures,
            ),
            (
                "toolgate_resumes_total",
                "Follow-up requests made so the model continues without its withheld calls (rewrite mode resume).",
                &self.resumes,
            ),
            (
                "toolgate_resume_failures_total",
                "Follow-up requests that failed; the response ended with the neutral text.",
                &self.resume_failures,
            ),
            (
                "toolgate_policy_reload_failures_total",
                "Policy reloads rejected because a file was invalid.",
                &self.policy_reload_failures,
            ),
            (
                "toolgate_tls_handshake_failures_total",
                "TLS handshakes on the data port that failed (e.g. no or untrusted client certificate).",
                &self.tls_handshake_failures,
            ),
            (
                "toolgate_tls_reload_failures_total",
                "Certificate reloads rejected because a file was invalid; the last good certificate stays.",
                &self.tls_reload_failures,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Relaxed)
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let m = Metrics::default();
        m.request("chat_completions", 200);
        m.request("chat_completions", 200);
        m.tool_call(Verdict::Deny);
        m.upstream_latency.observe(Duration::from_micros(300));
        m.upstream_latency.observe(Duration::from_secs(100));
        let t = m.render();
        assert!(t.contains("toolgate_requests_total{route=\"chat_completions\",status=\"200\"} 2"));
        assert!(t.contains("toolgate_tool_calls_total{verdict=\"deny\"} 1"));
        assert!(t.contains("toolgate_upstream_latency_seconds_bucket{le=\"0.0005\"} 1"));
        assert!(t.contains("toolgate_upstream_latency_seconds_bucket{le=\"+Inf\"} 2"));
        assert!(t.contains("toolgate_upstream_latency_seconds_count 2"));
    }
}
