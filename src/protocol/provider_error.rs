//! The provider's own errors, read from any of the wire formats' error
//! shapes and written again in the shape of the route the agent called:
//! status, type, code, param, message and details as the provider sent
//! them, every string passed through the caller's redaction and bounded.
//!
//! Errors the provider produced are not the gate's secrets: a client
//! recovers by reading them (Claude Code compacts on `prompt is too long`,
//! the anthropic SDK reads `error.details.error_code`). Only the errors
//! toolgate produces itself stay generic ([`crate::error::Error::public_message`]).

use bytes::Bytes;
use http::StatusCode;
use serde_json::{json, Map, Value};

use super::Protocol;

/// Longest message kept, in bytes (cut at a character boundary).
const MAX_MESSAGE: usize = 4096;
/// Longest type, code or param kept.
const MAX_SHORT: usize = 256;
/// Largest `details` / `metadata` kept, serialized; larger ones are dropped.
const MAX_DETAILS: usize = 4096;

/// What a provider said in an error body or error event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderError {
    pub kind: Option<String>,
    pub message: Option<String>,
    /// A string or a number, as the provider sent it.
    pub code: Option<Value>,
    pub param: Option<String>,
    /// Anthropic's `error.details` (`{"error_code": "thread_not_found"}`).
    pub details: Option<Value>,
    /// OpenRouter's `error.metadata` (the routed provider's own words).
    pub metadata: Option<Value>,
    /// The provider's request id when the body carries one.
    pub request_id: Option<String>,
}

fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

fn short(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .map(|s| cut(s.to_string(), MAX_SHORT))
}

fn bounded(v: Option<&Value>) -> Option<Value> {
    let v = v.filter(|v| v.is_object() || v.is_array())?;
    (v.to_string().len() <= MAX_DETAILS).then(|| v.clone())
}

/// Every string in `v`, keys and values, through `f`.
fn walk(v: &mut Value, f: &dyn Fn(&str) -> String) {
    match v {
        Value::String(s) => *s = f(s),
        Value::Array(a) => a.iter_mut().for_each(|v| walk(v, f)),
        Value::Object(m) => {
            let old = std::mem::take(m);
            for (k, mut v) in old {
                walk(&mut v, f);
                m.insert(f(&k), v);
            }
        }
        _ => {}
    }
}

impl ProviderError {
    /// Reads an error body or event: `{"error": {...}}` (OpenAI, OpenRouter),
    /// `{"type": "error", "error": {...}}` (Anthropic), `{"error": "text"}`,
    /// or a top-level `{"code", "message"}` (a Responses error event).
    /// `None` when it is none of these (not JSON, an HTML page).
    pub fn read(body: &[u8]) -> Option<ProviderError> {
        let top: Map<String, Value> = serde_json::from_slice(body).ok()?;
        let request_id = short(top.get("request_id"));
        let err = match top.get("error") {
            Some(Value::Object(e)) => e.clone(),
            Some(Value::String(s)) => {
                let mut m = Map::new();
                m.insert("message".into(), json!(s));
                m
            }
            _ if top.contains_key("message") => top.clone(),
            _ => return None,
        };
        let message = match err.get("message") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => None,
            Some(other) => Some(other.to_string()),
        };
        let code = match err.get("code") {
            Some(Value::Number(n)) => Some(Value::Number(n.clone())),
            Some(Value::String(s)) => Some(json!(cut(s.clone(), MAX_SHORT))),
            _ => None,
        };
        Some(ProviderError {
            kind: short(err.get("type")).filter(|t| t != "error"),
            message: message.map(|m| cut(m, MAX_MESSAGE)),
            code,
            param: short(err.get("param")),
            details: bounded(err.get("details")),
            metadata: bounded(err.get("metadata")),
            request_id,
        })
    }

    /// Every string through `f` (the deployment's redaction: keys,
    /// secrets, personal data, as in tool results).
    pub fn redacted(mut self, f: &dyn Fn(&str) -> String) -> ProviderError {
        for s in [
            &mut self.kind,
            &mut self.message,
            &mut self.param,
            &mut self.request_id,
        ]
        .into_iter()
        .flatten()
        {
            *s = f(s);
        }
        // Redaction may lengthen what was cut to size.
        self.message = self.message.map(|m| cut(m, MAX_MESSAGE));
        for v in [&mut self.code, &mut self.details, &mut self.metadata]
            .into_iter()
            .flatten()
        {
            walk(v, f);
        }
        self
    }

    /// The Anthropic error type a status stands for, when the provider named none.
    fn messages_type(status: StatusCode) -> &'static str {
        match status.as_u16() {
            400 | 422 => "invalid_request_error",
            401 => "authentication_error",
            402 => "billing_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            504 => "timeout_error",
            529 => "overloaded_error",
            _ => "api_error",
        }
    }

    /// The OpenAI error type a status stands for, when the provider named none.
    fn openai_type(status: StatusCode) -> &'static str {
        match status.as_u16() {
            429 => "rate_limit_error",
            s if (400..500).contains(&s) => "invalid_request_error",
            _ => "server_error",
        }
    }

    fn message_or(&self, status: StatusCode) -> String {
        self.message.clone().unwrap_or_else(|| {
            status
                .canonical_reason()
                .unwrap_or("The model provider returned an error.")
                .to_string()
        })
    }

    /// The error's object in the OpenAI shape (`message`, `type`, `param`,
    /// `code`, and `metadata` when the provider sent one).
    fn openai_object(&self, status: StatusCode) -> Value {
        let mut e = json!({
            "message": self.message_or(status),
            "type": self.kind.clone().unwrap_or_else(|| Self::openai_type(status).into()),
            "param": self.param,
            "code": self.code,
        });
        if let Some(m) = &self.metadata {
            e["metadata"] = m.clone();
        }
        if let Some(d) = &self.details {
            e["details"] = d.clone();
        }
        e
    }

    /// The error's object in the Messages shape (`type`, `message`, and
    /// `details` when the provider sent them).
    fn messages_object(&self, status: StatusCode) -> Value {
        let mut e = json!({
            "type": self.kind.clone().unwrap_or_else(|| Self::messages_type(status).into()),
            "message": self.message_or(status),
        });
        if let Some(d) = &self.details {
            e["details"] = d.clone();
        }
        e
    }

    /// The body of an error response on `protocol`'s route.
    pub fn body(&self, protocol: Protocol, status: StatusCode) -> Bytes {
        let v = match protocol {
            Protocol::Chat | Protocol::Responses => json!({"error": self.openai_object(status)}),
            Protocol::Messages => {
                let mut v = json!({"type": "error", "error": self.messages_object(status)});
                if let Some(id) = &self.request_id {
                    v["request_id"] = json!(id);
                }
                v
            }
        };
        Bytes::from(v.to_string())
    }

    /// The data of a mid-stream error event on `protocol`'s route:
    /// `{"error": {...}}` (Chat Completions), `{"type": "error", "code",
    /// "message", "param"}` (Responses), `{"type": "error", "error": {...}}`
    /// (Messages).
    pub fn event(&self, protocol: Protocol) -> Bytes {
        // A stream's error came with a 200: the type says what it was.
        let status = StatusCode::INTERNAL_SERVER_ERROR;
        let v = match protocol {
            Protocol::Chat => json!({"error": self.openai_object(status)}),
            Protocol::Responses => json!({
                "type": "error",
                "code": self.code.clone().or_else(|| self.kind.clone().map(Value::String)),
                "message": self.message_or(status),
                "param": self.param,
            }),
            Protocol::Messages => json!({"type": "error", "error": self.messages_object(status)}),
        };
        Bytes::from(v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shape_is_read() {
        let openai = br#"{"error":{"message":"Invalid 'tools[0].name'","type":"invalid_request_error","param":"tools[0].name","code":"invalid_value"}}"#;
        let e = ProviderError::read(openai).unwrap_or_default();
        assert_eq!(e.kind.as_deref(), Some("invalid_request_error"));
        assert_eq!(e.param.as_deref(), Some("tools[0].name"));
        assert_eq!(e.code, Some(json!("invalid_value")));
        let anthropic = br#"{"type":"error","error":{"type":"not_found_error","message":"thread not found","details":{"error_code":"thread_not_found"}},"request_id":"req_011"}"#;
        let e = ProviderError::read(anthropic).unwrap_or_default();
        assert_eq!(e.kind.as_deref(), Some("not_found_error"));
        assert_eq!(e.details, Some(json!({"error_code": "thread_not_found"})));
        assert_eq!(e.request_id.as_deref(), Some("req_011"));
        let openrouter = br#"{"error":{"code":402,"message":"Insufficient credits","metadata":{"provider_name":"x"}}}"#;
        let e = ProviderError::read(openrouter).unwrap_or_default();
        assert_eq!(e.code, Some(json!(402)));
        assert!(e.metadata.is_some());
        let event = br#"{"type":"error","code":"server_error","message":"boom","param":null}"#;
        let e = ProviderError::read(event).unwrap_or_default();
        assert_eq!((e.kind, e.message.as_deref()), (None, Some("boom")));
        assert!(ProviderError::read(b"<html>502</html>").is_none());
        // Fields beyond the known ones (Groq's `failed_generation`: a call
        // no gate saw) are not kept.
        let groq = br#"{"error":{"message":"Tool call validation failed","type":"invalid_request_error","code":"tool_use_failed","failed_generation":"{"name": "rm"}"}}"#;
        let e = ProviderError::read(groq).unwrap_or_default();
        let out = e.body(Protocol::Chat, StatusCode::BAD_REQUEST);
        assert!(!String::from_utf8_lossy(&out).contains("rm"), "{out:?}");
        assert!(ProviderError::read(br#"{"id":"x"}"#).is_none());
    }

    #[test]
    fn it_is_written_in_the_route_shape_bounded_and_redacted() {
        let body = format!(
            r#"{{"error":{{"message":"key sk-live-1 {} ","type":"invalid_request_error","details":{{"big":"{}"}}}}}}"#,
            "x".repeat(5000),
            "y".repeat(5000)
        );
        let e = ProviderError::read(body.as_bytes())
            .unwrap_or_default()
            .redacted(&|s: &str| s.replace("sk-live-1", "[REDACTED]"));
        let m: Value = serde_json::from_slice(&e.body(Protocol::Messages, StatusCode::BAD_REQUEST))
            .unwrap_or_default();
        assert_eq!(m["type"], "error");
        assert_eq!(m["error"]["type"], "invalid_request_error");
        let msg = m["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.starts_with("key [REDACTED] ") && msg.len() <= MAX_MESSAGE + 3,
            "{msg}"
        );
        assert!(m["error"].get("details").is_none());
        let c: Value = serde_json::from_slice(&e.body(Protocol::Chat, StatusCode::BAD_REQUEST))
            .unwrap_or_default();
        assert_eq!(c["error"]["type"], "invalid_request_error");
        let none = ProviderError::default();
        let m: Value = serde_json::from_slice(&none.body(
            Protocol::Messages,
            StatusCode::from_u16(529).unwrap_or(StatusCode::BAD_GATEWAY),
        ))
        .unwrap_or_default();
        assert_eq!(m["error"]["type"], "overloaded_error");
    }
}
