//! The label sets of toolgate's metrics. Every value is bounded: routes,
//! verdicts, gates and protocols are fixed words; rules and tools come from
//! the loaded policy (a tool outside the catalog is `other`); models are
//! capped in [`super::Metrics::tokens`].

use prometheus_client::encoding::EncodeLabelSet;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteStatus {
    pub route: &'static str,
    pub status: u16,
}

/// One gated call's decision.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Decided {
    pub protocol: &'static str,
    pub verdict: &'static str,
    /// The gate that decided (`policy`, `integrity`, `schema`, …).
    pub gate: &'static str,
    /// The deciding rule, or empty for the default verdict and gates
    /// without rules.
    pub rule: String,
    /// The tool's catalog entry (its name, or the glob that matched it), or
    /// `other`.
    pub tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Gate {
    pub gate: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Sensor {
    pub sensor: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Overload {
    /// What was full: `connections`, `streams` or `body_bytes`.
    pub limit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateError {
    /// What needed shared state: `limit` (a count), `remember` (a stored
    /// response's record written), `recall` (one read).
    pub op: &'static str,
    /// What followed: `fail_closed` or `local`.
    pub then: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SensorError {
    pub sensor: &'static str,
    /// `timeout`, `connect`, `status`, `unreadable`, `schema`,
    /// `low_confidence`, `busy` or `other`.
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Rule {
    pub rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Tokens {
    pub model: String,
    /// `input` or `output`.
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Kind {
    pub kind: &'static str,
}

/// How a wait for a person ended, and who answered.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Approval {
    pub decision: &'static str,
    pub channel: &'static str,
}
