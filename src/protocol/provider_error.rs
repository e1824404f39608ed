//! The provider's own errors, read from any of the wire formats' error
//! shapes and written again in the shape of the route the agent called:
//! status, type, code, param, message, request id, and of `details` and
//! `metadata` only the scalar fields clients recover from (an error code,
//! retry hints, the routed provider's name), every string passed through
//! the caller's redaction (after JSON escapes are undone) and bounded. A
//! structured call or a raw body inside an error (`details.tool_calls`,
//! OpenRouter's `metadata.raw`) never passes.
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
/// The fields of `details` kept (Anthropic's `error_code`, retry hints).
const DETAILS_KEPT: &[&str] = &[
    "error_code",
    "retry_after",
    "retry_after_ms",
    "retry_after_seconds",
    "retryDelay",
];
/// The fields of OpenRouter's `metadata` kept.
const METADATA_KEPT: &[&str] = &["provider_name", "retry_after", "retry_after_seconds"];

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

/// Of the object `v`, the fields named in `kept` whose values are scalars
/// (strings bounded): never a nested object or array, which could hold a
/// call; `None` when nothing is kept.
fn kept(v: Option<&Value>, kept: &[&str]) -> Option<Value> {
    let m = v?.as_object()?;
    let out: Map<String, Value> = kept
        .iter()
        .filter_map(|k| {
            let v = match m.get(*k)? {
                Value::String(s) => json!(cut(s.clone(), MAX_SHORT)),
                v @ (Value::Number(_) | Value::Bool(_)) => v.clone(),
                _ => return None,
            };
            Some((k.to_string(), v))
        })
        .collect();
    (!out.is_empty()).then_some(Value::Object(out))
}

/// `s` with the `\uXXXX` escapes (surrogate pairs too) and `\\`, `\/`
/// of JSON text undone, others left as they are: a provider's message or
/// field quoting JSON cannot hide a key from redaction (`sk\u002dlive…`).
fn unescaped(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains('\\') {
        return std::borrow::Cow::Borrowed(s);
    }
    let hex4 = |t: &str| t.get(..4).and_then(|h| u32::from_str_radix(h, 16).ok());
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let esc = &rest[at + 1..];
        let (c, used) = match esc.chars().next() {
            Some(c @ ('\\' | '/')) => (Some(c), 1),
            Some('u') => match hex4(&esc[1..]) {
                Some(hi @ 0xD800..=0xDBFF) => {
                    let lo = esc[5..].strip_prefix("\\u").and_then(hex4);
                    match lo {
                        Some(lo @ 0xDC00..=0xDFFF) => (
                            char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)),
                            11,
                        ),
                        _ => (None, 0),
                    }
                }
                Some(cp) => (char::from_u32(cp), 5),
                None => (None, 0),
            },
            _ => (None, 0),
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &esc[used..];
            }
            None => {
                out.push('\\');
                rest = esc;
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
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
            details: kept(err.get("details"), DETAILS_KEPT),
            metadata: kept(err.get("metadata"), METADATA_KEPT),
            request_id,
        })
    }

    /// Every string through `f` (the deployment's redaction: keys,
    /// secrets, personal data, as in tool results), its JSON escapes
    /// undone first.
    pub fn redacted(mut self, f: &dyn Fn(&str) -> String) -> ProviderError {
        let f = &|s: &str| f(&unescaped(s));
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
        protocol.codec().provider_error_body(self, status)
    }

    /// The data of a mid-stream error event on `protocol`'s route.
    pub fn event(&self, protocol: Protocol) -> Bytes {
        protocol.codec().provider_error_event(self)
    }

    /// The OpenAI shape of a body: `{"error": {...}}`.
    pub fn openai_body(&self, status: StatusCode) -> Bytes {
        Bytes::from(json!({"error": self.openai_object(status)}).to_string())
    }

    /// The Responses API's error event: `{"type": "error", "code",
    /// "message", "param"}`.
    pub fn responses_event(&self) -> Bytes {
        // A stream's error came with a 200: the type says what it was.
        let status = StatusCode::INTERNAL_SERVER_ERROR;
        let v = json!({
            "type": "error",
            "code": self.code.clone().or_else(|| self.kind.clone().map(Value::String)),
            "message": self.message_or(status),
            "param": self.param,
        });
        Bytes::from(v.to_string())
    }

    /// The Messages shape: `{"type": "error", "error": {...}}`, with the
    /// request id on a body (`status` given).
    pub fn messages_body(&self, status: Option<StatusCode>) -> Bytes {
        let shown = status.unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut v = json!({"type": "error", "error": self.messages_object(shown)});
        if let (Some(id), Some(_)) = (&self.request_id, status) {
            v["request_id"] = json!(id);
        }
        Bytes::from(v.to_string())
    }

    /// Google's shape: `{"error": {"code", "message", "status", "details"}}`
    /// (`code` the HTTP status, `status` its canonical name).
    pub fn google_body(&self, status: StatusCode) -> Bytes {
        let mut e = json!({
            "code": status.as_u16(),
            "message": self.message_or(status),
            "status": self.kind.clone().unwrap_or_else(|| google_status(status).into()),
        });
        if let Some(d) = &self.details {
            e["details"] = d.clone();
        }
        Bytes::from(json!({"error": e}).to_string())
    }
}

/// The canonical name Google's APIs give an HTTP status.
pub fn google_status(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        413 => "INVALID_ARGUMENT",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
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
    fn json_escapes_are_undone_before_redaction() {
        for (given, want) in [
            (r"sk\u002dlive", "sk-live"),
            (r"a\\b\/c", "a\\b/c"),
            (r"\ud83d\ude00 ok", "\u{1F600} ok"),
            (r"lone \ud83d here", r"lone \ud83d here"),
            (r"\n and \u12", r"\n and \u12"),
            ("plain", "plain"),
        ] {
            assert_eq!(unescaped(given), want, "{given}");
        }
    }

    #[test]
    fn a_call_or_a_raw_body_inside_an_error_never_passes() {
        let raw = r#"{"choices":[{"message":{"tool_calls":[{"function":{"name":"shell_exec","arguments":"{\"cmd\":\"rm -rf /\"}"}}]}}]}"#;
        let body = json!({"error": {"message": "Provider returned error", "code": 502,
            "type": "server_error",
            "details": {"error_code": "x1", "tool_calls": [{"function": {"name": "shell_exec"}}]},
            "metadata": {"provider_name": "Acme", "raw": raw, "retry_after": 3}}});
        let e = ProviderError::read(body.to_string().as_bytes()).unwrap_or_default();
        for p in [Protocol::Chat, Protocol::Responses, Protocol::Messages] {
            for out in [e.body(p, StatusCode::BAD_GATEWAY), e.event(p)] {
                let text = String::from_utf8_lossy(&out);
                assert!(
                    !text.contains("shell_exec") && !text.contains("rm -rf"),
                    "{text}"
                );
            }
        }
        let v: Value = serde_json::from_slice(&e.body(Protocol::Chat, StatusCode::BAD_GATEWAY))
            .unwrap_or_default();
        assert_eq!(
            v["error"]["metadata"],
            json!({"provider_name": "Acme", "retry_after": 3})
        );
        assert_eq!(v["error"]["details"], json!({"error_code": "x1"}));
        // A key hidden behind an escape is redacted once the escape is undone.
        let hidden = json!({"error": {"message": r"bad key sk\u002dlive\u002d123"}});
        let e = ProviderError::read(hidden.to_string().as_bytes())
            .unwrap_or_default()
            .redacted(&|s: &str| s.replace("sk-live-123", "[REDACTED]"));
        assert_eq!(e.message.as_deref(), Some("bad key [REDACTED]"));
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
