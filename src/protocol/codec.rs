//! The one trait a wire format implements: everything about its format
//! that the proxy needs, behind [`Codec`]; the proxy reaches a codec only
//! through [`super::Protocol`], the key of the registry in `mod.rs`.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::Value;

use super::{
    Complete, Declarations, Held, Options, Parsed, ProviderError, Reading, Resumption, Rewriter,
    Stored,
};
use crate::context::Texts;
use crate::error::Error;
use crate::fence::ToolResult;

/// What a route row does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serve {
    /// Gated through the codec.
    Gated,
    /// Passed through as it is: the endpoint cannot return a tool call.
    Pass,
    /// Passed to the upstream of the client's family (see [`Codec::claims`]).
    Family,
    /// Refused with this message: the endpoint would hand out ungated calls.
    Refuse(Refusal),
}

/// Why a refused row is refused: its class (for the access line) and
/// what the agent is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub class: &'static str,
    pub message: &'static str,
}

/// One row of a codec's route table: `(method, path pattern, what to do)`.
/// The pattern is matched after the version segment, segment by segment
/// (ASCII case aside): `+` is any one segment, `{name}` one without a
/// colon, `+:verb` one ending in `:verb` after a name, a final `*` one or
/// more segments; method `*` is any method.
pub type Row = (&'static str, &'static str, Serve);

/// A wire format. Required: what every format must say; provided: what
/// only formats that store conversations or continue them say.
pub trait Codec: Sync {
    /// The route label in metrics and the protocol named in audit records.
    fn label(&self) -> &'static str;
    /// The provider family, for traces (`gen_ai.system`).
    fn provider_family(&self) -> &'static str;
    /// The `[upstream.NAME]` section its requests go to; `None`: `[upstream]`.
    fn upstream_section(&self) -> Option<&'static str> {
        None
    }
    /// Its route rows.
    fn routes(&self) -> &'static [Row];
    /// The version segments its paths start with, kept in the forwarded
    /// path; `None`: none or `v1`, dropped (the base URL holds it).
    fn versions(&self) -> Option<&'static [&'static str]> {
        None
    }
    /// The request's headers or path say its client speaks this family
    /// (for [`Serve::Family`] rows and the shape of a refused path's error).
    fn claims(&self, _headers: &HeaderMap, _segs: &[&str]) -> bool {
        false
    }
    /// Settings a path's verb carries instead of the body (Gemini's
    /// `:streamGenerateContent`), applied to the parsed request.
    fn read_path(
        &self,
        _parsed: &mut Parsed,
        _rest: &str,
        _query: Option<&str>,
    ) -> Result<(), Error> {
        Ok(())
    }
    /// Reads the request body.
    fn parse(&self, bytes: &[u8]) -> Result<Parsed, Error>;
    /// The tools `body` declares, each with its schema, in body order.
    fn declarations<'a>(&self, body: &'a Value) -> Result<Declarations<'a>, Error>;
    /// Each declared tool's whole definition (name, description, schema),
    /// in body order, for the digests a session's definitions are kept by.
    fn definitions<'a>(&self, body: &'a Value) -> Vec<(String, &'a Value)> {
        let tools = body.get("tools").and_then(Value::as_array);
        (tools.into_iter().flatten())
            .filter_map(|t| {
                let name = (t.get("name"))
                    .or_else(|| t.get("function").and_then(|f| f.get("name")))?
                    .as_str()?;
                Some((name.to_string(), t))
            })
            .collect()
    }
    /// Where in the body tools are declared (for the schema slices).
    fn tool_lists(&self) -> &'static [&'static str] {
        &["tools", "functions"]
    }
    /// The request's texts by role (see [`super::Protocol::texts_and_calls`]).
    fn texts(&self, body: &Value, all: bool, calls: bool) -> Texts;
    /// The request's tool results, to be fenced in place.
    fn tool_results<'a>(&self, body: &'a mut Value) -> Vec<ToolResult<'a>>;
    /// Adds the fence notice to the request's system text (once).
    fn add_notice(&self, body: &mut Value, notice: &str);
    /// Removes the named tools from the request; whether the body changed.
    fn hide(&self, body: &mut Value, names: &[String]) -> bool;

    /// A streaming rewriter for one response.
    fn rewriter(&self, o: &Options) -> Box<dyn Rewriter>;
    /// Reads a complete (non-streamed) response body.
    fn complete<'a>(&self, text: &'a str, r: Reading) -> Result<Box<dyn Complete + 'a>, Error>;
    /// Whether a response may be continued by a `resume` follow-up.
    fn resumes(&self) -> bool {
        true
    }
    /// Turns what went upstream last into the follow-up that answers `r`.
    fn follow_up(&self, body: &mut Value, r: &Resumption) -> Result<(), Error>;
    /// A whole follow-up body made the continuation of `first`.
    fn join(&self, first: &Value, before: &[Resumption], v: &mut Value);

    /// The body of toolgate's own error on its routes.
    fn error_body(&self, err: &Error) -> Bytes;
    /// The provider's error as a body on its routes.
    fn provider_error_body(&self, e: &ProviderError, status: StatusCode) -> Bytes;
    /// The provider's error as a mid-stream event's data.
    fn provider_error_event(&self, e: &ProviderError) -> Bytes;

    /// Whether the provider holds the request's conversation.
    fn held(&self, _body: &Value) -> Held {
        Held::Not
    }
    /// Whether the request has the model read what toolgate never sees:
    /// what the provider stored and the request names (a Responses
    /// `item_reference`, Gemini's `cachedContent`), or what the provider
    /// fetches for the answer because the request turns it on (a chat web
    /// search, Gemini's grounding): [`Texts::unseen`].
    fn unseen_history(&self, _body: &Value) -> bool {
        false
    }
    /// Whether a tool result of the request holds what toolgate does not
    /// read as text (an image, a document, a file, audio).
    fn unread_results(&self, _body: &Value) -> bool {
        false
    }
    /// The stored answer a request continues, whose records are read.
    fn stored_from(&self, _body: &Value) -> Option<String> {
        None
    }
    /// Goes on from the stored answer the request continues, answering its
    /// withheld calls with `text`.
    fn continue_stored(&self, _body: &mut Value, _stored: &dyn Stored, _text: &str) {}
    /// Whether a later request may continue this one's answer by reference.
    fn continued_by_reference(&self, _body: &Value) -> bool {
        false
    }
    /// Answers calls withheld from a stored answer in the request.
    fn answer_withheld(&self, _body: &mut Value, _calls: &[(String, String)], _text: &str) {}
}
