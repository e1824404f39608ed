//! The one place the phase order of a request is written.
//!
//! 1. authenticate, then route ([`route`]): a gated endpoint goes through its
//!    protocol's codec, a short allow-list of endpoints that cannot return
//!    tool calls passes through, everything else is refused;
//! 2. gated ([`gated`]): read the body (size-capped) → parse → context →
//!    fence → hide denied tools → upstream;
//! 3. response: error status → generic error; the body's reader is chosen by
//!    what the request asked for (`stream`) and must match what arrived:
//!    SSE → the protocol's stream rewriter, JSON → its whole-body rewriter,
//!    anything else → 502.

pub mod access;
pub mod auth;
pub mod body;
pub mod budget;
pub mod complete;
pub mod conversations;
mod definitions;
pub mod errors;
mod gated;
pub mod gather;
pub mod mcp;
pub mod release;
pub mod resume;
pub mod route;
pub mod state;
mod story;
pub mod threads;

use crate::metrics::genai::Exchange;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{header, HeaderMap, Request, Response, StatusCode};
use http_body_util::combinators::{BoxBody, UnsyncBoxBody};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tracing::Instrument;

use crate::context::Context;
use crate::error::Error;
use crate::net::peer::PeerNames;
use crate::protocol::Protocol;
use crate::proxy::access::{Access, Logged};
use crate::proxy::budget::Charge;
use crate::proxy::state::State;
use crate::upstream::encoding::ContentDecoder;
use crate::upstream::ResponseBody;
pub(crate) use gated::read_head;
pub use route::{route, Route, Routed};

/// The agent's response body (a gated stream is `Send`, not `Sync`).
pub type ProxyBody = UnsyncBoxBody<Bytes, body::BodyError>;

/// How much of an upstream error body is kept for `errors = "passthrough"`.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A whole body, as an upstream request body.
fn full<E: 'static>(b: Bytes) -> BoxBody<Bytes, E> {
    Full::new(b).map_err(|never| match never {}).boxed()
}

/// A whole body, as the agent's response body.
fn reply(b: Bytes) -> ProxyBody {
    Full::new(b).map_err(|never| match never {}).boxed_unsync()
}

/// Handles one agent request; never fails (errors become responses here).
/// Every response carries the request's id (`x-toolgate-request-id`),
/// which its audit records and log lines carry too; `x-request-id` is the
/// provider's when it answered with one (its SDKs read it there), else
/// toolgate's. The provider's id is written on the access line.
/// The access line is written when the response body ends.
///
/// Written as an `async move` block, not an `async fn`: an `async fn` keeps
/// each argument twice in its future (as passed, and moved into its body),
/// and this future is held for every request until its response starts.
#[allow(clippy::manual_async_fn)] // see the doc
pub fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> impl std::future::Future<Output = Response<ProxyBody>> + Send {
    async move {
        let id = request_id(&state, req.headers());
        let span = tracing::info_span!("request", request_id = %id);
        let trace = state
            .telemetry
            .as_ref()
            .map(|t| t.request(req.method(), req.headers(), &id));
        let mut access = Access::new(req.method().clone(), id);
        access.trace = trace;
        let resp = respond(state, req, &mut access).instrument(span).await;
        let (mut head, body) = resp.into_parts();
        access.upstream_request_id = provider_request_id(&head.headers);
        if let Ok(v) = HeaderValue::from_str(&access.request_id) {
            if !head.headers.contains_key(REQUEST_ID) {
                head.headers.insert(REQUEST_ID, v.clone());
            }
            head.headers.insert(TOOLGATE_REQUEST_ID, v);
        }
        access.status = head.status.as_u16();
        Response::from_parts(head, Logged::new(body, access).boxed_unsync())
    }
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const PROVIDER_REQUEST_ID: HeaderName = HeaderName::from_static("request-id");
const TOOLGATE_REQUEST_ID: HeaderName = HeaderName::from_static("x-toolgate-request-id");

/// The answer to a reachability probe: 200, no body (a provider answers
/// `HEAD /` and Claude Code's `/api/hello`; a 404 or 405 reads as the
/// endpoint being down).
fn probe() -> Response<ProxyBody> {
    let mut resp = Response::new(reply(Bytes::new()));
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The answer on a connection over `[limits] max_connections`: a 503 in
/// the path's error shape, with `Retry-After`, and the connection closed.
pub fn busy(req: Request<Incoming>, limit: &'static str) -> Response<ProxyBody> {
    let family = route::family(req.uri().path(), req.headers());
    let mut resp = Error::Overloaded(limit).into_response(false, |e| family.error_body(e), reply);
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// The agent's `x-request-id` when it reads as an id ([`id_text`]), else a
/// new one: an id is echoed in headers and logs, so nothing else of the
/// agent's is.
fn request_id(state: &State, h: &HeaderMap) -> String {
    h.get(REQUEST_ID)
        .and_then(|v| id_text(v.as_bytes()))
        .map_or_else(|| state.request_id(), str::to_string)
}

/// The provider's id for its answer (`x-request-id`, Anthropic's
/// `request-id`) when it reads as an id.
pub fn provider_request_id(h: &HeaderMap) -> Option<String> {
    [REQUEST_ID, PROVIDER_REQUEST_ID]
        .iter()
        .find_map(|n| h.get(n))
        .and_then(|v| id_text(v.as_bytes()))
        .map(str::to_string)
}

/// `b` when it reads as an id: 1 to 128 letters, digits and `-_.:`. An
/// id goes into every log line of its request, so it holds nothing that
/// could imitate a field there (no `=`, quote or space).
fn id_text(b: &[u8]) -> Option<&str> {
    let id_char = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b':');
    if (1..=128).contains(&b.len()) && b.iter().all(id_char) {
        std::str::from_utf8(b).ok()
    } else {
        None
    }
}

/// Phases: authenticate (principal) → route → gated or pass-through.
/// An `async move` block for the reason [`handle`] is one.
#[allow(clippy::manual_async_fn)] // see the doc
fn respond(
    state: Arc<State>,
    mut req: Request<Incoming>,
    access: &mut Access,
) -> impl std::future::Future<Output = Response<ProxyBody>> + Send + '_ {
    async move {
        let path_route = route(req.method(), req.uri().path(), req.headers());
        // Errors are written in the shape the agent's SDK reads for this path.
        let family = match &path_route {
            Ok(r) => r.route.protocol(),
            Err(_) => route::family(req.uri().path(), req.headers()),
        };
        // A reachability probe is answered before authentication, as a
        // provider answers it: it carries nothing and says only that
        // someone is here.
        if let Ok(r) = &path_route {
            if let Route::Probe(_) = r.route {
                access.route = r.route.label();
                state.metrics.request(access.route, 200);
                return probe();
            }
        }
        let routed = auth::principal(
            &state.config.clients,
            req.headers(),
            req.extensions().get::<Arc<PeerNames>>().map(|p| &**p),
        )
        .and_then(|p| path_route.map(|r| (p, r)));
        let label = routed
            .as_ref()
            .map(|(_, r)| r.route.label())
            .unwrap_or("refused");
        access.route = label;
        if let Err(e) = &routed {
            access.refused = Some(route::refused_class(e));
        }
        // An upstream exchange holds a slot until its response ends.
        let routed = routed.and_then(|ok| {
            let slot = state.streams.clone().try_acquire_owned();
            access.stream_slot = Some(slot.map_err(|_| Error::Overloaded("streams"))?);
            Ok(ok)
        });
        if let Some(t) = &access.trace {
            let protocol = routed.as_ref().ok().map(|(_, r)| r.route.protocol());
            t.route(req.method(), label, protocol.map(|p| p.provider_family()));
            // What goes upstream continues toolgate's span, not the agent's.
            if protocol.is_some() {
                t.inject(req.headers_mut());
            }
        }
        let result = match routed {
            Ok((principal, r)) => match r.route {
                Route::Gated(protocol) => {
                    access.principal = Some(principal.clone());
                    let exchange = Exchange::chat(protocol.provider_family());
                    access.exchange = Some((exchange.clone(), state.metrics.clone()));
                    let asker = Box::new(Context {
                        request_id: access.request_id.clone(),
                        principal,
                        tally: access.tally.clone(),
                        trace: access.trace.clone(),
                        exchange: Some(exchange),
                        ..Context::default()
                    });
                    let (parts, body) = req.into_parts();
                    gated::handle(&state, parts, body, &r, protocol, asker).await
                }
                Route::Pass(protocol) => {
                    access.principal = Some(principal);
                    pass(&state, req, &r.rest, protocol).await
                }
                Route::Mcp => {
                    access.principal = Some(principal.clone());
                    let (parts, body) = req.into_parts();
                    let id = access.request_id.clone();
                    mcp::handle(&state, parts, body, &r, &principal, &id).await
                }
                Route::Conversations => {
                    access.principal = Some(principal.clone());
                    let (parts, body) = req.into_parts();
                    let id = access.request_id.clone();
                    conversations::handle(&state, parts, body, &r, &principal, &id).await
                }
                // Answered before authentication, above.
                Route::Probe(_) => Ok(probe()),
            },
            Err(e) => Err(e),
        };
        let resp = result.unwrap_or_else(|e| {
            if let Error::Overloaded(limit) = e {
                state.metrics.overloaded(limit);
            }
            state.metrics.upstream_fault(&e);
            if matches!(e, Error::Unauthorized) {
                let total = state.metrics.auth_failures.inc() + 1;
                state.auth_failures.record(total);
            }
            match (e.side(), &e) {
                // Logged once, where the provider's answer was read.
                (_, Error::UpstreamStatus { .. }) => {}
                (crate::error::Side::Client, _) => tracing::debug!(error = %e, "request refused"),
                _ => tracing::warn!(error = %e, "request failed"),
            }
            errors::response(&state, family, e)
        });
        state.metrics.request(label, resp.status().as_u16());
        resp
    }
}

/// `application/json` or a `+json` type (parameters aside).
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence == "application/json" || essence.ends_with("+json")
}

async fn pass(
    state: &Arc<State>,
    req: Request<Incoming>,
    rest: &str,
    protocol: Protocol,
) -> Result<Response<ProxyBody>, Error> {
    let (parts, body) = req.into_parts();
    let upstream = state.upstream_for(protocol);
    let sent_by = tokio::time::Instant::now() + state.config.limits.request_body_timeout;
    let up = upstream.request(
        parts.method,
        rest,
        parts.uri.query(),
        parts.headers,
        body::Deadline::request(body, sent_by).boxed(),
    )?;
    let deadline = tokio::time::Instant::now() + upstream.timeout;
    let resp = Box::pin(upstream.send(up)).await?;
    let (mut head, body) = resp.into_parts();
    if !head.status.is_success() && !head.status.is_redirection() {
        let status = upstream_status(state, head.status, &head.headers, body, deadline);
        return Err(Box::pin(status).await);
    }
    // The body goes on as it came but for upstream keys in it (when not
    // compressed: toolgate asks for none), so its length may change.
    let encoded = head
        .headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
    state.scrub.headers(
        &mut head.headers,
        &["content-encoding", "content-disposition"],
    );
    let body = body::Deadline::new(body, deadline);
    if encoded {
        return Ok(Response::from_parts(head, body.boxed_unsync()));
    }
    Ok(Response::from_parts(
        head,
        body::Scrubbed::new(body, state.clone()).boxed_unsync(),
    ))
}

/// An upstream error status; the body is kept (capped) for passthrough mode,
/// its message logged with secrets redacted, its rate-limit headers kept for
/// the agent.
async fn upstream_status(
    state: &State,
    status: StatusCode,
    h: &HeaderMap,
    body: ResponseBody,
    deadline: tokio::time::Instant,
) -> Error {
    let limits: HeaderMap = h
        .iter()
        .filter(|(k, _)| kept_with_error(k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let body = match ContentDecoder::for_headers(h) {
        // Small and capped: not charged to the shared budget.
        Ok(dec) => gather::response(
            body,
            dec,
            None,
            MAX_ERROR_BODY,
            deadline,
            &mut Charge::uncounted(),
        )
        .await
        .unwrap_or_default(),
        Err(_) => Bytes::new(),
    };
    let message = provider_message(&body);
    let mut counts = Default::default();
    let message = state
        .redactor
        .redact(&message, &mut counts)
        .unwrap_or(message);
    // One line per provider error, the provider's words quoted (`?`: they
    // cannot pass for a field of the line). A 4xx a client recovers from
    // by design (a prompt too long, a thread not found, a rate limit) is
    // `info`; a refused credential or a provider failure is `warn`.
    let recovered = status.is_client_error()
        && !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
    if recovered {
        tracing::info!(status = status.as_u16(), provider_message = ?message, "the provider answered with an error");
    } else {
        tracing::warn!(status = status.as_u16(), provider_message = ?message, "the provider answered with an error");
    }
    Error::UpstreamStatus {
        status,
        limits: Box::new(limits),
        body,
    }
}

/// Headers that tell a client when to retry, and which request the provider
/// answered: passed on with an upstream error.
fn kept_with_error(name: &str) -> bool {
    name == "x-request-id"
        || name == "request-id"
        || name == "retry-after"
        || name == "retry-after-ms"
        || name.starts_with("x-ratelimit-")
        || name.starts_with("anthropic-ratelimit-")
}

/// The provider's error message (`error.message`, or `message`), else the
/// start of its body; at most 512 characters, on one line.
fn provider_message(body: &[u8]) -> String {
    let text = crate::protocol::ProviderError::read(body)
        .and_then(|e| e.message)
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    text.chars()
        .take(512)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}
