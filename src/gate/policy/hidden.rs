//! What the rules decide of a tool before any call of it: always denied
//! (hidden from the model, left out of an MCP server's list) or allowed by
//! name (a provider-run tool), from the rules whose conditions read only
//! what does not depend on a call's arguments.

use std::hash::{Hash, Hasher};

use super::PolicyGate;
use crate::call::Verdict;
use crate::context::Context;
use crate::gate::signals;
use crate::policy::expr::Bindings;
use crate::policy::{PolicySet, Rule};

/// Variables that do not depend on a call's arguments.
const STATIC_VARS: [&str; 6] = ["tool", "phase", "principal", "session", "agent", "mission"];

/// Which of phase, principal, session and agent the `deny` rules read in
/// a condition `always_denied` evaluates (one that reads only static
/// variables).
pub(super) fn deny_reads(policy: &PolicySet) -> [bool; 4] {
    let mut reads = [false; 4];
    for r in policy.rules.iter().filter(|r| r.verdict == Verdict::Deny) {
        let Some(c) = &r.when else { continue };
        for (slot, name) in reads
            .iter_mut()
            .zip(["phase", "principal", "session", "agent"])
        {
            *slot |= c.variables.iter().any(|v| v == name);
        }
    }
    reads
}

/// How many `always_denied` answers are remembered.
pub(super) const HIDDEN_MEMO_ENTRIES: usize = 4096;

impl PolicyGate {
    /// True when the rules deny `tool` for this context whatever the arguments:
    /// a matching `deny` rule whose condition reads only tool, phase and caller.
    /// Answers are remembered per tool, whether it is declared, whether its
    /// definition changed in the session, and those of phase, principal,
    /// session and agent that a `deny` rule reads (a new session asks
    /// nothing new of rules that do not read it).
    pub fn always_denied(&self, tool: &str, ctx: &Context) -> bool {
        let key = {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            let redefined = ctx.redefined.iter().any(|n| n == tool);
            (tool, ctx.declared.contains_key(tool), redefined).hash(&mut h);
            let caller = [&ctx.phase, &ctx.principal, &ctx.session, &ctx.agent];
            for (read, value) in self.deny_reads.iter().zip(caller) {
                // A marker per slot, so no two choices hash alike.
                read.then_some(value).hash(&mut h);
            }
            h.finish()
        };
        if let Some(hit) = self.hidden_memo.get(&key) {
            return hit;
        }
        let denied = self.always_denied_uncached(tool, ctx);
        self.hidden_memo.insert(key, denied);
        denied
    }

    /// True when a rule allows `tool` by name (its `tools` list matches it,
    /// and its condition, reading only tool, phase and caller, holds) and the
    /// rules do not always deny it. For provider-run tools that are refused
    /// unless allowed (MCP servers).
    pub fn explicitly_allowed(&self, tool: &str, ctx: &Context) -> bool {
        if self.always_denied(tool, ctx) {
            return false;
        }
        self.any_static_match(tool, ctx, |r| {
            r.verdict == Verdict::Allow && r.tools.is_some()
        })
    }

    /// Whether a rule for `tool` that `keep` accepts holds whatever the
    /// arguments: no condition, or one that reads only tool, phase and
    /// caller and is true.
    fn any_static_match(&self, tool: &str, ctx: &Context, keep: impl Fn(&Rule) -> bool) -> bool {
        let s = signals::static_signals(tool, ctx, &self.policy, &self.namespaces);
        let vars = Bindings::new(s.vars());
        self.policy.rules_for(tool).iter().any(|r| {
            keep(r)
                && match &r.when {
                    None => true,
                    Some(c) => {
                        c.variables
                            .iter()
                            .all(|v| STATIC_VARS.contains(&v.as_str()))
                            && c.eval(&vars) == Ok(true)
                    }
                }
        })
    }

    fn always_denied_uncached(&self, tool: &str, ctx: &Context) -> bool {
        self.any_static_match(tool, ctx, |r| r.verdict == Verdict::Deny)
    }
}
