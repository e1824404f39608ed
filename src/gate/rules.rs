//! The rules gate: policy `[[rule]]`s by tool glob; the most severe match wins.

use std::borrow::Cow;
use std::sync::Arc;

use super::{BoxFuture, Gate, Outcome};
use crate::policy::PolicySet;
use crate::request::Context;
use crate::wire::ToolCall;

pub struct Rules {
    policy: Arc<PolicySet>,
}

impl Rules {
    pub fn new(policy: Arc<PolicySet>) -> Rules {
        Rules { policy }
    }

    pub fn judge(&self, call: &ToolCall) -> Outcome {
        let mut best: Option<&crate::policy::Rule> = None;
        for r in self
            .policy
            .rules
            .iter()
            .filter(|r| r.applies_to(&call.name))
        {
            if best.is_none_or(|b| r.verdict > b.verdict) {
                best = Some(r);
            }
        }
        match best {
            Some(r) => Outcome {
                verdict: r.verdict,
                reason: Cow::Borrowed("rule"),
                rule: Some(r.name.clone()),
            },
            None => Outcome {
                verdict: self.policy.default_verdict,
                reason: Cow::Borrowed("default"),
                rule: None,
            },
        }
    }
}

impl Gate for Rules {
    fn name(&self) -> &'static str {
        "rules"
    }

    fn check<'a>(&'a self, call: &'a ToolCall, _ctx: &'a Context) -> BoxFuture<'a, Outcome> {
        let o = self.judge(call);
        Box::pin(async move { o })
    }
}
