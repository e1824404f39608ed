//! The response an error becomes. toolgate's own errors are generic (they
//! never name a gate, a rule or a key); the provider's errors reach the
//! agent as the provider said them (`[rewrite] errors = "provider"`, the
//! default): status, type, code, param, message and details, redacted and
//! bounded, in the shape of the route the agent called.

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

/// The response `e` becomes on a route of `family`.
pub fn response(state: &State, family: Protocol, e: Error) -> Response<ProxyBody> {
    let mode = state.config.rewrite.errors;
    let (status, limits, body) = match (mode, state.scrub.error(e)) {
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
    match (state.config.rewrite.errors, e) {
        (ErrorMode::Provider, Error::UpstreamEvent(body)) => {
            let said = provider(state, &body, StatusCode::OK).event(protocol);
            (Error::UpstreamEvent(said), true)
        }
        (mode, e) => (e, mode == ErrorMode::Passthrough),
    }
}
