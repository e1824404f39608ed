//! The tool catalog: `[[tool]]` entries give tools a class and a stricter schema.

use std::sync::Arc;

use serde::Deserialize;

use super::Glob;

/// What running a tool can do (irreversibility classes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolClass {
    ReadOnly,
    CreatesState,
    ModifiesState,
    Irreversible,
    CostsMoney,
    ExternalIo,
    /// Matched by no catalog entry.
    Unclassified,
}

impl ToolClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolClass::ReadOnly => "read_only",
            ToolClass::CreatesState => "creates_state",
            ToolClass::ModifiesState => "modifies_state",
            ToolClass::Irreversible => "irreversible",
            ToolClass::CostsMoney => "costs_money",
            ToolClass::ExternalIo => "external_io",
            ToolClass::Unclassified => "unclassified",
        }
    }
}

/// One `[[tool]]` entry.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    pub globs: Vec<Glob>,
    pub class: ToolClass,
    /// A schema the arguments must also satisfy, compiled at load.
    pub schema: Option<Arc<jsonschema::Validator>>,
    /// Calls that send text outside: checked against the facts.
    pub external: Option<ExternalComm>,
    /// More words that say what the tools do (`actions = ["wire", "remit"]`),
    /// caseless: read with the name's own by the described and delegated
    /// signals.
    pub actions: Vec<String>,
    pub origin: String,
}

/// `external_comm = { when, text }`: when a call is an external communication,
/// and where its outgoing text is.
#[derive(Debug, Clone)]
pub struct ExternalComm {
    /// CEL over the call's signals (`args`, `tool`, …); `None` = always.
    pub when: Option<super::expr::Condition>,
    /// JSON pointers to the outgoing text; empty = every string leaf of the arguments.
    pub text: Vec<String>,
}

impl ToolEntry {
    pub fn matches(&self, tool: &str) -> bool {
        self.globs.iter().any(|g| g.matches(tool))
    }
}
