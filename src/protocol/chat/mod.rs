//! The Chat Completions codec (`POST /v1/chat/completions`); no I/O.
//!
//! - [`request`]: the request's declared tools, texts and tool results.
//! - [`hide`]: removes denied tools from the request.
//! - [`assemble`]: tool-call deltas → complete calls.
//! - [`delta`]: a chunk of tool-call deltas only, read without a tree;
//!   [`repeat`]: one that repeats the last but for its arguments' text.
//! - [`finish`]: a chunk that only finishes a choice, read the same way.
//! - [`template`]: the chunks toolgate writes (upstream fields, a released call).
//! - [`stream`]: the streaming rewriter: text passes, calls are held, gated, re-emitted.
//! - [`complete`]: the same gating over a non-streaming response.

mod codec;
pub use codec::Chat;
pub mod assemble;
pub mod chunk;
pub mod complete;
pub mod delta;
pub mod finish;
pub mod follow;
pub mod hide;
pub mod repeat;
pub mod request;
pub mod stream;
pub mod template;
pub mod text_chunk;

use std::ops::{Deref, DerefMut};

use std::sync::LazyLock;

use bytes::{BufMut, BytesMut};
use memchr::memmem::Finder;
use serde_json::{Map, Value};

use crate::call::{Call, Kind};

/// Where a chat call sits, and what of its entry is re-emitted besides the call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Site {
    /// Its assembly key: the upstream `index` (streaming) or array position (non-streaming).
    pub index: u64,
    /// A legacy `function_call` rather than a `tool_calls` entry.
    pub legacy: bool,
    /// Other keys of the upstream entry (e.g. Gemini's `extra_content`), re-emitted as they were.
    pub extra: Map<String, Value>,
}

/// A chat call as it is assembled: the canonical call and its [`Site`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatCall {
    pub call: Call,
    pub site: Site,
    /// The entry's `type`, if any; only `function` can be carried.
    pub wire_type: Option<String>,
}

impl ChatCall {
    /// The canonical call (its kind settled) and its site.
    pub fn into_parts(mut self) -> (Call, Site) {
        self.call.kind = kind_of(self.wire_type.as_deref());
        (self.call, self.site)
    }
}

impl Deref for ChatCall {
    type Target = Call;
    fn deref(&self) -> &Call {
        &self.call
    }
}

impl DerefMut for ChatCall {
    fn deref_mut(&mut self) -> &mut Call {
        &mut self.call
    }
}

/// The canonical kind of an entry's `type`: chat carries function calls only.
pub fn kind_of(wire_type: Option<&str>) -> Kind {
    match wire_type {
        None | Some("function") => Kind::Function,
        Some(other) => Kind::Other(other.to_string()),
    }
}

/// The keys toolgate reads, per level of a chat-completions body. A key that
/// is not one of them but folds to one ([`crate::fold`]) fails the body.
pub mod keys {
    pub const TOP: [&str; 2] = ["choices", "error"];
    pub const CHOICE: [&str; 5] = [
        "index",
        "message",
        "delta",
        "finish_reason",
        "native_finish_reason",
    ];
    pub const MESSAGE: [&str; 4] = ["tool_calls", "function_call", "content", "role"];
    pub const ENTRY: [&str; 4] = ["index", "id", "type", "function"];
    pub const FUNCTION: [&str; 2] = ["name", "arguments"];
}

static NEEDLES: LazyLock<[Finder<'static>; 4]> = LazyLock::new(|| {
    [
        Finder::new(b"tool_calls"),
        Finder::new(b"function_call"),
        // A JSON escape could spell either key (`"tool\u005fcalls"`).
        Finder::new(b"\\u"),
        Finder::new(b"\"error\""),
    ]
});

static REASONING: LazyLock<[Finder<'static>; 2]> =
    LazyLock::new(|| [Finder::new(b"reasoning_details"), Finder::new(b"\"id\"")]);

/// What the prefilter says of an event's data.
pub struct Prefilter {
    /// It holds, in any ASCII case, a key a call or an error is read from (or
    /// a `\u` escape that could spell one): data that is not JSON is an error.
    pub names_call: bool,
    /// It holds `tool_calls` or `function_call` in some ASCII case (not
    /// only an escape), or reasoning that names an id: the chunk is no
    /// text-only one ([`text_chunk`] would not take it).
    pub beyond_text: bool,
    /// False only when it cannot hold a tool call or an error object in any
    /// JSON reading, readers that match keys without regard to case included:
    /// then the event may be forwarded without parsing. Any non-ASCII byte
    /// could be part of a key that folds to a known one, so it needs the parse.
    pub risky: bool,
}

thread_local! {
    /// The lower-cased copy the prefilter searches, one per thread: kept
    /// per stream it would hold an event's size for the stream's life.
    static LOWERED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A larger copy than this is let go after its search.
const LOWERED_KEEP: usize = 64 * 1024;

/// Looks at `data` without parsing it.
pub fn prefilter(data: &[u8]) -> Prefilter {
    LOWERED.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            let found = prefilter_in(data, &mut scratch);
            if scratch.capacity() > LOWERED_KEEP {
                *scratch = Vec::new();
            }
            found
        }
        // Not reentered; were it, a copy of its own is as good.
        Err(_) => prefilter_in(data, &mut Vec::new()),
    })
}

/// [`prefilter`], searching `scratch` made the lower-cased copy of `data`.
fn prefilter_in(data: &[u8], scratch: &mut Vec<u8>) -> Prefilter {
    scratch.clear();
    scratch.extend(data.iter().map(u8::to_ascii_lowercase));
    let call_keys = NEEDLES[..2].iter().any(|f| f.find(scratch).is_some());
    let names_call = call_keys || NEEDLES[2..].iter().any(|f| f.find(scratch).is_some());
    // Reasoning entries that name an id may name a call: they are read.
    let named_reasoning = REASONING[0]
        .find(scratch)
        .is_some_and(|at| REASONING[1].find(&scratch[at..]).is_some());
    Prefilter {
        names_call,
        beyond_text: call_keys || named_reasoning,
        risky: names_call || named_reasoning || !data.is_ascii(),
    }
}

static FINISH: LazyLock<[Finder<'static>; 2]> = LazyLock::new(|| {
    [
        Finder::new(b"\"finish_reason\":\""),
        Finder::new(b"\"finish_reason\": \""),
    ]
});

/// A cheap look for a non-null `finish_reason` in an unparsed chunk.
pub fn has_finish(data: &[u8]) -> bool {
    FINISH.iter().any(|f| f.find(data).is_some())
}

static CONTENT: LazyLock<[Finder<'static>; 2]> = LazyLock::new(|| {
    [
        Finder::new(b"\"content\":\""),
        Finder::new(b"\"content\": \""),
    ]
});

/// A cheap look for non-empty text content in an unparsed chunk.
pub fn has_text(data: &[u8]) -> bool {
    CONTENT.iter().any(|f| {
        f.find(data)
            .is_some_and(|i| data.get(i + f.needle().len()) != Some(&b'"'))
    })
}

/// Appends `data: <json>\n\n`.
pub fn write_event(out: &mut BytesMut, v: &Value) {
    out.put_slice(b"data: ");
    // Serialising a `Value` into memory cannot fail.
    let _ = serde_json::to_writer(out.writer(), v);
    out.put_slice(b"\n\n");
}

pub const DONE: &[u8] = b"data: [DONE]\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefilter_catches_keys_escapes_and_errors() {
        let may_need_gate = |d: &[u8]| prefilter(d).risky;
        assert!(!may_need_gate(
            br#"{"choices":[{"delta":{"content":"hi"}}]}"#
        ));
        assert!(may_need_gate(br#"{"delta":{"tool_calls":[]}}"#));
        assert!(may_need_gate(br#"{"delta":{"function_call":{}}}"#));
        assert!(may_need_gate(br#"{"delta":{"tool\u005fcalls":[]}}"#));
        assert!(may_need_gate(br#"{"error":{"message":"x"}}"#));
        assert!(may_need_gate(br#"{"delta":{"TOOL_CALLS":[]}}"#));
        assert!(may_need_gate(br#"{"delta":{"Function_Call":{}}}"#));
        assert!(may_need_gate("{\"delta\":{\"tool_callſ\":[]}}".as_bytes()));
        assert!(may_need_gate(br#"{"ERROR":{}}"#));
        assert!(may_need_gate(
            br#"{"id":"g","choices":[{"delta":{"reasoning_details":[{"type":"reasoning.encrypted","id":"tool_x"}]}}]}"#
        ));
        assert!(!may_need_gate(
            br#"{"id":"g","choices":[{"delta":{"reasoning_details":[{"type":"reasoning.text","text":"t"}]}}]}"#
        ));
    }

    #[test]
    fn text_detection() {
        assert!(has_text(br#"{"delta":{"content":"hi"}}"#));
        assert!(has_text(br#"{"delta":{"content": "hi"}}"#));
        assert!(!has_text(br#"{"delta":{"content":""}}"#));
        assert!(!has_text(br#"{"delta":{"content":null}}"#));
        assert!(has_finish(br#"{"finish_reason":"stop"}"#));
        assert!(has_finish(br#"{"finish_reason": "stop"}"#));
        assert!(!has_finish(br#"{"finish_reason":null}"#));
    }
}
