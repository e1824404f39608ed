//! The one place the phase order of a request is written.
//!
//! 1. route: chat completions are gated; a short allow-list of endpoints that
//!    cannot return tool calls passes through; everything else is a 404;
//! 2. chat: read the body (size-capped) → parse → context → upstream;
//! 3. response: error status → generic error; the body's reader is chosen by
//!    what the request asked for (`stream`) and must match what arrived:
//!    SSE → gated stream, JSON → gated body, anything else → 502.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{header, HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use crate::auth;
use crate::body;
use crate::budget::Charge;
use crate::encoding::ContentDecoder;
use crate::error::Error;
use crate::gather::{self, content_length};
use crate::release;
use crate::request::{self, context, hide, tool_results, Context};
use crate::state::State;
use crate::upstream::strip_hop_by_hop;
use crate::wire::complete;
use crate::wire::json::Spliced;

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

/// The endpoints that pass through ungated: `(method, path)` after `/v1`,
/// each segment matched exactly (ASCII case aside); `*` is one or more
/// further segments. None of them can return a tool call. Every other path is
/// refused with a 404, so no spelling (`;x`, `.json`, `:suffix`, a new API)
/// reaches the provider ungated.
const PASS: [(&str, &str); 13] = [
    ("GET", "models"),
    ("GET", "models/*"),
    ("POST", "embeddings"),
    ("POST", "moderations"),
    ("POST", "completions"),
    ("POST", "audio/speech"),
    ("POST", "audio/transcriptions"),
    ("POST", "audio/translations"),
    ("POST", "images/generations"),
    ("POST", "images/edits"),
    ("POST", "images/variations"),
    ("GET", "files"),
    ("HEAD", "models"),
];

fn passes(method: &Method, segs: &[String]) -> bool {
    PASS.iter().any(|(m, pattern)| {
        if method.as_str() != *m {
            return false;
        }
        let pat: Vec<&str> = pattern.split('/').collect();
        match pat.split_last() {
            Some((&"*", head)) => {
                segs.len() > head.len() && head.iter().zip(segs).all(|(p, s)| p == s)
            }
            _ => pat.len() == segs.len() && pat.iter().zip(segs).all(|(p, s)| p == s),
        }
    })
}

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
    if !passes(method, &lower) {
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
    let mut charge = state.budget.charge();
    let announced = content_length(&parts.headers);
    let bytes = gather::request(body, announced, limit, &mut charge).await?;
    // The parsed tree is charged too, before it is built.
    charge.grow_to(bytes.len() + request::tree_cost(&bytes)?)?;
    let mut chat = request::parse_chat(&bytes)?;
    let size = bytes.len();
    // From here on only the parsed request exists: what goes upstream is
    // written from it, so the provider reads exactly what toolgate read (a
    // repeated key, say, cannot show it something the gates never saw), and
    // the original bytes are not held beside the tree.
    drop(bytes);
    let mut ctx = Context {
        request_id: state.request_id(),
        principal,
        declared: std::mem::take(&mut chat.declared),
        ..Context::default()
    };
    let default_phase = state.config.policy.default_phase.as_deref();
    let gates = state.gates();
    context::fill(
        &mut ctx,
        &parts.headers,
        routed.phase.as_deref(),
        default_phase,
        &chat.body,
        gates.policy().reads("provenance"),
    );
    fence_tool_results(state, &gates, &ctx, &mut chat.body).await?;
    let hidden = hidden_tools(state, &gates, &ctx, &mut chat.body);
    for name in hidden.iter().flatten() {
        ctx.declared.remove(name);
    }
    let body = gather::json_body(&chat.body, size)?;
    drop(chat.body);
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
    let announced = content_length(&head.headers);
    strip_hop_by_hop(&mut head.headers);
    head.headers.remove(header::CONTENT_LENGTH);
    head.headers.remove(header::CONTENT_ENCODING);
    let is_sse = content_type.starts_with("text/event-stream");
    if chat.stream != is_sse || (!is_sse && !is_json(&content_type)) {
        return Err(Error::UpstreamUnreadable(
            "the response's content type does not match the request",
        ));
    }
    if is_sse {
        let b = body::gated_stream(state.clone(), gates, ctx, body, decoder, deadline);
        return Ok(Response::from_parts(
            head,
            b.map_err(|never| match never {}).boxed(),
        ));
    }
    let raw = gather::response(
        body,
        decoder,
        announced,
        state.config.limits.max_response_bytes,
        deadline,
        &mut charge,
    )
    .await?;
    let text = std::str::from_utf8(&raw)
        .map_err(|_| Error::UpstreamUnreadable("response is not UTF-8"))?;
    let mut parsed = complete::Completion::parse(text, state.config.limits.max_tool_args_bytes)?;
    if parsed.calls().is_empty() {
        return Ok(Response::from_parts(head, full(raw.clone())));
    }
    let allowed = release::decide(state, &gates, &ctx, parsed.calls()).await;
    parsed.forget_calls();
    // The rewrite is new text and slices of the original: no second copy.
    let mut out = Spliced::new(text, &raw);
    if !parsed.rewrite(&allowed, &state.config.rewrite.neutral_message, &mut out) {
        return Ok(Response::from_parts(head, full(raw.clone())));
    }
    let pieces = out.finish();
    Ok(Response::from_parts(
        head,
        body::Pieces::new(pieces).boxed(),
    ))
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

/// Redacts and fences the request's tool results in place. Requests whose
/// results had secrets or were truncated get an audit record.
async fn fence_tool_results(
    state: &State,
    gates: &crate::gate::Gates,
    ctx: &Context,
    body: &mut serde_json::Value,
) -> Result<(), Error> {
    if !state.config.fence.enabled {
        return Ok(());
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
    Ok(())
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

/// An upstream error status; the body is kept (capped) for passthrough mode.
async fn upstream_status(
    status: StatusCode,
    h: &HeaderMap,
    body: Incoming,
    deadline: tokio::time::Instant,
) -> Error {
    let retry_after = h.get(header::RETRY_AFTER).cloned();
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
    Error::UpstreamStatus {
        status,
        retry_after,
        body,
    }
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
        let get = |p: &str| route(&Method::GET, p).ok().map(|r| (r.route, r.rest));
        assert_eq!(get("/v1/models"), Some((Route::Pass, "/models".into())));
        assert_eq!(
            get("/v1/models/openai/gpt-4.1:free").map(|r| r.0),
            Some(Route::Pass)
        );
        assert_eq!(ok("/v1/embeddings").map(|r| r.0), Some(Route::Pass));
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
            "/v1/chat/completions;",
            "/v1/chat;x/completions",
            "/v1/chat/completions.json",
            "/v1/chat/completions:stream",
            "/v1/responses;",
            "/v1/embeddings;x",
            "/v1/embeddings.json",
            "/v1/models",
            "/v1/something-new",
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
