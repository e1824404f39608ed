//! The one place the phase order of a request is written.
//!
//! 1. route: chat completions are gated; endpoints that can return tool calls
//!    in formats not gated yet are refused; everything else passes through;
//! 2. chat: read the body (size-capped) → parse → context → upstream;
//! 3. response: error status → generic error; SSE → gated stream;
//!    JSON → gated body; anything else → 502.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{header, HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

use crate::auth;
use crate::body;
use crate::encoding::ContentDecoder;
use crate::error::Error;
use crate::release;
use crate::request::{self, context, hide, tool_results, Context};
use crate::state::State;
use crate::upstream::strip_hop_by_hop;
use crate::wire::complete;

pub type ProxyBody = BoxBody<Bytes, body::BodyError>;

/// How much of an upstream error body is kept for `errors = "passthrough"`.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Which way a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Chat,
    Pass,
}

impl Route {
    fn label(self) -> &'static str {
        match self {
            Route::Chat => crate::metrics::ROUTES[0],
            Route::Pass => crate::metrics::ROUTES[1],
        }
    }
}

/// Path segments of endpoints that return tool calls in formats toolgate does
/// not gate (yet): Responses, Anthropic Messages, Assistants/threads runs,
/// Realtime, batch results (via files), conversation items. A path holding
/// any of them, anywhere, is refused; so is any path with `chat/completions`
/// in it other than `/chat/completions` itself (stored completions, Azure-style
/// deployment paths, doubled `/v1`).
const REFUSED: [&str; 8] = [
    "responses",
    "messages",
    "assistants",
    "threads",
    "realtime",
    "batches",
    "files",
    "conversations",
];

/// A classified request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub route: Route,
    /// The path to forward, after `/phase/{name}` and `/v1`.
    pub rest: String,
    /// The phase named by a `/phase/{name}/…` prefix.
    pub phase: Option<String>,
}

/// Classifies a path. Paths that could be read two ways (percent escapes, dot
/// segments, backslashes) are refused so that no spelling reaches an ungated
/// endpoint.
pub fn route(method: &Method, path: &str) -> Result<Routed, Error> {
    if path.contains(['%', '\\']) {
        return Err(Error::BadRequest("The request path is not valid.".into()));
    }
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segs.iter().any(|s| *s == "." || *s == "..") {
        return Err(Error::BadRequest("The request path is not valid.".into()));
    }
    let (phase, segs) = match segs.as_slice() {
        [p, name, rest @ ..] if p.eq_ignore_ascii_case("phase") => {
            if !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(Error::BadRequest(
                    "The phase in the path is not valid.".into(),
                ));
            }
            (Some(name.to_string()), rest)
        }
        s => (None, s),
    };
    let segs = match segs.first() {
        Some(s) if s.eq_ignore_ascii_case("v1") => &segs[1..],
        _ => segs,
    };
    let rest: String = segs.iter().flat_map(|s| ["/", s]).collect();
    let lower: Vec<String> = segs.iter().map(|s| s.to_ascii_lowercase()).collect();
    if lower == ["chat", "completions"] {
        if method != Method::POST {
            return Err(Error::MethodNotAllowed);
        }
        return Ok(Routed {
            route: Route::Chat,
            rest,
            phase,
        });
    }
    let chat_elsewhere = lower
        .windows(2)
        .any(|w| w[0] == "chat" && w[1] == "completions");
    if chat_elsewhere || lower.iter().any(|s| REFUSED.contains(&s.as_str())) {
        return Err(Error::UnsupportedEndpoint);
    }
    Ok(Routed {
        route: Route::Pass,
        rest,
        phase,
    })
}

/// A whole body, as a response body or an upstream request body.
fn full<E: 'static>(b: Bytes) -> BoxBody<Bytes, E> {
    Full::new(b).map_err(|never| match never {}).boxed()
}

/// Handles one agent request; never fails (errors become responses here).
/// Phases: authenticate (principal) → route → chat or pass-through.
pub async fn handle(state: Arc<State>, req: Request<Incoming>) -> Response<ProxyBody> {
    let routed = auth::principal(&state.config.clients, req.headers())
        .and_then(|p| route(req.method(), req.uri().path()).map(|r| (p, r)));
    let label = routed
        .as_ref()
        .map(|(_, r)| r.route.label())
        .unwrap_or(crate::metrics::ROUTES[2]);
    let result = match routed {
        Ok((principal, r)) if r.route == Route::Chat => chat(&state, req, &r, principal).await,
        Ok((_, r)) => pass(&state, req, &r.rest).await,
        Err(e) => Err(e),
    };
    let resp = result.unwrap_or_else(|e| {
        match e.side() {
            crate::error::Side::Client => tracing::debug!(error = %e, "request refused"),
            _ => tracing::warn!(error = %e, "request failed"),
        }
        e.into_response(state.passthrough_errors(), full)
    });
    state.metrics.request(label, resp.status().as_u16());
    resp
}

async fn chat(
    state: &Arc<State>,
    req: Request<Incoming>,
    routed: &Routed,
    principal: String,
) -> Result<Response<ProxyBody>, Error> {
    let (parts, body) = req.into_parts();
    let limit = state.config.limits.max_request_bytes;
    if content_length(&parts.headers).is_some_and(|n| n > limit as u64) {
        return Err(Error::PayloadTooLarge { limit });
    }
    let bytes = Limited::new(body, limit)
        .collect()
        .await
        .map_err(|e| match e.downcast::<http_body_util::LengthLimitError>() {
            Ok(_) => Error::PayloadTooLarge { limit },
            Err(_) => Error::BadRequest("The request body could not be read.".into()),
        })?
        .to_bytes();
    let mut chat = request::parse_chat(&bytes)?;
    let mut ctx = Context {
        request_id: state.request_id(),
        principal,
        declared: std::mem::take(&mut chat.declared),
        ..Context::default()
    };
    let default_phase = state.config.policy.default_phase.as_deref();
    context::fill(
        &mut ctx,
        &parts.headers,
        routed.phase.as_deref(),
        default_phase,
        &chat.body,
    );
    let gates = state.gates();
    let fenced = fence_tool_results(state, &gates, &ctx, &mut chat.body).await?;
    let hidden = hidden_tools(state, &gates, &ctx, &mut chat.body);
    for name in hidden.iter().flatten() {
        ctx.declared.remove(name);
    }
    let body = if fenced || hidden.is_some() {
        Bytes::from(chat.body.to_string())
    } else {
        bytes
    };
    let ctx = Arc::new(ctx);
    let up = state.upstream.request(
        parts.method,
        &routed.rest,
        parts.uri.query(),
        &parts.headers,
        full(body),
    )?;
    let sent = Instant::now();
    let deadline = tokio::time::Instant::now() + state.upstream.timeout;
    let resp = state.upstream.send(up).await?;
    state.metrics.upstream_latency.observe(sent.elapsed());
    let (mut head, body) = resp.into_parts();
    if !head.status.is_success() {
        return Err(upstream_status(head.status, &head.headers, body, deadline).await);
    }
    let decoder = ContentDecoder::for_headers(&head.headers)?;
    let content_type = head
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    strip_hop_by_hop(&mut head.headers);
    head.headers.remove(header::CONTENT_LENGTH);
    head.headers.remove(header::CONTENT_ENCODING);
    if content_type.starts_with("text/event-stream") {
        let b = body::gated_stream(state.clone(), gates, ctx, body, decoder, deadline);
        return Ok(Response::from_parts(
            head,
            b.map_err(|never| match never {}).boxed(),
        ));
    }
    if !content_type.contains("json") {
        return Err(Error::UpstreamUnreadable("unexpected content type"));
    }
    let raw = collect(
        body,
        decoder,
        state.config.limits.max_response_bytes,
        deadline,
    )
    .await?;
    let mut value: serde_json::Value = serde_json::from_slice(&raw)
        .map_err(|_| Error::UpstreamUnreadable("response is not JSON"))?;
    let calls = complete::extract(&value, state.config.limits.max_tool_args_bytes)?;
    if calls.is_empty() {
        return Ok(Response::from_parts(head, full(Bytes::from(raw))));
    }
    let allowed = release::decide(state, &gates, &ctx, &calls).await;
    if allowed.iter().all(|&a| a) {
        return Ok(Response::from_parts(head, full(Bytes::from(raw))));
    }
    complete::apply(
        &mut value,
        &calls,
        &allowed,
        &state.config.rewrite.neutral_message,
    );
    Ok(Response::from_parts(
        head,
        full(Bytes::from(value.to_string())),
    ))
}

async fn pass(
    state: &Arc<State>,
    req: Request<Incoming>,
    rest: &str,
) -> Result<Response<ProxyBody>, Error> {
    let (parts, body) = req.into_parts();
    let up = state.upstream.request(
        parts.method,
        rest,
        parts.uri.query(),
        &parts.headers,
        body.boxed(),
    )?;
    let deadline = tokio::time::Instant::now() + state.upstream.timeout;
    let resp = state.upstream.send(up).await?;
    let (mut head, body) = resp.into_parts();
    if !head.status.is_success() && !head.status.is_redirection() && !head.status.is_informational()
    {
        return Err(upstream_status(head.status, &head.headers, body, deadline).await);
    }
    strip_hop_by_hop(&mut head.headers);
    Ok(Response::from_parts(
        head,
        body::Deadline::new(body, deadline).boxed(),
    ))
}

/// Redacts and fences the request's tool results; true when the body changed.
/// Requests whose results had secrets or were truncated get an audit record.
async fn fence_tool_results(
    state: &State,
    gates: &crate::gate::Gates,
    ctx: &Context,
    body: &mut serde_json::Value,
) -> Result<bool, Error> {
    if !state.config.fence.enabled {
        return Ok(false);
    }
    let settings = tool_results::Settings {
        secret: &state.fence_secret,
        redactor: &state.redactor,
        policy: gates.policy(),
        max_bytes: state.config.fence.max_tool_result_bytes,
    };
    let report = tool_results::apply(body, &settings);
    state
        .metrics
        .fenced_tool_results
        .fetch_add(report.fenced as u64, std::sync::atomic::Ordering::Relaxed);
    if !report.redactions.is_empty() || report.truncated > 0 {
        state.metrics.redacted(&report.redactions);
        let record = serde_json::json!({
            "ts": crate::audit::now_rfc3339(),
            "request_id": ctx.request_id,
            "principal": ctx.principal,
            "event": "tool_results",
            "fenced": report.fenced,
            "redactions": report.redactions,
            "truncated": report.truncated,
        });
        state.audit.record(&record).await?;
    }
    Ok(report.changed())
}

/// With `hide_denied_tools`, removes the tools the rules deny whatever the
/// arguments; returns their names when the body changed.
fn hidden_tools(
    state: &State,
    gates: &crate::gate::Gates,
    ctx: &Context,
    body: &mut serde_json::Value,
) -> Option<Vec<String>> {
    if !state.config.policy.hide_denied_tools || state.monitor() {
        return None;
    }
    let names: Vec<String> = ctx
        .declared
        .keys()
        .filter(|n| gates.policy_gate.always_denied(n, ctx))
        .cloned()
        .collect();
    hide::remove_tools(body, &names).then_some(names)
}

fn content_length(h: &HeaderMap) -> Option<u64> {
    h.get(header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// An upstream error status; the body is kept (capped) for passthrough mode.
async fn upstream_status(
    status: StatusCode,
    h: &HeaderMap,
    body: Incoming,
    deadline: tokio::time::Instant,
) -> Error {
    let retry_after = h.get(header::RETRY_AFTER).cloned();
    let body = match ContentDecoder::for_headers(h) {
        Ok(dec) => collect(body, dec, MAX_ERROR_BODY, deadline)
            .await
            .map(Bytes::from)
            .unwrap_or_default(),
        Err(_) => Bytes::new(),
    };
    Error::UpstreamStatus {
        status,
        retry_after,
        body,
    }
}

/// Reads a whole upstream body, decoded, up to `limit` bytes and the deadline.
async fn collect(
    mut body: Incoming,
    mut dec: ContentDecoder,
    limit: usize,
    deadline: tokio::time::Instant,
) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(Error::UpstreamTimeout),
            Ok(None) => break,
            Ok(Some(Err(_))) => {
                return Err(Error::UpstreamUnreadable(
                    "upstream connection failed mid-body",
                ))
            }
            Ok(Some(Ok(f))) => {
                if let Ok(d) = f.into_data() {
                    out.extend_from_slice(&dec.decode(&d)?);
                    if out.len() > limit {
                        return Err(Error::UpstreamUnreadable(
                            "response larger than limits.max_response_bytes",
                        ));
                    }
                }
            }
        }
    }
    out.extend(dec.finish()?);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_canonical_path() {
        let post = Method::POST;
        let ok = |p: &str| route(&post, p).ok().map(|r| (r.route, r.rest));
        assert_eq!(
            ok("/v1/chat/completions"),
            Some((Route::Chat, "/chat/completions".into()))
        );
        assert_eq!(
            ok("/v1//chat/completions/"),
            Some((Route::Chat, "/chat/completions".into()))
        );
        assert_eq!(ok("/V1/Chat/Completions").map(|r| r.0), Some(Route::Chat));
        assert_eq!(ok("/chat/completions").map(|r| r.0), Some(Route::Chat));
        assert_eq!(ok("/v1/models"), Some((Route::Pass, "/models".into())));
        let r = route(&post, "/phase/execution/v1/chat/completions").unwrap();
        assert_eq!(
            (r.route, r.rest.as_str(), r.phase.as_deref()),
            (Route::Chat, "/chat/completions", Some("execution"))
        );
        assert!(matches!(
            route(&post, "/phase/exe:cution/v1/chat/completions"),
            Err(Error::BadRequest(_))
        ));
        assert!(matches!(
            route(&post, "/phase/x/v1/responses"),
            Err(Error::UnsupportedEndpoint)
        ));
        for p in [
            "/v1/responses",
            "/v1/responses/resp_1",
            "/v1/messages",
            "/v1/threads/t/runs",
            "/v1/chat/completions/abc",
            "/v1/files/f/content",
            "/v1/v1/chat/completions",
            "/openai/deployments/d/chat/completions",
            "/api/v1/Responses",
        ] {
            assert!(
                matches!(route(&post, p), Err(Error::UnsupportedEndpoint)),
                "{p}"
            );
        }
        for p in [
            "/v1/chat%2Fcompletions",
            "/v1/./chat/completions",
            "/v1/x/../responses",
            "/v1\\chat",
        ] {
            assert!(matches!(route(&post, p), Err(Error::BadRequest(_))), "{p}");
        }
        assert!(matches!(
            route(&Method::GET, "/v1/chat/completions"),
            Err(Error::MethodNotAllowed)
        ));
    }
}
