//! The canonical tool call: everything a gate sees of a call, whatever the wire format.
//!
//! A protocol's decoder builds a [`Call`] from what the model proposed and
//! keeps, on its own side, where the call sits in its response (a choice and
//! index, an output item). Gates read only this type and [`crate::context`];
//! they answer with a [`Release`] per call, in the order the calls were given.
//! The policy's [`Verdict`] and [`RewriteMode`] are here too: the words a
//! decision is written in, shared by the config, the policy and the gates.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use serde::Deserialize;

/// What sort of call the model proposed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Kind {
    /// A function tool: a name and JSON arguments.
    #[default]
    Function,
    /// A custom (free-form) tool; its `input` text is given as `{"input": …}`.
    Custom,
    /// A shell command for the client's shell tool (`action` as arguments).
    Shell,
    /// A command for the client's local shell tool (`action` as arguments).
    LocalShell,
    /// A file patch for the client's patch tool (`operation` as arguments).
    ApplyPatch,
    /// A computer-use action (`action` as arguments).
    Computer,
    /// A tool search the client runs (its `arguments` object as arguments).
    ToolSearch,
    /// A call type the decoder cannot carry faithfully: always rejected.
    Other(String),
}

impl Kind {
    pub fn as_str(&self) -> &str {
        match self {
            Kind::Function => "function",
            Kind::Custom => "custom",
            Kind::Shell => "shell",
            Kind::LocalShell => "local_shell",
            Kind::ApplyPatch => "apply_patch",
            Kind::Computer => "computer",
            Kind::ToolSearch => "tool_search",
            Kind::Other(s) => s,
        }
    }
}

/// One tool call as the model proposed it, complete and ready for the gates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Call {
    /// Which of the response's alternative answers it belongs to (chat
    /// completions with `n` > 1); 0 where a format has one answer.
    pub choice: u32,
    /// The call id the client answers with its result.
    pub id: String,
    pub kind: Kind,
    /// The tool's name; for built-in tools, the tool type (`shell`, `apply_patch`, …).
    pub name: String,
    /// The raw argument text (expected to be a JSON object).
    pub arguments: String,
    /// The arguments went over `[limits]`; they were dropped and the call must be rejected.
    pub oversized: bool,
    /// The name went over [`MAX_NAME_BYTES`]; it was dropped and the call must be rejected.
    pub name_too_long: bool,
    /// The name came as a namespace and a name (`namespace.name`): it
    /// counts only when the request declared that namespace tool, since a
    /// client that reads no namespace runs the bare name.
    pub namespaced: bool,
}

impl Call {
    /// Whether a call the provider ran read what toolgate never sees: every
    /// provider-run tool but the provider's own that search the request's
    /// tool definitions (`tool_search…`) or only make an image. A remote
    /// MCP server's tool (`mcp_tool_use`, `mcp_call`) always counts, however
    /// the server named it.
    pub fn reads_outside(&self) -> bool {
        let remote = matches!(&self.kind, Kind::Other(t) if t.starts_with("mcp_"));
        remote || !(self.name.starts_with("tool_search") || self.name == "image_generation")
    }
}

/// The longest call id a response may carry (providers' are tens of
/// bytes): a longer one fails the response, as it arrives, so that ids
/// cannot make a stream hold more than its budgets allow.
pub const MAX_CALL_ID_BYTES: usize = 512;

/// The longest tool name a call may have (providers allow 64 bytes); a longer
/// one is dropped as it arrives and the call rejected.
pub const MAX_NAME_BYTES: usize = 256;

/// A decision about one held call, as the protocol encoder acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Released as the model sent it.
    Allow,
    /// Replaced by the neutral failure; nothing of the call reaches the client.
    Withhold,
    /// Withheld, and the model may be asked to go on without it (`rewrite =
    /// "resume"`): answered upstream with a neutral tool result, its tool
    /// removed from the follow-up's `tools` when `deny`.
    Resume { deny: bool },
}

impl Release {
    /// The answer for position `i` of `verdicts`: a missing answer withholds.
    pub fn at(verdicts: &[Release], i: usize) -> Release {
        verdicts.get(i).copied().unwrap_or(Release::Withhold)
    }

    pub fn allowed(self) -> bool {
        self == Release::Allow
    }

    pub fn resumable(self) -> bool {
        matches!(self, Release::Resume { .. })
    }
}

/// What happens to a tool call. Ordered by severity: `Allow < Ask < Reject < Deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The call is released to the agent.
    Allow,
    /// Held until a person approves it (`[approval]`); denied, timed out or
    /// abandoned, it is a neutral failure. `pause` is the same verdict.
    #[serde(alias = "pause")]
    Ask,
    /// A neutral failure: the call is removed.
    Reject,
    /// An authorization failure: as though the call never happened.
    Deny,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Ask => "ask",
            Verdict::Reject => "reject",
            Verdict::Deny => "deny",
        }
    }
}

/// What replaces a withheld call (`[rewrite] mode`, or a rule's `rewrite`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RewriteMode {
    /// The call is removed; a choice left without calls gets the neutral text.
    #[default]
    Drop,
    /// toolgate answers the call with a neutral tool result upstream itself
    /// and splices the model's continuation into the same response.
    Resume,
}

/// How many of a request's calls got each verdict (follow-ups included).
#[derive(Debug, Default)]
pub struct Tally {
    by_verdict: [AtomicU32; 4],
}

impl Tally {
    pub fn count(&self, v: Verdict) {
        self.by_verdict[v as usize].fetch_add(1, Relaxed);
    }

    pub fn get(&self, v: Verdict) -> u32 {
        self.by_verdict[v as usize].load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_servers_tool_reads_outside_whatever_its_name() {
        let run = |kind: &str, name: &str| Call {
            kind: Kind::Other(kind.into()),
            name: name.into(),
            ..Call::default()
        };
        assert!(run("server_tool_use", "web_search").reads_outside());
        assert!(!run("server_tool_use", "tool_search_tool_bm25").reads_outside());
        assert!(!run("image_generation_call", "image_generation").reads_outside());
        assert!(run("mcp_tool_use", "tool_search_docs").reads_outside());
        assert!(run("mcp_call", "image_generation").reads_outside());
    }
}
