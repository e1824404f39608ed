//! The protocol layer: one codec per wire format around the canonical
//! [`Call`](crate::call::Call).
//!
//! A codec knows everything about its wire format and nothing about the
//! gates: it reads the request's declared tools, texts and tool results
//! ([`Parsed`]), rewrites the request (fence, hidden tools), and turns the
//! upstream response into held calls, releasing each one byte-identical or
//! replacing it by a neutral failure as the [`crate::call::Release`]
//! verdicts say. The gates see only [`crate::call::Call`] and
//! [`crate::context::Context`].
//!
//! - [`chat`]: Chat Completions (`/v1/chat/completions`).
//! - [`responses`]: the Responses API (`/v1/responses`).
//! - [`messages`]: the Anthropic Messages API (`/v1/messages`).
//! - [`sse`]: the event-stream decoder; [`crate::json`]: borrowed JSON, shared.
//!
//! The stream rewriter's contract is in [`Rewriter`], what carries over to
//! later requests in [`Resumption`] and [`Withheld`], the one event loop in `events.rs`.
//! Adding a wire format: see docs/ARCHITECTURE.md ("How to add").

pub mod chat;
mod codec;
pub mod gemini;
pub use codec::{Codec, Refusal, Row, Serve};
pub mod messages;
pub mod request;
pub mod responses;
pub use request::{array, stream_flag, tree_cost};
pub mod complete;
pub mod conversation;
pub(crate) mod events;
pub mod provider_error;
pub mod sse;

pub use provider_error::ProviderError;

pub use complete::{Complete, Reading};
mod resumption;
mod rewriter;
pub use resumption::{add_usage, append_turn, join_whole, Held, Resumption, Stored, Withheld};
pub use rewriter::{Options, Rewriter, Step, Totals, Update};
pub mod sync_driver;
pub mod text_calls;
pub mod usage;

use std::borrow::Cow;
use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value};

use crate::context::{Declared, Texts};
use crate::error::Error;
use crate::fence::{self, ToolResult};
use crate::json::{Marks, Places};

/// The wire formats toolgate gates: each the key of its [`Codec`] in
/// [`Protocol::codec`], the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// OpenAI Chat Completions, which most clients speak (the default of
    /// `toolgate explain`).
    #[default]
    Chat,
    Responses,
    Messages,
    Gemini,
}

/// The registry: one codec per [`Protocol`], at its index.
static CODECS: [&dyn Codec; 4] = [
    &chat::Chat,
    &responses::Responses,
    &messages::Messages,
    &gemini::Gemini,
];

impl Protocol {
    /// Every wire format toolgate gates.
    pub const ALL: [Protocol; 4] = [
        Protocol::Chat,
        Protocol::Responses,
        Protocol::Messages,
        Protocol::Gemini,
    ];

    /// The codec of this wire format.
    pub fn codec(self) -> &'static dyn Codec {
        CODECS[self as usize]
    }

    /// The protocol a [`Protocol::label`] names (`-` read as `_`).
    pub fn from_label(s: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| {
            p.label()
                .bytes()
                .eq(s.bytes().map(|b| if b == b'-' { b'_' } else { b }))
        })
    }

    /// The route label in metrics and the protocol named in audit records.
    pub fn label(self) -> &'static str {
        self.codec().label()
    }

    /// The provider family a wire format names, for traces (`gen_ai.system`).
    pub fn provider_family(self) -> &'static str {
        self.codec().provider_family()
    }

    /// The `[upstream.NAME]` section this protocol's requests go to, when it
    /// has its own; `None` for `[upstream]`.
    pub fn upstream_section(self) -> Option<&'static str> {
        self.codec().upstream_section()
    }

    /// A whole follow-up body `v` made the continuation of `first` after
    /// the responses in `before` (one id, the text or blocks before it,
    /// usage summed).
    pub fn join(self, first: &Value, before: &[Resumption], v: &mut Value) {
        self.codec().join(first, before, v)
    }

    /// The stored response or thread answer a request continues (Responses'
    /// `previous_response_id`, a Messages thread's `previous_message_id`),
    /// whose records [`Protocol::continue_stored`] reads; Chat stores nothing.
    pub fn stored_from(self, body: &Value) -> Option<String> {
        self.codec().stored_from(body)
    }

    /// A request continuing a stored answer goes on from the answer a
    /// follow-up continued it as, and answers the calls withheld from it
    /// with `text`. Formats that store nothing leave the body as it is.
    pub fn continue_stored(self, body: &mut Value, stored: &dyn Stored, text: &str) {
        self.codec().continue_stored(body, stored, text)
    }

    /// Whether a later request may continue this one's answer by
    /// reference (a stored Responses response, a Messages thread): then
    /// what the signals read of the conversation is remembered.
    pub fn continued_by_reference(self, body: &Value) -> bool {
        self.codec().continued_by_reference(body)
    }

    /// Whether the provider holds the request's conversation, tools and
    /// system text included (a Messages thread).
    pub fn held(self, body: &Value) -> Held {
        self.codec().held(body)
    }

    /// Reads a complete (non-streamed) response body.
    pub fn complete<'a>(self, text: &'a str, r: Reading) -> Result<Box<dyn Complete + 'a>, Error> {
        self.codec().complete(text, r)
    }

    /// The body of an error answered on this protocol's routes.
    pub fn error_body(self, err: &Error) -> Bytes {
        self.codec().error_body(err)
    }

    /// Reads the request body: its declared tools and whether it streams.
    pub fn parse(self, bytes: &[u8]) -> Result<Parsed, Error> {
        self.codec().parse(bytes)
    }

    /// The tools the request `body` declares, each with its declared schema
    /// (a function's parameters), in body order.
    pub fn declarations(self, body: &Value) -> Result<Declarations<'_>, Error> {
        self.codec().declarations(body)
    }

    /// Each declared tool's whole definition, in body order.
    pub fn definitions(self, body: &Value) -> Vec<(String, &Value)> {
        self.codec().definitions(body)
    }

    /// Writes the request `body` with `write` (given the nodes whose places
    /// it must note, it gives the text and those places), and gives each
    /// declaration of `declared` still [`Declared::unwritten`] its schema's
    /// text, a slice of what was written: the declared schemas go upstream
    /// anyway, and an agent declaring many tools sends tens of KiB of them
    /// every turn.
    pub fn write_request<B: AsRef<[u8]>>(
        self,
        body: &Value,
        declared: &mut HashMap<String, Declared>,
        write: impl FnOnce(&Marks<'_>) -> Result<(B, Places), Error>,
    ) -> Result<B, Error> {
        // Read as parsing read them; should that fail here, the schemas
        // stay unwritten and their calls fail the schema check.
        let found = self.declarations(body).unwrap_or_default();
        let marks = Marks {
            nodes: found.iter().filter_map(|(_, p)| *p).collect(),
            within: self.codec().tool_lists(),
        };
        let (text, places) = write(&marks)?;
        let mut places = places.into_iter();
        let named = (found.iter())
            .map(|(name, p)| (name.as_ref(), p.and_then(|_| places.next().flatten())));
        crate::context::take_schemas(declared, named, text.as_ref());
        Ok(text)
    }

    /// The request's texts by role; all user and tool text, and the calls
    /// the tool results answer, only when `all`.
    pub fn texts(self, body: &Value, all: bool) -> Texts {
        self.texts_and_calls(body, all, all)
    }

    /// [`Protocol::texts`], the calls of the assistant turns read only when
    /// `calls` (and `all`): a rule reads the delegated-value signal.
    pub fn texts_and_calls(self, body: &Value, all: bool, calls: bool) -> Texts {
        let mut t = self.codec().texts(body, all, all && calls);
        t.unseen = self.codec().unseen_history(body);
        t.unread_results = self.codec().unread_results(body);
        t
    }

    /// The request's tool results, to be fenced in place.
    pub fn tool_results(self, body: &mut Value) -> Vec<ToolResult<'_>> {
        self.codec().tool_results(body)
    }

    /// Redacts and fences the request's tool results in place, and adds the
    /// notice once when any was fenced or the request declares tools (whose
    /// results later turns will carry). The notice explains every mode the
    /// policy may use, so it reads the same on every turn of a conversation
    /// and the provider's prompt cache keeps its prefix.
    pub fn fence(
        self,
        body: &mut Value,
        s: &fence::Settings<'_>,
        declares_tools: bool,
    ) -> fence::Fenced {
        let report = fence::apply(self.tool_results(body), s);
        if report.fenced > 0 || declares_tools {
            self.add_notice(body, &fence::marker::notice(&s.policy.fence_modes()));
        }
        report
    }

    /// Adds the fence notice to the request's system text (once).
    pub fn add_notice(self, body: &mut Value, notice: &str) {
        self.codec().add_notice(body, notice)
    }

    /// Removes the named tools from the request; whether the body changed.
    pub fn hide(self, body: &mut Value, names: &[String]) -> bool {
        self.codec().hide(body, names)
    }

    /// Turns what went upstream last into the follow-up request that
    /// answers a [`Resumption`].
    pub fn follow_up(self, body: &mut Value, r: &Resumption) -> Result<(), Error> {
        self.codec().follow_up(body, r)
    }

    /// A streaming rewriter for one response.
    pub fn rewriter(self, o: &Options) -> Box<dyn Rewriter> {
        self.codec().rewriter(o)
    }
}

/// The tools a request declares, by the name they are gated under, each
/// with its declared schema if any, in body order.
pub type Declarations<'a> = Vec<(Cow<'a, str>, Option<&'a Value>)>;

/// A parsed request.
#[derive(Debug)]
pub struct Parsed {
    pub body: Value,
    pub declared: HashMap<String, Declared>,
    /// `stream: true`: the answer must be an event stream (else JSON).
    pub stream: bool,
    /// The model asked for (`model`), for traces and metrics.
    pub model: Option<String>,
    /// The request asks for structured output (Chat Completions'
    /// `response_format`, the Responses API's `text.format`, of type
    /// `json_schema` or `json_object`): a neutral text must not be read as
    /// the JSON the agent will parse.
    pub structured_output: bool,
    /// How many choices the answer holds (Chat Completions' `n`; 1 for the
    /// others): a follow-up can continue only one.
    pub choices: u64,
    /// Declared tools the provider runs itself: their calls never pass
    /// toolgate, so they are gated on the request alone.
    pub hosted: Vec<String>,
    /// `(other name, declared name)`: a declared tool also known by another
    /// name (an Anthropic-defined tool by its type); denying either hides it.
    pub aliases: Vec<(String, String)>,
    /// Provider-run tools the request uses that a rule must allow by name
    /// (MCP servers); otherwise the request is refused.
    pub explicit: Vec<String>,
}

/// The `model` a request body names, if a string.
pub(crate) fn model_of(body: &Value) -> Option<String> {
    body.get("model")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Whether a `type` names structured output.
pub(crate) fn structured(ty: Option<&Value>) -> bool {
    matches!(
        ty.and_then(Value::as_str),
        Some("json_schema" | "json_object")
    )
}

/// An upstream body toolgate cannot read in exactly one way: the response
/// fails closed with `why` (for the log; the agent sees a generic error).
pub(crate) fn malformed(why: &'static str) -> Error {
    Error::UpstreamUnreadable(why)
}

/// An error when `ambiguous` (see [`crate::json::Obj::ambiguous`]).
pub fn fold_guard(ambiguous: bool) -> Result<(), Error> {
    if ambiguous {
        return Err(Error::UpstreamUnreadable(
            "a key differs from a known key only by case or spelling",
        ));
    }
    Ok(())
}

/// The same check over a parsed map (repeated keys are refused by the parse,
/// [`crate::json::strict_value`]).
pub fn map_guard(m: &Map<String, Value>, known: &[&str]) -> Result<(), Error> {
    fold_guard(m.keys().any(|k| crate::fold::impersonates(k, known)))
}

/// Appends a data event whose payload is `data` (split on line ends).
pub fn write_raw_data(out: &mut BytesMut, data: &[u8]) {
    for line in data.split(|&b| b == b'\n') {
        out.put_slice(b"data: ");
        out.put_slice(line.strip_suffix(b"\r").unwrap_or(line));
        out.put_slice(b"\n");
    }
    out.put_slice(b"\n");
}

/// Appends an event named `name` whose payload is `data` (split on line
/// ends, so a payload with a line break stays one event).
pub fn write_named_event(out: &mut BytesMut, name: &str, data: &[u8]) {
    out.put_slice(b"event: ");
    out.put_slice(name.as_bytes());
    out.put_slice(b"\n");
    write_raw_data(out, data);
}

/// Removes `list` when it is an empty array, and with it the settings that
/// only mean something beside it (`dependents`); for hidden tools.
pub fn drop_if_empty(obj: &mut Map<String, Value>, list: &str, dependents: &[&str]) {
    if obj
        .get(list)
        .and_then(Value::as_array)
        .is_some_and(|t| t.is_empty())
    {
        obj.remove(list);
        for d in dependents {
            obj.remove(*d);
        }
    }
}

/// A comment line sent while a slow gate decides.
pub const KEEPALIVE: Bytes = Bytes::from_static(b": keepalive\n\n");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_is_listed_once_at_its_own_index_and_read_back_from_its_label() {
        for (i, p) in Protocol::ALL.into_iter().enumerate() {
            assert_eq!(p as usize, i, "{p:?}");
            assert_eq!(Protocol::from_label(p.label()), Some(p));
        }
        assert_eq!(
            Protocol::from_label("chat-completions"),
            Some(Protocol::Chat)
        );
        assert_eq!(Protocol::from_label("chat"), None);
    }

    #[test]
    fn raw_data_is_split_into_data_lines() {
        let mut out = BytesMut::new();
        write_raw_data(&mut out, b"a\nb");
        assert_eq!(&out[..], b"data: a\ndata: b\n\n");
        let mut out = BytesMut::new();
        write_named_event(&mut out, "ping", b"{\n}");
        assert_eq!(&out[..], b"event: ping\ndata: {\ndata: }\n\n");
    }
}
