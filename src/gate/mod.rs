//! Gates: every tool call gets a verdict before the agent may see it.
//!
//! A [`Gate`] is async so that gates can wait on an LLM judge. [`Gates`] runs
//! the gates of one call in order — [`Integrity`] (a well-formed call), then
//! [`PolicyGate`] (signals, rules, sensors), then any added gates — stopping at
//! the first `reject` or `deny`; the calls of a choice run concurrently. The reason a
//! gate gives is audited and never shown to the agent.

pub mod commands;
pub mod detect;
pub mod fact_check;
pub mod injection;
pub mod injection_judge;
mod integrity;
mod kept;
pub mod outgoing;
mod plan;
pub mod policy;
pub mod schema;
pub mod sensor;
pub mod sentinel;
pub mod signals;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

pub use integrity::Integrity;
pub use policy::PolicyGate;
use schema::SchemaCache;
use sensor::Sensor;
use signals::Signals;

use crate::call::Call;
use crate::context::Context;
use crate::policy::{PolicySet, Verdict};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One gate's answer for one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub verdict: Verdict,
    /// A short reason code (audited, never shown).
    pub reason: Cow<'static, str>,
    /// The deciding rule, when a policy rule decided.
    pub rule: Option<String>,
    /// The signals the decision was made on (policy gate only).
    pub signals: Option<Signals>,
}

impl Outcome {
    pub fn allow(reason: &'static str) -> Outcome {
        Outcome {
            verdict: Verdict::Allow,
            reason: Cow::Borrowed(reason),
            rule: None,
            signals: None,
        }
    }

    pub fn reject(reason: &'static str) -> Outcome {
        Outcome {
            verdict: Verdict::Reject,
            reason: Cow::Borrowed(reason),
            rule: None,
            signals: None,
        }
    }
}

pub trait Gate: Send + Sync {
    fn name(&self) -> &'static str;
    fn check<'a>(&'a self, call: &'a Call, ctx: &'a Context) -> BoxFuture<'a, Outcome>;
}

/// One gate's step in a decision, for the audit trail.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    pub gate: &'static str,
    pub verdict: Verdict,
    pub micros: u64,
}

/// The final decision for one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// When deciding began, for the decision's trace span (the epoch when
    /// the request is not traced).
    pub at: std::time::SystemTime,
    pub verdict: Verdict,
    pub gate: &'static str,
    pub outcome: Outcome,
    pub steps: Vec<StepRecord>,
    pub signals: Option<Signals>,
}

/// The gate pipeline for one policy version.
pub struct Gates {
    integrity: Integrity,
    pub policy_gate: PolicyGate,
    extra: Vec<Arc<dyn Gate>>,
}

/// What the pipeline is built from besides the policy set.
#[derive(Clone, Default)]
pub struct Parts {
    pub namespaces: signals::Namespaces,
    pub schemas: Arc<SchemaCache>,
    pub sensors: Vec<Arc<dyn Sensor>>,
    pub extra: Vec<Arc<dyn Gate>>,
    /// Assisted signals below this confidence are discarded.
    pub threshold: f64,
    /// Where CEL run-time errors and sensor timings and failures are counted.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Rate-limit buckets shared by replicas (`[state] backend = "redis"`).
    pub shared: Option<Arc<crate::state::Shared>>,
}

impl Gates {
    pub fn new(policy: Arc<PolicySet>, parts: &Parts) -> Gates {
        // Each rule with a condition has its CEL error series from the start.
        parts.metrics.zero_rules(
            policy
                .rules
                .iter()
                .filter(|r| r.when.is_some())
                .map(|r| r.name.as_str()),
        );
        Gates {
            integrity: Integrity,
            policy_gate: PolicyGate::new(
                policy,
                parts.namespaces.clone(),
                parts.schemas.clone(),
                parts.sensors.clone(),
                parts.threshold,
                parts.metrics.clone(),
            )
            .sharing(parts.shared.clone()),
            extra: parts.extra.clone(),
        }
    }

    /// Whether every call is decided without waiting on anyone: no gate
    /// besides the policy's, no rule that asks a person, and none that
    /// requires a sensor that is configured (one that is not is skipped).
    pub fn prompt(&self) -> bool {
        let p = self.policy();
        self.extra.is_empty()
            && p.default_verdict != Verdict::Ask
            && p.rules.iter().all(|r| {
                r.verdict != Verdict::Ask && !r.require.iter().any(|s| self.policy_gate.senses(s))
            })
    }

    /// Whether some rule requires a sensor that is configured: a call's
    /// decision may then wait on a judge, whom [`Gates::foresee`] asks ahead.
    pub fn foresees(&self) -> bool {
        let p = self.policy();
        p.rules
            .iter()
            .any(|r| r.require.iter().any(|s| self.policy_gate.senses(s)))
    }

    /// Asks, ahead of a call's decision, what its decision will ask the
    /// judges (a call the integrity gate refuses needs nothing). Decides
    /// nothing and takes no rate token; the decision finds the answers in
    /// the judge's cache, or joins a question still in flight.
    pub async fn foresee(&self, call: &Call, ctx: &Context) {
        if self.integrity.check(call, ctx).await.verdict > Verdict::Ask {
            return;
        }
        self.policy_gate.foresee(call, ctx).await;
    }

    pub fn policy(&self) -> &Arc<PolicySet> {
        &self.policy_gate.policy
    }

    /// Runs the gates of one call in order; the most severe verdict stands.
    pub async fn decide(&self, call: &Call, ctx: &Context) -> Decision {
        let gates: Vec<&dyn Gate> = [&self.integrity as &dyn Gate, &self.policy_gate as &dyn Gate]
            .into_iter()
            .chain(self.extra.iter().map(|g| g.as_ref()))
            .collect();
        // Read only for a trace span: untraced, no clock is read.
        let at = if ctx.trace.is_some() {
            std::time::SystemTime::now()
        } else {
            std::time::UNIX_EPOCH
        };
        let mut steps = Vec::with_capacity(gates.len());
        let mut decided: Option<(&'static str, Outcome)> = None;
        let mut signals = None;
        for g in gates {
            let t = Instant::now();
            let mut o = g.check(call, ctx).await;
            steps.push(StepRecord {
                gate: g.name(),
                verdict: o.verdict,
                micros: t.elapsed().as_micros() as u64,
            });
            if let Some(s) = o.signals.take() {
                signals = Some(s);
            }
            // Ties go to the later gate: an `allow` is credited to the last gate that allowed.
            let worse = decided.as_ref().is_none_or(|(_, d)| o.verdict >= d.verdict);
            // An `ask` goes on: a later gate that rejects spares a person the question.
            let stop = o.verdict > Verdict::Ask;
            if worse {
                decided = Some((g.name(), o));
            }
            if stop {
                break;
            }
        }
        let (gate, outcome) = decided.unwrap_or(("none", Outcome::reject("no_gates")));
        Decision {
            at,
            verdict: outcome.verdict,
            gate,
            outcome,
            steps,
            signals,
        }
    }

    /// Decides every call concurrently; results are in the order of `calls`.
    pub async fn decide_all(&self, calls: &[Call], ctx: &Context) -> Vec<Decision> {
        futures_util::future::join_all(calls.iter().map(|c| self.decide(c, ctx))).await
    }
}

#[cfg(test)]
mod tests;
