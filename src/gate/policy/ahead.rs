//! Sensors asked ahead of a decision: while a chat turn still streams, a
//! call whose arguments are complete has its judges asked, so the decision
//! at the turn's finish finds their answers (or joins the questions in
//! flight) instead of starting them then.

use serde_json::json;

use super::PolicyGate;
use crate::call::Call;
use crate::context::Context;
use crate::policy::expr::Bindings;
use crate::policy::{FailMode, Rule, Verdict};

impl PolicyGate {
    /// Asks the sensors a call's decision will need, ahead of it: the same
    /// signals and first pass as the decision (quiet: a CEL error is the
    /// decision's to log and count), then each required sensor
    /// once, its answer left in the judge's cache. Nothing is decided here.
    /// A call some `[[limit]]` counts is not asked about: whether it is over
    /// its limit is known only by taking a token, which is the decision's,
    /// and a call over it would have a judge asked for nothing.
    pub async fn foresee(&self, call: &Call, ctx: &Context) {
        if self.policy.limits.iter().any(|l| l.applies_to(&call.name)) {
            return;
        }
        let plan = self.plans.get(&self.policy, &call.name);
        let rules = self.rules_of(&plan);
        let used: Vec<&str> = plan.used.iter().map(AsRef::as_ref).collect();
        let only = (!self.explain).then_some(used.as_slice());
        let mut sig = self.signals_of(call, ctx, &plan);
        // No limit applies: as the decision will read it.
        sig.set("rate.exceeded", json!(false));
        // Quiet and not remembered: the decision's own first pass logs and
        // counts a CEL error, and remembers the pass.
        let first = super::evaluate(
            &rules,
            &Bindings::new(sig.vars_only(only)),
            self.policy.default_verdict,
            &call.name,
            None,
        );
        if first.verdict > Verdict::Ask {
            return;
        }
        let mut names: Vec<&str> = required(&first.matched).iter().map(|r| r.0).collect();
        names.dedup();
        for name in names {
            if let Some(sensor) = self.sensors.iter().find(|s| s.name() == name) {
                // The answer (or the failure) is read again by the decision.
                let _ = sensor.sense(call, ctx, &sig).await;
            }
        }
    }
}

/// The sensors the matched rules require, with each rule's `fail` and name.
pub(super) fn required<'r>(matched: &[&'r Rule]) -> Vec<(&'r str, FailMode, &'r str)> {
    let mut required = Vec::new();
    for r in matched {
        for s in &r.require {
            required.push((s.as_str(), r.fail, r.name.as_str()));
        }
    }
    required
}
