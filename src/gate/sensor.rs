//! LLM sensors (the sentinel, the output fact-checker): they propose assisted
//! signals; they never issue verdicts.

use serde_json::{json, Value};

use super::signals::Signals;
use super::BoxFuture;
use crate::call::Call;
use crate::context::Context;
use std::sync::Arc;

use crate::upstream::judge::{Failure, Judge, Reply};

/// One proposed assisted signal.
#[derive(Debug, Clone, PartialEq)]
pub struct Assisted {
    pub name: String,
    pub value: Value,
    pub confidence: f64,
}

pub trait Sensor: Send + Sync {
    /// The name rules use in `require` (`sentinel`, `output`).
    fn name(&self) -> &'static str;
    /// The model it asks, for its trace span (empty when it asks none).
    fn model(&self) -> &str {
        ""
    }
    /// Proposes signals for one call; an error is a sensor failure (the rule's `fail` decides).
    fn sense<'a>(
        &'a self,
        call: &'a Call,
        ctx: &'a Context,
        signals: &'a Signals,
    ) -> BoxFuture<'a, Result<Vec<Assisted>, Failure>>;
}

/// What an LLM sensor holds: its judge, the confidence an answer needs,
/// and whether the judge's reasons are kept as signals.
pub struct JudgeSensor {
    pub judge: Arc<Judge>,
    threshold: f64,
    include_reason: bool,
}

impl JudgeSensor {
    pub fn new(judge: Arc<Judge>, threshold: f64, include_reason: bool) -> JudgeSensor {
        JudgeSensor {
            judge,
            threshold,
            include_reason,
        }
    }

    /// The model the judge asks.
    pub fn model(&self) -> &str {
        self.judge.model()
    }

    /// An answer as assisted signals under `f` (see [`from_answer`]).
    pub fn signals(&self, a: &Reply, f: Fields) -> Result<Vec<Assisted>, Failure> {
        from_answer(a, f, self.threshold, self.include_reason)
    }
}

pub use crate::telemetry::SensorRun;

/// Where a judge's answer puts its decision and reason, and the signal prefix.
pub struct Fields {
    pub prefix: &'static str,
    pub decision: &'static str,
    pub reason: &'static str,
}

/// A judge's answer as assisted signals: `<prefix>.<decision>`, `.confidence`,
/// `.latency_ms`, `.cache_hit` (and `.<reason>` when reasons are kept). An
/// answer below the confidence threshold is a sensor failure.
pub fn from_answer(
    a: &Reply,
    f: Fields,
    threshold: f64,
    include_reason: bool,
) -> Result<Vec<Assisted>, Failure> {
    let confidence = a.value["confidence"].as_f64().unwrap_or(0.0);
    if confidence.is_nan() || confidence < threshold {
        return Err(Failure::new(
            "low_confidence",
            format!("confidence {confidence} below the threshold {threshold}"),
        ));
    }
    let one = |name: &str, value: Value| Assisted {
        name: format!("{}.{name}", f.prefix),
        value,
        confidence,
    };
    let mut out = vec![
        one(f.decision, a.value[f.decision].clone()),
        one("confidence", json!(confidence)),
        one("latency_ms", json!(a.latency.as_millis() as u64)),
        one("cache_hit", json!(a.cached)),
    ];
    if include_reason {
        out.push(one(f.reason, a.value[f.reason].clone()));
    }
    Ok(out)
}
