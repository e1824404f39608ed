//! The Anthropic Messages codec (`POST /v1/messages`); no I/O.
//!
//! - [`request`]: declared tools (custom tools, Anthropic-defined client
//!   tools, server tools), texts from `system` and user messages, tool
//!   results from `tool_result` blocks, the notice in `system`.
//! - [`hide`]: removes denied tools from the request.
//! - [`stream`]: the streaming rewriter: a `tool_use` block is held from
//!   `content_block_start` to `content_block_stop`, then released as it came
//!   or removed, later blocks renumbered so indices stay contiguous.
//! - [`complete`]: the same over a non-streamed message's `content`.
//!
//! A `tool_use` block is a call the client runs. `server_tool_use` and
//! `mcp_tool_use` blocks are run by the provider: they already ran when they
//! arrive, so they pass (and are audited) and are gated on the request,
//! where a denied tool is removed or refused. A block type toolgate does not
//! know (a new one, or a misspelled `"tool_use "`) is held as a call of a
//! kind toolgate rejects.

mod codec;
pub use codec::Messages;
pub mod complete;
pub mod follow;
pub mod hide;
pub mod request;
pub mod stream;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::call::{Call, Kind, MAX_CALL_ID_BYTES, MAX_NAME_BYTES};
use crate::error::Error;
use crate::protocol::malformed;

/// Block types of calls the provider runs itself (passed, audited).
const HOSTED_BLOCKS: [&str; 2] = ["server_tool_use", "mcp_tool_use"];

/// The keys toolgate reads in a content block. A key that only folds to one
/// of them fails the response.
pub const BLOCK_KEYS: [&str; 4] = ["type", "id", "name", "input"];

/// How a content block of type `t` is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockClass {
    /// A call the client runs: held and gated.
    Call,
    /// A call the provider runs itself: passed and audited.
    Hosted,
    /// Text, thinking, tool results of server tools, anything else: passes.
    Other,
}

/// Block types that are neither calls nor provider-run calls: they pass.
const OTHER_BLOCKS: [&str; 14] = [
    "text",
    "thinking",
    "redacted_thinking",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "advisor_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "mcp_tool_result",
    "container_upload",
    "compaction",
    "fallback",
];

/// How a block of type `t` is treated. A type toolgate does not know (a new
/// one, or one that only differs from a known type by case, spacing or
/// invisible characters, which a lenient reader could take for a call) is
/// held as a call too, and rejected (its kind is one toolgate does not
/// carry).
pub fn classify(t: &str) -> BlockClass {
    match t {
        "tool_use" => BlockClass::Call,
        _ if HOSTED_BLOCKS.contains(&t) => BlockClass::Hosted,
        _ if OTHER_BLOCKS.contains(&t) => BlockClass::Other,
        _ => BlockClass::Call,
    }
}

fn str_field<'a>(block: &'a Map<String, Value>, key: &str) -> Result<&'a str, Error> {
    match block.get(key) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(malformed("a content block field is not a string")),
    }
}

/// A call block's id, within [`MAX_CALL_ID_BYTES`] (a longer one fails
/// the response as the block starts).
pub fn call_block_id(block: &Map<String, Value>) -> Result<&str, Error> {
    let id = str_field(block, "id")?;
    if id.len() > MAX_CALL_ID_BYTES {
        return Err(malformed("a tool_use block's id is too long"));
    }
    Ok(id)
}

/// The canonical call of a call block (classified [`BlockClass::Call`])
/// whose input is the JSON text `input`; over `max` bytes it is dropped and
/// marked.
pub fn call_of(block: &Map<String, Value>, input: String, max: usize) -> Result<Call, Error> {
    let t = str_field(block, "type")?;
    let kind = match t {
        "tool_use" => Kind::Function,
        other => Kind::Other(other.to_string()),
    };
    let name = str_field(block, "name")?;
    let id = call_block_id(block)?;
    let oversized = input.len() > max;
    let name_too_long = name.len() > MAX_NAME_BYTES;
    Ok(Call {
        choice: 0,
        id: id.to_string(),
        kind,
        name: if name_too_long {
            String::new()
        } else {
            name.to_string()
        },
        arguments: if oversized { String::new() } else { input },
        oversized,
        name_too_long,
        namespaced: false,
    })
}

/// A provider-run call, for the audit trail (its input is not kept; the
/// trail clips its name).
pub fn hosted_call(block: &Map<String, Value>) -> Call {
    let name = block.get("name").and_then(Value::as_str).unwrap_or("");
    let t = block.get("type").and_then(Value::as_str).unwrap_or("");
    Call {
        id: block
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        kind: Kind::Other(t.to_string()),
        name: name.to_string(),
        ..Call::default()
    }
}

/// The text block that stands in when every call of a message was withheld.
pub fn neutral_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// The Messages API's error `type` for an error toolgate answers with.
pub fn error_type(err: &Error) -> &'static str {
    use http::StatusCode;
    match err {
        Error::BadRequest(_) | Error::MethodNotAllowed | Error::WebSocketRefused => {
            "invalid_request_error"
        }
        Error::Unauthorized => "authentication_error",
        Error::PayloadTooLarge { .. } => "request_too_large",
        Error::UnsupportedEndpoint | Error::NotServed(_) | Error::ThreadNotFound => {
            "not_found_error"
        }
        Error::UpstreamStatus { status, .. } if *status == StatusCode::TOO_MANY_REQUESTS => {
            "rate_limit_error"
        }
        Error::UpstreamStatus { status, .. } if status.is_client_error() => "invalid_request_error",
        Error::Overloaded(_) => "overloaded_error",
        Error::UpstreamEvent(body) => upstream_error_type(body),
        _ => "api_error",
    }
}

/// The error `type` an upstream error event named, when it is one of the
/// API's own (it says nothing the agent should not know); else `api_error`.
fn upstream_error_type(body: &[u8]) -> &'static str {
    const KNOWN: [&str; 5] = [
        "overloaded_error",
        "rate_limit_error",
        "api_error",
        "invalid_request_error",
        "request_too_large",
    ];
    let named = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
        v.get("error")
            .and_then(|e| e.get("type"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    KNOWN
        .iter()
        .find(|k| named.as_deref() == Some(**k))
        .copied()
        .unwrap_or("api_error")
}

/// `{"type":"error","error":{"type":…,"message":…}}`: the Messages API's error shape.
pub fn error_body(err: &Error) -> Bytes {
    let (_, message) = err.public_message();
    let mut v = json!({"type": "error", "error": {"type": error_type(err), "message": message}});
    if let Error::ThreadNotFound = err {
        // What the SDK reads to replay the conversation under a new thread.
        v["error"]["details"] = json!({"error_code": "thread_not_found"});
    }
    Bytes::from(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_classified_by_type() {
        for t in [
            "tool_use",
            "new_tool_use",
            "Tool_Use",
            "tool\u{200b}_use",
            "tool_use ",
            "brand_new_block",
        ] {
            assert_eq!(classify(t), BlockClass::Call, "{t}");
        }
        for t in ["server_tool_use", "mcp_tool_use"] {
            assert_eq!(classify(t), BlockClass::Hosted, "{t}");
        }
        for t in [
            "text",
            "thinking",
            "redacted_thinking",
            "web_search_tool_result",
            "mcp_tool_result",
        ] {
            assert_eq!(classify(t), BlockClass::Other, "{t}");
        }
    }

    #[test]
    fn calls_are_canonical() {
        let b = json!({"type": "tool_use", "id": "toolu_1", "name": "get", "input": {}});
        let c = call_of(b.as_object().unwrap(), "{\"a\":1}".into(), 100).unwrap();
        assert_eq!(
            (c.id.as_str(), c.name.as_str(), c.arguments.as_str(), c.kind),
            ("toolu_1", "get", "{\"a\":1}", Kind::Function)
        );
        let c = call_of(b.as_object().unwrap(), "{\"long\":1}".into(), 4).unwrap();
        assert!(c.oversized && c.arguments.is_empty());
        let b = json!({"type": "Tool_Use", "id": "x", "name": "get"});
        let c = call_of(b.as_object().unwrap(), "{}".into(), 100).unwrap();
        assert!(matches!(c.kind, Kind::Other(_)));
        let b = json!({"type": "tool_use", "id": 5});
        assert!(call_of(b.as_object().unwrap(), "{}".into(), 100).is_err());
    }

    #[test]
    fn errors_have_the_messages_shape() {
        let v: Value = serde_json::from_slice(&error_body(&Error::Unauthorized)).unwrap();
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "authentication_error");
        let up = Error::UpstreamEvent(Bytes::from_static(
            br#"{"type":"error","error":{"type":"overloaded_error","message":"secret detail"}}"#,
        ));
        let v: Value = serde_json::from_slice(&error_body(&up)).unwrap();
        assert_eq!(v["error"]["type"], "overloaded_error");
        assert!(!v.to_string().contains("secret detail"));
        let odd = Error::UpstreamEvent(Bytes::from_static(br#"{"error":{"type":"x_leak"}}"#));
        assert_eq!(error_type(&odd), "api_error");
    }
}
