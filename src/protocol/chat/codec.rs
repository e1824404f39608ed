//! Chat Completions as a [`Codec`]: its routes (and the OpenAI endpoints
//! that pass), and where each part of the format is read and written.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::Value;

use crate::context::Texts;
use crate::error::Error;
use crate::fence::ToolResult;
use crate::protocol::{
    request, Codec, Complete, Declarations, Options, Parsed, ProviderError, Reading, Resumption,
    Rewriter, Row, Serve,
};

/// The Chat Completions codec.
pub struct Chat;

const ROWS: &[Row] = &[
    ("POST", "chat/completions", Serve::Gated),
    ("GET", "models", Serve::Family),
    ("GET", "models/*", Serve::Family),
    ("HEAD", "models", Serve::Family),
    ("POST", "embeddings", Serve::Pass),
    ("POST", "moderations", Serve::Pass),
    ("POST", "completions", Serve::Pass),
    ("POST", "audio/speech", Serve::Pass),
    ("POST", "audio/transcriptions", Serve::Pass),
    ("POST", "audio/translations", Serve::Pass),
    ("POST", "images/generations", Serve::Pass),
    ("POST", "images/edits", Serve::Pass),
    ("POST", "images/variations", Serve::Pass),
    ("GET", "files", Serve::Pass),
];

impl Codec for Chat {
    fn label(&self) -> &'static str {
        "chat_completions"
    }
    fn provider_family(&self) -> &'static str {
        "openai"
    }
    fn routes(&self) -> &'static [Row] {
        ROWS
    }
    fn claims(&self, _: &HeaderMap, _: &[&str]) -> bool {
        false
    }
    fn parse(&self, bytes: &[u8]) -> Result<Parsed, Error> {
        super::request::parse(request::request_tree(bytes)?)
    }
    fn declarations<'a>(&self, body: &'a Value) -> Result<Declarations<'a>, Error> {
        super::request::declarations(body)
    }
    fn unseen_history(&self, body: &Value) -> bool {
        super::request::searches_web(body)
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
        let mut b = super::complete::Body::parse(text, r.max_call_bytes)?;
        b.refuse(r.refusal);
        if r.text_calls {
            b.read_text_calls();
        }
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
        e.openai_body(StatusCode::INTERNAL_SERVER_ERROR)
    }
}
