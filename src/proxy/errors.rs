//! The response an error becomes. toolgate's own errors are generic (they
//! never name a gate, a rule or a key); the provider's errors reach the
//! agent as the provider said them (`[rewrite] errors = "provider"`, the
//! default): status, type, code, param, message and details, redacted and
//! bounded, in the shape of the route the agent called. `passthrough`
//! forwards an error body as it came only when it holds the error alone.

use http::{header, HeaderValue, Response, StatusCode};

use super::state::State;
use super::{reply, ProxyBody};
use crate::config::ErrorMode;
use crate::error::Error;
use crate::fence::redact::Counts;
use crate::protocol::{Protocol, ProviderError};

/// What the provider said in `body`, its strings redacted as tool results
/// are. A 401 is about the key toolgate sent, not the agent's: its message
/// (which may quote part of that key) is replaced.
pub fn provider(state: &State, body: &[u8], status: StatusCode) -> ProviderError {
    let redact = |s: &str| {
        state
            .redactor
            .redact(s, &mut Counts::new())
            .unwrap_or_else(|| s.to_string())
    };
    let mut e = ProviderError::read(body)
        .unwrap_or_default()
        .redacted(&redact);
    if status == StatusCode::UNAUTHORIZED {
        e.message = Some("The model provider did not accept the credentials toolgate sent.".into());
    }
    e
}

/// The keys an error body may have beside `error` and still pass as it
/// came: what the providers put around their errors.
const ENVELOPE: [&str; 10] = [
    "error",
    "sequence_number",
    "type",
    "request_id",
    "user_id",
    "code",
    "message",
    "status",
    "details",
    "param",
];

/// Whether an error body holds nothing but the error: text with no line a
/// reader could take for JSON or an event (a proxy's HTML page), or objects
/// of envelope keys only. A body that also holds
/// `choices`, `candidates`, `content` or anything else could hold a call a
/// client reads, so it is not forwarded as it came.
fn error_alone(body: &[u8]) -> bool {
    let alone = |v: &serde_json::Value| {
        v.as_object()
            .is_some_and(|o| o.keys().all(|k| ENVELOPE.contains(&k.as_str())))
    };
    // Text that reads as JSON to a lenient reader, or as an event stream.
    let readable = |line: &[u8]| {
        let l = line.trim_ascii_start();
        l.starts_with(b"{") || l.starts_with(b"[") || l.starts_with(b"data:")
    };
    match crate::json::strict_value(body) {
        Err(_) => !body.split(|b| *b == b'\n' || *b == b'\r').any(readable),
        Ok(serde_json::Value::Array(items)) => items.iter().all(alone),
        Ok(v) => alone(&v),
    }
}

/// `mode`, except that `passthrough` reads an error body that holds more
/// than the error as `provider` does.
fn mode_for(mode: ErrorMode, e: &Error) -> ErrorMode {
    match (mode, e) {
        (
            ErrorMode::Passthrough,
            Error::UpstreamStatus { body, .. } | Error::UpstreamEvent(body),
        ) if !error_alone(body) => ErrorMode::Provider,
        (mode, _) => mode,
    }
}

/// The response `e` becomes on a route of `family`.
pub fn response(state: &State, family: Protocol, e: Error) -> Response<ProxyBody> {
    let e = state.scrub.error(e);
    let mode = mode_for(state.config.rewrite.errors, &e);
    let (status, limits, body) = match (mode, e) {
        (
            ErrorMode::Provider,
            Error::UpstreamStatus {
                status,
                limits,
                body,
            },
        ) => (status, *limits, body),
        // An error object where a response should be: the provider's words, as a 502.
        (ErrorMode::Provider, Error::UpstreamEvent(body)) => {
            (StatusCode::BAD_GATEWAY, http::HeaderMap::new(), body)
        }
        (mode, e) => {
            return e.into_response(
                mode == ErrorMode::Passthrough,
                |e| family.error_body(e),
                reply,
            )
        }
    };
    let said = provider(state, &body, status).body(family, status);
    let mut resp = Response::new(reply(said));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut().extend(limits);
    resp
}

/// A stream's error event as the agent gets it: the provider's (redacted,
/// in the route's shape) in `provider` mode; `passthrough` says whether the
/// rewriter writes the event's bytes as they are.
pub fn event(state: &State, protocol: Protocol, e: Error) -> (Error, bool) {
    match (mode_for(state.config.rewrite.errors, &e), e) {
        (ErrorMode::Provider, Error::UpstreamEvent(body)) => {
            let said = provider(state, &body, StatusCode::OK).event(protocol);
            (Error::UpstreamEvent(said), true)
        }
        (mode, e) => (e, mode == ErrorMode::Passthrough),
    }
}
