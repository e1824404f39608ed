//! LLM sensors (the sentinel, the output fact-checker): they propose assisted
//! signals; they never issue verdicts.

use serde_json::Value;

use super::signals::Signals;
use super::BoxFuture;
use crate::request::Context;
use crate::wire::ToolCall;

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
    /// Proposes signals for one call; an error is a sensor failure (the rule's `fail` decides).
    fn sense<'a>(
        &'a self,
        call: &'a ToolCall,
        ctx: &'a Context,
        signals: &'a Signals,
    ) -> BoxFuture<'a, Result<Vec<Assisted>, String>>;
}
