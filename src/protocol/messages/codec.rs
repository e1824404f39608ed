//! The Anthropic Messages API as a [`Codec`]: its routes, its threads, and
//! where each part of the format is read and written.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::Value;

use super::request::Thread;
use crate::context::Texts;
use crate::error::Error;
use crate::fence::ToolResult;
use crate::protocol::{
    request, Codec, Complete, Declarations, Held, Options, Parsed, ProviderError, Reading, Refusal,
    Resumption, Rewriter, Row, Serve, Stored,
};

/// The Messages codec.
pub struct Messages;

const BATCHES: Refusal = Refusal {
    class: "batches",
    message: "Message batches are not served here: their results hold tool calls that were not \
        checked. Use POST /v1/messages.",
};

const ROWS: &[Row] = &[
    ("POST", "messages", Serve::Gated),
    ("POST", "messages/count_tokens", Serve::Pass),
    ("*", "messages/batches", Serve::Refuse(BATCHES)),
    ("*", "messages/batches/*", Serve::Refuse(BATCHES)),
];

impl Codec for Messages {
    fn label(&self) -> &'static str {
        "messages"
    }
    fn provider_family(&self) -> &'static str {
        "anthropic"
    }
    fn upstream_section(&self) -> Option<&'static str> {
        Some("messages")
    }
    fn routes(&self) -> &'static [Row] {
        ROWS
    }
    /// Every anthropic SDK request carries `anthropic-version`.
    fn claims(&self, headers: &HeaderMap, segs: &[&str]) -> bool {
        headers.contains_key("anthropic-version")
            || segs.iter().any(|s| s.eq_ignore_ascii_case("messages"))
    }
    fn parse(&self, bytes: &[u8]) -> Result<Parsed, Error> {
        super::request::parse(request::request_tree(bytes)?)
    }
    fn declarations<'a>(&self, body: &'a Value) -> Result<Declarations<'a>, Error> {
        super::request::tools(body).map(|t| t.0)
    }
    fn unread_results(&self, body: &Value) -> bool {
        super::request::media_results(body)
    }
    fn texts(&self, body: &Value, all: bool, calls: bool) -> Texts {
        super::request::texts(body, all, calls)
    }
    fn tool_results<'a>(&self, body: &'a mut Value) -> Vec<ToolResult<'a>> {
        super::request::tool_results(body)
    }
    fn add_notice(&self, body: &mut Value, notice: &str) {
        super::request::add_notice(body, notice)
    }
    fn hide(&self, body: &mut Value, names: &[String]) -> bool {
        super::hide::remove_tools(body, names)
    }
    fn rewriter(&self, o: &Options) -> Box<dyn Rewriter> {
        Box::new(super::stream::StreamRewriter::new(o))
    }
    fn complete<'a>(&self, text: &'a str, r: Reading) -> Result<Box<dyn Complete + 'a>, Error> {
        Ok(Box::new(super::complete::Body::parse(
            text,
            r.max_call_bytes,
        )?))
    }
    fn follow_up(&self, body: &mut Value, r: &Resumption) -> Result<(), Error> {
        super::follow::follow_up(body, r)
    }
    fn join(&self, first: &Value, before: &[Resumption], v: &mut Value) {
        super::follow::join(first, before, v)
    }
    fn error_body(&self, err: &Error) -> Bytes {
        super::error_body(err)
    }
    fn provider_error_body(&self, e: &ProviderError, status: StatusCode) -> Bytes {
        e.messages_body(Some(status))
    }
    fn provider_error_event(&self, e: &ProviderError) -> Bytes {
        e.messages_body(None)
    }
    fn held(&self, body: &Value) -> Held {
        match super::request::thread(body) {
            Ok(Thread::Create) => Held::New,
            Ok(Thread::Continue(id)) => Held::From(id),
            _ => Held::Not,
        }
    }
    fn stored_from(&self, body: &Value) -> Option<String> {
        match self.held(body) {
            Held::From(prev) => Some(prev),
            Held::Not | Held::New => None,
        }
    }
    fn continue_stored(&self, body: &mut Value, stored: &dyn Stored, text: &str) {
        if let Held::From(prev) = self.held(body) {
            if let Some(calls) = stored.withheld(&prev) {
                super::request::answer_withheld(body, &calls, text);
            }
        }
    }
    fn continued_by_reference(&self, body: &Value) -> bool {
        !matches!(self.held(body), Held::Not)
    }
    fn answer_withheld(&self, body: &mut Value, calls: &[(String, String)], text: &str) {
        super::request::answer_withheld(body, calls, text)
    }
}
