//! What deciding a tool's calls takes from the policy, the same for every
//! call of it: the rules that apply, the top-level variables they read and
//! the signal groups to compute. Worked out once per tool name and kept.

use std::sync::Arc;

use super::kept::Kept;
use super::signals::Needs;
use crate::policy::PolicySet;

/// How many tools' plans are kept (tool names are model output), and the
/// longest name one is kept for.
const PLANS: usize = 4096;
const PLAN_NAME_BYTES: usize = 256;

pub struct Plan {
    /// Positions in the policy's rules, in order.
    pub rules: Vec<usize>,
    /// Sorted, each once.
    pub used: Vec<Box<str>>,
    /// What the rules read (`explain` computes everything instead).
    pub needs: Needs,
}

impl Plan {
    fn new(policy: &PolicySet, tool: &str) -> Plan {
        let rules = policy.rule_ids_for(tool);
        let conditions = || {
            rules
                .iter()
                .filter_map(|&i| policy.rules.get(i)?.when.as_ref())
        };
        let mut used: Vec<&str> = conditions()
            .flat_map(|c| c.variables.iter().map(String::as_str))
            .collect();
        used.sort_unstable();
        used.dedup();
        let mut needs = Needs::of(conditions().flat_map(|c| c.names.iter().map(String::as_str)));
        // The output fact-checker reads the outgoing text from `output.*`.
        needs.output |= rules
            .iter()
            .filter_map(|&i| policy.rules.get(i))
            .any(|r| r.require.iter().any(|s| s == "output"));
        Plan {
            used: used.into_iter().map(Box::from).collect(),
            rules,
            needs,
        }
    }
}

/// Each tool's [`Plan`] under one policy, by its name as called.
pub struct Plans(Kept<Box<str>, Arc<Plan>>);

impl Default for Plans {
    fn default() -> Plans {
        Plans(Kept::new(PLANS))
    }
}

impl Plans {
    /// The plan for `tool`'s calls under `policy` (always the same policy).
    pub fn get(&self, policy: &PolicySet, tool: &str) -> Arc<Plan> {
        if let Some(p) = self.0.get(tool) {
            return p;
        }
        let plan = Arc::new(Plan::new(policy, tool));
        if tool.len() <= PLAN_NAME_BYTES {
            self.0.insert(tool.into(), plan.clone());
        }
        plan
    }
}
