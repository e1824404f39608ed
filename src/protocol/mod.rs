//! The protocol layer: one codec per wire format around the canonical [`Call`].
//!
//! A codec knows everything about its wire format and nothing about the
//! gates: it reads the request's declared tools, texts and tool results
//! ([`Parsed`]), rewrites the request (fence, hidden tools), and turns the
//! upstream response into held [`Call`]s, releasing each one byte-identical or
//! replacing it by a neutral failure as the [`Release`] verdicts say. The
//! gates see only [`Call`] and [`crate::context::Context`].
//!
//! - [`chat`]: Chat Completions (`/v1/chat/completions`).
//! - [`responses`]: the Responses API (`/v1/responses`).
//! - [`messages`]: the Anthropic Messages API (`/v1/messages`).
//! - [`sse`], [`json`]: the event-stream decoder and borrowed JSON, shared.
//!
//! Adding a wire format: a folder with its request reader, stream rewriter
//! and whole-body rewriter; a variant of [`Protocol`] and an arm in each of
//! its matches; a row in the route table (`proxy::route`).

pub mod chat;
pub mod messages;
pub mod request;
pub mod responses;
pub use request::{array, stream_flag, tree_cost};
pub mod complete;
pub(crate) mod events;
pub mod sse;

pub use complete::{Complete, Reading};
pub mod sync_driver;
pub mod text_calls;
pub mod usage;

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value};

use crate::call::{Call, Release};
use crate::context::{Declared, Texts};
use crate::error::Error;
use crate::fence::{self, ToolResult};

/// The wire formats toolgate gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// OpenAI Chat Completions, which most clients speak (the default of
    /// `toolgate explain`).
    #[default]
    Chat,
    Responses,
    Messages,
}

impl Protocol {
    /// Every wire format toolgate gates.
    pub const ALL: [Protocol; 3] = [Protocol::Chat, Protocol::Responses, Protocol::Messages];

    /// The protocol a [`Protocol::label`] names (`-` read as `_`).
    pub fn from_label(s: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| {
            p.label()
                .bytes()
                .eq(s.bytes().map(|b| if b == b'-' { b'_' } else { b }))
        })
    }

    /// The provider family a wire format names, for traces (`gen_ai.system`).
    pub fn provider_family(self) -> &'static str {
        match self {
            Protocol::Messages => "anthropic",
            Protocol::Chat | Protocol::Responses => "openai",
        }
    }

    /// The `[upstream.NAME]` section this protocol's requests go to, when it
    /// has its own; `None` for `[upstream]`.
    pub fn upstream_section(self) -> Option<&'static str> {
        match self {
            Protocol::Messages => Some("messages"),
            Protocol::Chat | Protocol::Responses => None,
        }
    }

    /// A whole follow-up body `v` made the continuation of `first` after
    /// the responses in `before` (one id, the text or blocks before it,
    /// usage summed).
    pub fn join(self, first: &Value, before: &[Resumption], v: &mut Value) {
        match self {
            Protocol::Chat => chat::follow::join(first, before, v),
            Protocol::Messages => messages::follow::join(first, before, v),
            Protocol::Responses => responses::follow::join(first, before, v),
        }
    }

    /// A request continuing a stored response (Responses'
    /// `previous_response_id`) goes on from the response a follow-up
    /// continued it as, and answers the calls withheld from it with `text`.
    /// Other formats store nothing: the body is left as it is.
    pub fn continue_stored(self, body: &mut Value, stored: &dyn Stored, text: &str) {
        if self != Protocol::Responses {
            return;
        }
        let Some(mut prev) = body.get("previous_response_id").and_then(Value::as_str) else {
            return;
        };
        let renamed = stored.renamed(prev);
        if let Some(then) = &renamed {
            body["previous_response_id"] = Value::from(then.as_ref());
            prev = then;
        }
        if let Some(calls) = stored.withheld(prev) {
            responses::request::answer_withheld(body, &calls, text);
        }
    }

    /// The route label in metrics and the protocol named in audit records.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Chat => "chat_completions",
            Protocol::Responses => "responses",
            Protocol::Messages => "messages",
        }
    }

    /// Reads a complete (non-streamed) response body.
    pub fn complete<'a>(self, text: &'a str, r: Reading) -> Result<Box<dyn Complete + 'a>, Error> {
        Ok(match self {
            Protocol::Chat => {
                let mut b = chat::complete::Body::parse(text, r.max_call_bytes)?;
                b.refuse(r.refusal);
                if r.text_calls {
                    b.read_text_calls();
                }
                Box::new(b)
            }
            Protocol::Responses => {
                let mut b = responses::complete::Body::parse(text, r.max_call_bytes)?;
                b.refuse(r.refusal);
                Box::new(b)
            }
            Protocol::Messages => {
                Box::new(messages::complete::Body::parse(text, r.max_call_bytes)?)
            }
        })
    }

    /// The body of an error answered on this protocol's routes.
    pub fn error_body(self, err: &Error) -> Bytes {
        match self {
            Protocol::Chat | Protocol::Responses => err.json_body(),
            Protocol::Messages => messages::error_body(err),
        }
    }

    /// Reads the request body: its declared tools and whether it streams.
    pub fn parse(self, bytes: &[u8]) -> Result<Parsed, Error> {
        let body = request::request_tree(bytes)?;
        match self {
            Protocol::Chat => chat::request::parse(body),
            Protocol::Responses => responses::request::parse(body),
            Protocol::Messages => messages::request::parse(body),
        }
    }

    /// The request's texts by role; all user and tool text only when `all`.
    pub fn texts(self, body: &Value, all: bool) -> Texts {
        match self {
            Protocol::Chat => chat::request::texts(body, all),
            Protocol::Responses => responses::request::texts(body, all),
            Protocol::Messages => messages::request::texts(body, all),
        }
    }

    /// The request's tool results, to be fenced in place.
    pub fn tool_results(self, body: &mut Value) -> Vec<ToolResult<'_>> {
        match self {
            Protocol::Chat => chat::request::tool_results(body),
            Protocol::Responses => responses::request::tool_results(body),
            Protocol::Messages => messages::request::tool_results(body),
        }
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
        match self {
            Protocol::Chat => chat::request::add_notice(body, notice),
            Protocol::Responses => responses::request::add_notice(body, notice),
            Protocol::Messages => messages::request::add_notice(body, notice),
        }
    }

    /// Removes the named tools from the request; whether the body changed.
    pub fn hide(self, body: &mut Value, names: &[String]) -> bool {
        match self {
            Protocol::Chat => chat::hide::remove_tools(body, names),
            Protocol::Responses => responses::hide::remove_tools(body, names),
            Protocol::Messages => messages::hide::remove_tools(body, names),
        }
    }

    /// Turns what went upstream last into the follow-up request that
    /// answers a [`Resumption`].
    pub fn follow_up(self, body: &mut Value, r: &Resumption) -> Result<(), Error> {
        match self {
            Protocol::Chat => chat::follow::follow_up(body, r),
            Protocol::Messages => messages::follow::follow_up(body, r),
            Protocol::Responses => responses::follow::follow_up(body, r),
        }
    }

    /// A streaming rewriter for one response.
    pub fn rewriter(self, o: &Options) -> Box<dyn Rewriter> {
        match self {
            Protocol::Chat => Box::new(chat::stream::StreamRewriter::new(o)),
            Protocol::Responses => Box::new(responses::stream::StreamRewriter::new(o)),
            Protocol::Messages => Box::new(messages::stream::StreamRewriter::new(o)),
        }
    }
}

/// A parsed request.
#[derive(Debug)]
pub struct Parsed {
    pub body: Value,
    pub declared: HashMap<String, Declared>,
    /// `stream: true`: the answer must be an event stream (else JSON).
    pub stream: bool,
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

/// What a streaming rewriter's driver must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Everything available was processed; push more bytes (or call `end`).
    NeedMore,
    /// Gate [`Rewriter::pending`] and call [`Rewriter::resolve`].
    Gate,
}

/// Limits and texts for one response.
#[derive(Debug, Clone)]
pub struct Options {
    pub neutral_message: std::sync::Arc<str>,
    pub max_event_bytes: usize,
    pub max_call_bytes: usize,
    pub max_held_bytes: usize,
    /// Keys the ids of messages that replace withheld calls.
    pub id_key: [u8; 32],
    /// A choice whose every call is withheld for `resume` may be continued
    /// by a follow-up request (the request has one choice, and follow-ups
    /// are left); else such a choice gets the neutral text.
    pub resume: bool,
    /// The tool result a follow-up answers each withheld call with.
    pub neutral_result: std::sync::Arc<str>,
    /// The neutral text is a refusal (the request asked for structured
    /// output); Chat Completions writes it as `refusal`, not `content`.
    pub refusal: bool,
    /// Tool calls written as text are held and gated (`[gate] text_tool_calls`).
    pub text_calls: bool,
}

/// A response whose calls were all withheld for `resume`: what the
/// follow-up request adds to the conversation, and what the agent was not
/// sent of the response so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resumption {
    /// Appended to the conversation (`messages`, or `input`): the assistant
    /// turn with the withheld calls, then a neutral result for each.
    pub turn: Vec<Value>,
    /// Tools of `deny`ed calls: removed from the follow-up's `tools`.
    pub denied: Vec<String>,
    /// The response's text before its calls (whole chat bodies), joined to
    /// the continuation's.
    pub text: Option<String>,
    /// The response's other blocks (whole Messages bodies), put before the
    /// continuation's.
    pub blocks: Vec<Value>,
    /// The response's token usage, added to the continuation's.
    pub usage: Option<Value>,
    /// The response's id, when the provider stores it (Responses): the
    /// follow-up continues from it.
    pub previous: Option<String>,
}

impl Resumption {
    /// The calls of a stored response whose follow-up failed: they are
    /// answered when the agent continues from it, as withheld calls are.
    pub fn unanswered(&self) -> Option<Withheld> {
        let id = self.previous.as_ref()?;
        let calls = self
            .turn
            .iter()
            .filter(|i| i["type"] == "function_call")
            .filter_map(|i| {
                Some((
                    i["call_id"].as_str()?.to_string(),
                    "function_call".to_string(),
                ))
            })
            .collect();
        Some(Withheld {
            response_id: id.clone(),
            calls,
        })
    }
}

/// What toolgate remembers of stored responses (kept by the proxy's state).
pub trait Stored {
    /// The response that continued stored response `id`, if any.
    fn renamed(&self, id: &str) -> Option<std::sync::Arc<str>>;
    /// The `(call id, item type)` of calls withheld from stored response `id`.
    fn withheld(&self, id: &str) -> Option<std::sync::Arc<Vec<(String, String)>>>;
}

/// Appends a resumption's turn to the request's `list` (`messages`).
pub fn append_turn(body: &mut Value, list: &str, r: &Resumption) -> Result<(), Error> {
    body.get_mut(list)
        .and_then(Value::as_array_mut)
        .ok_or(Error::UpstreamUnreadable(
            "the request has no messages to continue",
        ))?
        .extend(r.turn.iter().cloned());
    Ok(())
}

/// A whole continuation `last` as the agent receives it: under the first
/// response's `keys` (its id, …), the `blocks` of the responses continued
/// (`before`) put before its own in `list` when given, usage summed.
pub fn join_whole(
    first: &Value,
    before: &[Resumption],
    last: &mut Value,
    keys: &[&str],
    list: Option<&str>,
) {
    let Value::Object(obj) = last else {
        return;
    };
    for key in keys {
        if let Some(v) = first.get(*key) {
            obj.insert(key.to_string(), v.clone());
        }
    }
    if let Some(list) = list {
        let mut items: Vec<Value> = before.iter().flat_map(|r| r.blocks.clone()).collect();
        if let Some(Value::Array(own)) = obj.get(list) {
            items.extend(own.iter().cloned());
        }
        obj.insert(list.to_string(), Value::Array(items));
    }
    for u in before.iter().filter_map(|r| r.usage.as_ref()) {
        add_usage(obj.entry("usage").or_insert(Value::Null), u);
    }
}

/// Adds the numbers of `extra` into `into`, key by key (token usage).
pub fn add_usage(into: &mut Value, extra: &Value) {
    match (into, extra) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(slot) => add_usage(slot, v),
                    None => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot @ Value::Number(_), Value::Number(n)) => {
            let sum = match (slot.as_u64(), n.as_u64()) {
                (Some(x), Some(y)) => Value::from(x.saturating_add(y)),
                _ => Value::from(slot.as_f64().unwrap_or(0.0) + n.as_f64().unwrap_or(0.0)),
            };
            *slot = sum;
        }
        (slot @ Value::Null, v) => *slot = v.clone(),
        _ => {}
    }
}

/// The calls of a stored response that were withheld, so that a request
/// continuing from it can answer them (the provider still holds them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Withheld {
    pub response_id: String,
    /// `(call id, item type)` of each withheld call.
    pub calls: Vec<(String, String)>,
}

/// An upstream body toolgate cannot read in exactly one way: the response
/// fails closed with `why` (for the log; the agent sees a generic error).
pub(crate) fn malformed(why: &'static str) -> Error {
    Error::UpstreamUnreadable(why)
}

/// What a [`Rewriter`] reports to its driver besides the bytes it writes
/// ([`Rewriter::poll`]; an SSE event is [`sse::Event`], a different thing).
#[derive(Debug)]
pub enum Update {
    /// Call events were read since the last poll. The driver notes the
    /// time once per upstream frame, not once per event.
    CallRead,
    /// Calls just withheld from a stored response: remembered before
    /// anything of this answer goes out, so a request continuing from it
    /// finds the record.
    Withheld(Withheld),
    /// Calls the provider ran itself (for the audit trail; they were gated
    /// on the request).
    Hosted(Vec<Call>),
    /// Every call of the response was withheld for `resume`: the rest of
    /// this upstream stream is read but not sent, and the driver makes the
    /// follow-up request (or calls [`Rewriter::give_up`]).
    Resumption(Resumption),
    /// A response the agent knows by `first` that the provider continued
    /// as `then` (`resume` on a stored response): a later request
    /// continuing from `first` is sent on from `then`.
    Renamed { first: String, then: String },
}

/// What a stream came to: the tokens the upstream reported, and the call
/// events that arrived after their call was decided (stripped).
#[derive(Debug, Default)]
pub struct Totals {
    pub usage: usage::Usage,
    pub late_deltas: u64,
}

/// A sans-IO streaming rewriter: one per response, one implementation per
/// wire format. Text passes at once; a call is held from its first event to
/// its last, then gated.
///
/// Feed upstream bytes with [`Rewriter::push`], then call
/// [`Rewriter::process`]: it appends what the agent may see now to `out` and
/// stops with [`Step::Gate`] when calls are held and complete. The driver
/// gates [`Rewriter::pending`] and hands one verdict per call to
/// [`Rewriter::resolve`]. At end of input call [`Rewriter::end`]; on any
/// error call [`Rewriter::fail`], which never releases held calls. After
/// each of these, [`Rewriter::poll`] until it answers `None`.
pub trait Rewriter: Send {
    fn push(&mut self, bytes: &[u8]);
    fn process(&mut self, out: &mut BytesMut) -> Result<Step, Error>;
    /// At end of input: `Gate` when the last events completed held calls;
    /// an error when calls are held that never completed.
    fn end(&mut self, out: &mut BytesMut) -> Result<Step, Error>;
    /// The calls held behind the current gate.
    fn pending(&self) -> &[Call];
    /// Releases or replaces the pending calls; a missing verdict withholds.
    fn resolve(&mut self, verdicts: &[Release], out: &mut BytesMut);
    /// Ends the stream after `err` with the format's error ending. Returns
    /// the calls that were held and are now dropped without release.
    fn fail(&mut self, err: &Error, passthrough: bool, out: &mut BytesMut) -> Vec<Call>;
    /// What the rewriter has to report besides the bytes it wrote, one at a
    /// time; the driver asks after every `process`, `end`, `resolve`,
    /// `fail` and `give_up` until it answers `None`.
    fn poll(&mut self) -> Option<Update>;
    /// The gate is slow (a call waits for a person, maybe for minutes):
    /// what is held meanwhile is kept in its smallest form.
    fn compact(&mut self) {}
    /// The follow-up's stream comes next: it is read as the continuation of
    /// the response the agent is receiving (one id, one ending, usage
    /// summed). `resume` says whether it may be continued again.
    fn continue_with(&mut self, _resume: bool) {}
    /// The follow-up could not be made: the response ends as `drop` would
    /// have ended it.
    fn give_up(&mut self, _out: &mut BytesMut) {}
    /// What the stream(s) came to, asked once when the body is dropped.
    fn totals(&mut self) -> Totals;
    /// Bytes held back from the agent now (held calls and what is kept
    /// behind them), charged to the shared budget while held.
    fn held_bytes(&self) -> usize;
}

/// An error when `ambiguous` (see [`json::Obj::ambiguous`]).
pub fn fold_guard(ambiguous: bool) -> Result<(), Error> {
    if ambiguous {
        return Err(Error::UpstreamUnreadable(
            "a key differs from a known key only by case or spelling",
        ));
    }
    Ok(())
}

/// The same check over a parsed map (repeated keys are refused by the parse,
/// [`json::strict_value`]).
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
