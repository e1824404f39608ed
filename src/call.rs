//! The canonical tool call: everything a gate sees of a call, whatever the wire format.
//!
//! A protocol's decoder builds a [`Call`] from what the model proposed and
//! keeps, on its own side, where the call sits in its response (a choice and
//! index, an output item). Gates read only this type and [`crate::context`];
//! they answer with a [`Release`] per call, in the order the calls were given.

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
}

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
