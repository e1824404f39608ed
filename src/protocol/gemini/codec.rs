//! Google's Gemini API as a [`Codec`]: its routes (the version kept in the
//! path), its clients' headers, and where each part of the format is read
//! and written. Stateless: nothing is stored between requests, and a
//! withheld call is answered by a text turn, not continued by a follow-up.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::Value;

use crate::context::Texts;
use crate::error::Error;
use crate::fence::ToolResult;
use crate::protocol::{
    request, Codec, Complete, Declarations, Options, Parsed, ProviderError, Reading, Refusal,
    Resumption, Rewriter, Row, Serve,
};

/// The Gemini codec.
pub struct Gemini;

const BATCH: Refusal = Refusal {
    class: "batches",
    message: "Batch generation is not served here: its results hold tool calls that were not \
        checked. Use models/{model}:generateContent.",
};
const OTHER: Refusal = Refusal {
    class: "not_served",
    message: "This Gemini endpoint is not served here: its answers could hold tool calls that \
        were not checked.",
};

const ROWS: &[Row] = &[
    ("POST", "models/+:generateContent", Serve::Gated),
    ("POST", "models/+:streamGenerateContent", Serve::Gated),
    ("POST", "tunedModels/+:generateContent", Serve::Gated),
    ("POST", "tunedModels/+:streamGenerateContent", Serve::Gated),
    ("POST", "models/+:countTokens", Serve::Pass),
    ("POST", "models/+:embedContent", Serve::Pass),
    ("POST", "models/+:batchEmbedContents", Serve::Pass),
    ("GET", "models", Serve::Pass),
    ("GET", "models/{name}", Serve::Pass),
    ("*", "models/+:batchGenerateContent", Serve::Refuse(BATCH)),
    ("*", "batches", Serve::Refuse(BATCH)),
    ("*", "batches/*", Serve::Refuse(BATCH)),
    ("*", "models/*", Serve::Refuse(OTHER)),
    ("*", "tunedModels/*", Serve::Refuse(OTHER)),
];

impl Codec for Gemini {
    fn label(&self) -> &'static str {
        "gemini"
    }
    fn provider_family(&self) -> &'static str {
        "gcp.gemini"
    }
    fn upstream_section(&self) -> Option<&'static str> {
        Some("gemini")
    }
    fn routes(&self) -> &'static [Row] {
        ROWS
    }
    fn versions(&self) -> Option<&'static [&'static str]> {
        Some(&["v1beta", "v1", "v1alpha"])
    }
    /// Google's SDKs send their key in `x-goog-api-key`; of the APIs
    /// served here only Google's has `v1beta` paths. (A `:` in a model name
    /// says nothing: OpenRouter's `…:free` models have one.)
    fn claims(&self, headers: &HeaderMap, segs: &[&str]) -> bool {
        headers.contains_key("x-goog-api-key")
            || segs.first().is_some_and(|s| {
                s.eq_ignore_ascii_case("v1beta") || s.eq_ignore_ascii_case("v1alpha")
            })
    }
    fn read_path(&self, parsed: &mut Parsed, rest: &str, query: Option<&str>) -> Result<(), Error> {
        super::request::read_path(parsed, rest, query)
    }
    fn parse(&self, bytes: &[u8]) -> Result<Parsed, Error> {
        super::request::parse(request::request_tree(bytes)?)
    }
    fn declarations<'a>(&self, body: &'a Value) -> Result<Declarations<'a>, Error> {
        super::request::declarations(body)
    }
    fn definitions<'a>(&self, body: &'a Value) -> Vec<(String, &'a Value)> {
        super::request::definitions(body)
    }
    fn tool_lists(&self) -> &'static [&'static str] {
        &["tools", "functionDeclarations", "function_declarations"]
    }
    fn texts(&self, body: &Value, all: bool, calls: bool) -> Texts {
        super::texts::texts(body, all, calls)
    }
    fn unread_results(&self, body: &Value) -> bool {
        super::texts::media_results(body)
    }
    fn unseen_history(&self, body: &Value) -> bool {
        super::request::unseen(body)
    }
    fn tool_results<'a>(&self, body: &'a mut Value) -> Vec<ToolResult<'a>> {
        super::texts::tool_results(body)
    }
    fn add_notice(&self, body: &mut Value, notice: &str) {
        super::request::add_notice(body, notice)
    }
    fn hide(&self, body: &mut Value, names: &[String]) -> bool {
        super::hide::hide(body, names)
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
    fn resumes(&self) -> bool {
        false
    }
    fn follow_up(&self, _: &mut Value, _: &Resumption) -> Result<(), Error> {
        Err(Error::UpstreamUnreadable(
            "a Gemini answer is not continued",
        ))
    }
    fn join(&self, _: &Value, _: &[Resumption], _: &mut Value) {}
    fn error_body(&self, err: &Error) -> Bytes {
        super::error_body(err)
    }
    fn provider_error_body(&self, e: &ProviderError, status: StatusCode) -> Bytes {
        e.google_body(status)
    }
    fn provider_error_event(&self, e: &ProviderError) -> Bytes {
        e.google_body(StatusCode::INTERNAL_SERVER_ERROR)
    }
}
