//! Gates: every tool call gets a verdict before the agent may see it.
//!
//! A [`Gate`] is async so that later gates can wait on an LLM judge. [`Gates`]
//! runs the gates of one call in order, stopping at the first non-`allow`, and
//! the calls of a choice concurrently. The reason a gate gives is audited and
//! never shown to the agent.

mod declaration;
mod rules;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

pub use declaration::Declaration;
pub use rules::Rules;

use crate::policy::{PolicySet, Verdict};
use crate::request::Context;
use crate::wire::ToolCall;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One gate's answer for one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub verdict: Verdict,
    /// A short reason code (audited, never shown).
    pub reason: Cow<'static, str>,
    /// The deciding rule, when a policy rule decided.
    pub rule: Option<String>,
}

impl Outcome {
    pub fn allow(reason: &'static str) -> Outcome {
        Outcome {
            verdict: Verdict::Allow,
            reason: Cow::Borrowed(reason),
            rule: None,
        }
    }

    pub fn reject(reason: &'static str) -> Outcome {
        Outcome {
            verdict: Verdict::Reject,
            reason: Cow::Borrowed(reason),
            rule: None,
        }
    }
}

pub trait Gate: Send + Sync {
    fn name(&self) -> &'static str;
    fn check<'a>(&'a self, call: &'a ToolCall, ctx: &'a Context) -> BoxFuture<'a, Outcome>;
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
    pub verdict: Verdict,
    pub gate: &'static str,
    pub outcome: Outcome,
    pub steps: Vec<StepRecord>,
}

/// The gate pipeline for a policy version.
pub struct Gates {
    gates: Vec<Box<dyn Gate>>,
    pub policy: Arc<PolicySet>,
}

impl Gates {
    pub fn new(policy: Arc<PolicySet>) -> Gates {
        Gates {
            gates: vec![Box::new(Declaration), Box::new(Rules::new(policy.clone()))],
            policy,
        }
    }

    /// Adds a gate after the existing ones (LLM sensors, tests).
    pub fn push(&mut self, gate: Box<dyn Gate>) {
        self.gates.push(gate);
    }

    /// Runs the gates of one call in order; the most severe verdict stands.
    pub async fn decide(&self, call: &ToolCall, ctx: &Context) -> Decision {
        let mut steps = Vec::with_capacity(self.gates.len());
        let mut decided: Option<(&'static str, Outcome)> = None;
        for g in &self.gates {
            let t = Instant::now();
            let o = g.check(call, ctx).await;
            steps.push(StepRecord {
                gate: g.name(),
                verdict: o.verdict,
                micros: t.elapsed().as_micros() as u64,
            });
            // Ties go to the later gate: an `allow` is credited to the last gate that allowed.
            let worse = decided.as_ref().is_none_or(|(_, d)| o.verdict >= d.verdict);
            let stop = o.verdict != Verdict::Allow;
            if worse {
                decided = Some((g.name(), o));
            }
            if stop {
                break;
            }
        }
        let (gate, outcome) = decided.unwrap_or(("none", Outcome::reject("no_gates")));
        Decision {
            verdict: outcome.verdict,
            gate,
            outcome,
            steps,
        }
    }

    /// Decides every call concurrently; results are in the order of `calls`.
    pub async fn decide_all(&self, calls: &[ToolCall], ctx: &Context) -> Vec<Decision> {
        futures_util::future::join_all(calls.iter().map(|c| self.decide(c, ctx))).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Declared;

    fn ctx() -> Context {
        let mut c = Context::default();
        c.declared
            .insert("get".into(), Declared { parameters: None });
        c.declared
            .insert("shell".into(), Declared { parameters: None });
        c
    }

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall {
            name: name.into(),
            arguments: args.into(),
            ..ToolCall::default()
        }
    }

    fn gates(src: &str) -> Gates {
        Gates::new(Arc::new(
            PolicySet::from_sources(&[("p.toml".into(), src.into())]).unwrap(),
        ))
    }

    #[tokio::test]
    async fn declaration_runs_first_and_stops_the_pipeline() {
        let g = gates("[defaults]\nverdict = \"allow\"\n");
        let d = g.decide(&call("nope", "{}"), &ctx()).await;
        assert_eq!(
            (d.verdict, d.gate, d.outcome.reason.as_ref()),
            (Verdict::Reject, "declaration", "undeclared_tool")
        );
        assert_eq!(d.steps.len(), 1);
        let d = g.decide(&call("get", "{}"), &ctx()).await;
        assert_eq!((d.verdict, d.gate), (Verdict::Allow, "rules"));
        assert_eq!(d.steps.len(), 2);
    }

    #[tokio::test]
    async fn rules_decide_with_the_most_severe_match() {
        let g = gates("[defaults]\nverdict = \"allow\"\n[[rule]]\nname = \"r1\"\ntools = \"sh*\"\nverdict = \"reject\"\n[[rule]]\nname = \"r2\"\ntools = [\"shell\"]\nverdict = \"deny\"\n");
        let d = g.decide(&call("shell", "{}"), &ctx()).await;
        assert_eq!(
            (d.verdict, d.outcome.rule.as_deref()),
            (Verdict::Deny, Some("r2"))
        );
        let d = g.decide(&call("get", "{}"), &ctx()).await;
        assert_eq!(
            (d.verdict, d.outcome.rule.as_deref()),
            (Verdict::Allow, None)
        );
    }

    #[tokio::test]
    async fn decide_all_keeps_order() {
        let g = gates("[[rule]]\nname = \"ok\"\ntools = \"get\"\nverdict = \"allow\"\n");
        let calls = [call("get", "{}"), call("shell", "{}"), call("get", "[]")];
        let v: Vec<_> = g
            .decide_all(&calls, &ctx())
            .await
            .into_iter()
            .map(|d| d.verdict)
            .collect();
        assert_eq!(v, [Verdict::Allow, Verdict::Deny, Verdict::Reject]);
    }
}
