//! The Responses API as a [`Codec`]: its routes, the stored responses a
//! request continues, and where each part of the format is read and written.

use bytes::Bytes;
use http::StatusCode;
use serde_json::Value;

use crate::context::Texts;
use crate::error::Error;
use crate::fence::ToolResult;
use crate::protocol::{
    request, Codec, Complete, Declarations, Options, Parsed, ProviderError, Reading, Refusal,
    Resumption, Rewriter, Row, Serve, Stored,
};

/// The Responses API codec.
pub struct Responses;

const STORED: Refusal = Refusal {
    class: "stored_response",
    message: "Stored responses are not served here: they hold tool calls that were not checked. \
        Use the response returned by POST /v1/responses.",
};
const CANCEL: Refusal = Refusal {
    class: "response_cancel",
    message: "Background responses are not served here, so there is none to cancel: its answer \
        would be a whole response whose tool calls were not checked.",
};

const ROWS: &[Row] = &[
    ("POST", "responses", Serve::Gated),
    ("POST", "responses/input_tokens", Serve::Pass),
    ("*", "responses/+/cancel", Serve::Refuse(CANCEL)),
    ("DELETE", "responses/+", Serve::Pass),
    ("GET", "responses/+", Serve::Refuse(STORED)),
    ("GET", "responses/+/input_items", Serve::Refuse(STORED)),
];

impl Codec for Responses {
    fn label(&self) -> &'static str {
        "responses"
    }
    fn provider_family(&self) -> &'static str {
        "openai"
    }
    fn routes(&self) -> &'static [Row] {
        ROWS
    }
    fn parse(&self, bytes: &[u8]) -> Result<Parsed, Error> {
        super::request::parse(request::request_tree(bytes)?)
    }
    fn declarations<'a>(&self, body: &'a Value) -> Result<Declarations<'a>, Error> {
        super::request::tools(body).map(|t| t.0)
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
        let mut b = super::complete::Body::parse(text, r.max_call_bytes)?;
        b.refuse(r.refusal);
        Ok(Box::new(b))
    }
    fn follow_up(&self, body: &mut Value, r: &Resumption) -> Result<(), Error> {
        super::follow::follow_up(body, r)
    }
    fn join(&self, first: &Value, before: &[Resumption], v: &mut Value) {
        super::follow::join(first, before, v)
    }
    fn error_body(&self, err: &Error) -> Bytes {
        err.json_body()
    }
    fn provider_error_body(&self, e: &ProviderError, status: StatusCode) -> Bytes {
        e.openai_body(status)
    }
    fn provider_error_event(&self, e: &ProviderError) -> Bytes {
        e.responses_event()
    }
    fn unseen_history(&self, body: &Value) -> bool {
        super::request::references_items(body)
    }
    fn unread_results(&self, body: &Value) -> bool {
        super::request::media_results(body)
    }
    fn stored_from(&self, body: &Value) -> Option<String> {
        body.get("previous_response_id")
            .and_then(Value::as_str)
            .map(str::to_string)
    }
    fn continue_stored(&self, body: &mut Value, stored: &dyn Stored, text: &str) {
        let Some(mut prev) = body.get("previous_response_id").and_then(Value::as_str) else {
            return;
        };
        let renamed = stored.renamed(prev);
        if let Some(then) = &renamed {
            body["previous_response_id"] = Value::from(then.as_ref());
            prev = then;
        }
        if let Some(calls) = stored.withheld(prev) {
            super::request::answer_withheld(body, &calls, text);
        }
    }
    fn continued_by_reference(&self, _: &Value) -> bool {
        true
    }
    fn answer_withheld(&self, body: &mut Value, calls: &[(String, String)], text: &str) {
        super::request::answer_withheld(body, calls, text)
    }
}
