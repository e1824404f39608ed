//! MCP servers behind the gates: `[[mcp]]` servers served at `/mcp/{name}`
//! (Streamable HTTP). A `tools/call` is decided by the same policy as the
//! model's calls, under `{name}.{tool}`; a denied one never reaches the
//! server and the agent gets an ordinary tool result with `isError` and the
//! neutral text. The tool list is pinned by digest (`servers.rs`): a tool
//! whose definition changed is hidden and its calls rejected; results are
//! fenced (`messages.rs`). A session is bound to the principal who opened
//! it. The `GET` stream is relayed event by event (`listen.rs`): the
//! server's requests and notifications, never an answer.

pub mod list;
mod listen;
pub(crate) mod messages;
pub mod pins;
pub mod servers;
pub mod stdio;
mod waiting;

use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Value};

use super::gather;
use super::state::State;
use super::{full, reply, ProxyBody, Routed};
use crate::call::Call;
use crate::context::{self, Context, Declared, Texts};
use crate::error::Error;

/// The session header of Streamable HTTP.
const SESSION: &str = "mcp-session-id";
/// Headers of the agent's that go on to the server.
const FORWARDED: [&str; 4] = ["accept", "content-type", SESSION, "mcp-protocol-version"];

/// Serves one request to `/mcp/{name}`.
pub async fn handle(
    state: &Arc<State>,
    parts: http::request::Parts,
    body: Incoming,
    routed: &Routed,
    principal: &str,
    request_id: &str,
) -> Result<Response<ProxyBody>, Error> {
    let name = (routed.rest.rsplit('/').next())
        .filter(|_| routed.rest.matches('/').count() == 2)
        .ok_or(Error::UnsupportedEndpoint)?;
    state.mcp.get(name).ok_or(Error::UnsupportedEndpoint)?;
    let session = parts.headers.get(SESSION).and_then(|v| v.to_str().ok());
    if let Some(id) = session {
        // Another principal's session, or one this replica never saw.
        if !state.mcp.owns(id, name, principal) {
            return Err(Error::NotServed(UNKNOWN_SESSION));
        }
    }
    let session = session.map(str::to_string);
    // A request without a session may open one: within the principal's share.
    if session.is_none() && !state.mcp.may_open(principal) {
        return Err(Error::Overloaded("mcp sessions"));
    }
    let mut charge = state.budget.charge();
    let bytes = gather::agent_body(&state.config.limits, &parts.headers, body, &mut charge).await?;
    let asked = match parts.method {
        Method::POST => Some(read_message(&bytes)?),
        Method::DELETE | Method::GET => None,
        _ => return Err(Error::MethodNotAllowed),
    };
    let is_call = asked.as_ref().and_then(|m| m.get("method")) == Some(&json!("tools/call"));
    let job = Job {
        parts,
        phase: routed.phase.clone(),
        principal: principal.to_string(),
        request_id: request_id.to_string(),
        name: name.to_string(),
        asked,
        session,
        charge,
    };
    // A call whose decision may wait on a person or a judge is answered as
    // an event stream, kept alive while it waits (a client's read timeout
    // is shorter than a person's answer).
    if is_call && accepts_events(&job.parts.headers) && !state.gates().prompt() {
        return Ok(waiting::answer(state.clone(), job));
    }
    serve(state, job).await
}

/// A request, read, and who sent it.
pub(crate) struct Job {
    parts: http::request::Parts,
    phase: Option<String>,
    principal: String,
    request_id: String,
    /// The server's name.
    name: String,
    /// The agent's message (`None` for `GET` and `DELETE`).
    asked: Option<Value>,
    /// The session the agent named, if any.
    session: Option<String>,
    charge: crate::proxy::budget::Charge,
}

/// Whether the agent takes an event stream for an answer.
fn accepts_events(h: &HeaderMap) -> bool {
    h.get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

/// Decides a call, if the message is one, then forwards what may go on.
async fn serve(state: &Arc<State>, mut job: Job) -> Result<Response<ProxyBody>, Error> {
    let server = state.mcp.get(&job.name).ok_or(Error::UnsupportedEndpoint)?;
    if let Some(m) = &job.asked {
        let asker = Asker {
            headers: &job.parts.headers,
            phase: job.phase.as_deref(),
            principal: &job.principal,
            request_id: &job.request_id,
        };
        if let Some(denied) = gate_call(state, &asker, &job.name, m).await? {
            return Ok(json_reply(StatusCode::OK, denied.to_string().into()));
        }
    }
    let on = Exchange {
        state,
        server,
        name: &job.name,
        principal: &job.principal,
        request_id: &job.request_id,
        session: job.session.as_deref(),
    };
    let asked = job.asked.as_ref();
    let is_call = asked.and_then(|m| m.get("method")) == Some(&json!("tools/call"));
    match on.forward(&job.parts, asked, &mut job.charge).await {
        // A server that fails a call answers it with an error result: the
        // agent's turn goes on.
        Err(e) if is_call && e.side() == crate::error::Side::Upstream => {
            tracing::warn!(error = %e, server = job.name, "MCP server failed a tool call");
            let id = asked.and_then(|m| m.get("id")).cloned();
            Ok(json_reply(
                StatusCode::OK,
                error_result(id, FAILED).to_string().into(),
            ))
        }
        r => r,
    }
}

/// What a call the server failed is answered with.
pub(crate) const FAILED: &str = "The tool server did not answer.";

/// A `tools/call` result that is an error, saying `text`.
pub(crate) fn error_result(id: Option<Value>, text: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "result": {"content": [{"type": "text", "text": text}], "isError": true},
    })
}

/// One exchange with a server.
struct Exchange<'a> {
    state: &'a Arc<State>,
    server: &'a servers::Server,
    name: &'a str,
    principal: &'a str,
    request_id: &'a str,
    /// The session the agent named, if any.
    session: Option<&'a str>,
}

impl Exchange<'_> {
    /// Sends the agent's message (what toolgate read of it) on and reads
    /// the server's answer.
    async fn forward(
        &self,
        parts: &http::request::Parts,
        asked: Option<&Value>,
        charge: &mut crate::proxy::budget::Charge,
    ) -> Result<Response<ProxyBody>, Error> {
        let (state, server, name, principal, request_id) = (
            self.state,
            self.server,
            self.name,
            self.principal,
            self.request_id,
        );
        let session = self.session;
        let mut headers = HeaderMap::new();
        for h in FORWARDED {
            if let Some(v) = parts.headers.get(h) {
                headers.insert(h, v.clone());
            }
        }
        if let Some((h, env)) = &server.config.auth {
            let v = std::env::var(env).unwrap_or_default();
            let v = HeaderValue::from_str(&v).map_err(|_| Error::Overloaded("mcp credentials"))?;
            let h = http::HeaderName::from_bytes(h.as_bytes())
                .map_err(|_| Error::Overloaded("mcp credentials"))?;
            headers.insert(h, v);
        }
        // What goes on is what toolgate read.
        let sent = match asked {
            Some(m) => Bytes::from(serde_json::to_vec(m).map_err(|_| Error::Overloaded("memory"))?),
            None => Bytes::new(),
        };
        let up = server
            .client
            .request(parts.method.clone(), "", None, headers, full(sent))?;
        let deadline = tokio::time::Instant::now() + server.config.timeout;
        let resp = tokio::time::timeout_at(deadline, Box::pin(server.client.send(up)))
            .await
            .map_err(|_| Error::UpstreamTimeout)??;
        let (mut head, body) = resp.into_parts();
        if head.status.is_redirection() {
            // A client that followed it would send the agent's message, and
            // read the answer, past the gates.
            return Err(Error::UpstreamUnreadable(
                "an MCP server answered with a redirect",
            ));
        }
        let opened = head.headers.get(SESSION).cloned();
        if let Some(id) = opened.as_ref().and_then(|v| v.to_str().ok()) {
            if session != Some(id) {
                state.mcp.open(id, name, principal);
            }
        }
        if parts.method == Method::DELETE {
            if let Some(id) = session {
                state.mcp.close(id);
            }
        }
        let content_type = (head.headers.get(header::CONTENT_TYPE))
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let sse = content_type.starts_with("text/event-stream");
        let status = head.status;
        if parts.method == Method::GET && status.is_success() && sse {
            // The server's own stream, relayed as it comes.
            let (decoder, _) = super::gated::read_head(&mut head, true, &state.scrub)?;
            let who = listen::Listener {
                server: name.to_string(),
                principal: principal.to_string(),
                request_id: request_id.to_string(),
            };
            let body = listen::relay(state.clone(), who, body, decoder);
            let mut resp = Response::from_parts(head, body);
            if let Some(v) = opened {
                resp.headers_mut().insert(SESSION, v);
            }
            return Ok(resp);
        }
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return Ok(Response::builder()
                .status(status)
                .body(reply(Bytes::new()))
                .unwrap_or_default());
        }
        let (decoder, announced) =
            super::gated::read_head(&mut head, sse, &state.scrub).or_else(|e| {
                if status.is_success() {
                    Err(e)
                } else {
                    super::gated::read_head(&mut head, false, &state.scrub).or(Err(e))
                }
            })?;
        let raw = gather::response(
            body,
            decoder,
            announced,
            state.config.limits.max_response_bytes,
            deadline,
            charge,
        )
        .await?;
        let raw = state.scrub.bytes(raw);
        let gates = state.gates();
        let out = match (asked, status.is_success()) {
            (Some(m), true) => {
                let answer = messages::Answer::new(state, &gates, name, request_id, principal, m);
                match sse {
                    true => answer.stream(&raw).await?,
                    false => answer.whole(&raw).await?,
                }
            }
            // The server's own errors (an expired session, a bad request) pass.
            _ => raw,
        };
        let mut resp = Response::from_parts(head, reply(out));
        if let Some(v) = opened {
            resp.headers_mut().insert(SESSION, v);
        }
        Ok(resp)
    }
}

/// What an unknown session is told (as a server tells it).
const UNKNOWN_SESSION: &str = "Session not found.";

/// The agent's message: one JSON-RPC object (batches are not served: the
/// protocol dropped them, and each call must be answered on its own).
fn read_message(bytes: &[u8]) -> Result<Value, Error> {
    let v = crate::json::strict_value(bytes)
        .map_err(|e| Error::BadRequest(format!("The message is not valid JSON: {e}")))?;
    match v {
        Value::Object(_) => Ok(v),
        Value::Array(_) => Err(Error::BadRequest("JSON-RPC batches are not served.".into())),
        _ => Err(Error::BadRequest(
            "The message must be a JSON-RPC object.".into(),
        )),
    }
}

fn json_reply(status: StatusCode, body: Bytes) -> Response<ProxyBody> {
    let mut r = Response::new(reply(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// Decides a `tools/call`: `None` when it may go to the server, else the
/// answer the agent gets instead (an error result with the neutral text).
/// Who asks, and how: what a call is decided with besides itself.
pub(crate) struct Asker<'a> {
    pub headers: &'a HeaderMap,
    /// The phase the path named (`/phase/{name}/…`), if any.
    pub phase: Option<&'a str>,
    pub principal: &'a str,
    pub request_id: &'a str,
}

pub(crate) async fn gate_call(
    state: &State,
    asker: &Asker<'_>,
    server: &str,
    m: &Value,
) -> Result<Option<Value>, Error> {
    let (headers, principal, request_id) = (asker.headers, asker.principal, asker.request_id);
    if m.get("method").and_then(Value::as_str) != Some("tools/call") {
        return Ok(None);
    }
    let id = m.get("id").cloned().unwrap_or(Value::Null);
    let params = m.get("params").and_then(Value::as_object);
    let tool = params
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| Error::BadRequest("tools/call has no tool name.".into()))?;
    let arguments = match params.and_then(|p| p.get("arguments")) {
        None | Some(Value::Null) => "{}".to_string(),
        Some(a @ Value::Object(_)) => a.to_string(),
        Some(_) => {
            return Err(Error::BadRequest(
                "tools/call arguments must be an object.".into(),
            ))
        }
    };
    let full_name = format!("{server}.{tool}");
    let mut ctx = Context {
        request_id: request_id.to_string(),
        principal: principal.to_string(),
        protocol: "mcp",
        ..Context::default()
    };
    // A tool pinned and unchanged counts as declared; a changed one is
    // declared with its pinned schema, and only a rule that reads
    // `tool.definition_changed` may release it (or ask about it).
    match state.mcp.standing(server, tool) {
        Some(servers::Standing::Current(schema)) => {
            ctx.declared
                .insert(full_name.clone(), Declared::new(schema.as_ref()));
        }
        Some(servers::Standing::Changed(schema)) => {
            ctx.declared
                .insert(full_name.clone(), Declared::new(schema.as_ref()));
            ctx.redefined.push(full_name.clone());
            ctx.pin_changed = true;
        }
        None => {}
    }
    let default_phase = state.config.policy.default_phase.as_deref();
    context::fill(
        &mut ctx,
        headers,
        asker.phase,
        default_phase,
        Texts::default(),
    );
    let max = state.config.limits.max_tool_args_bytes;
    let mut call = Call {
        id: id.to_string().chars().take(128).collect(),
        name: full_name,
        arguments,
        ..Call::default()
    };
    if call.arguments.len() > max {
        call.arguments = String::new();
        call.oversized = true;
    }
    let gates = state.gates();
    let verdicts = super::release::decide(state, &gates, &ctx, std::slice::from_ref(&call)).await;
    if crate::call::Release::at(&verdicts, 0).allowed() {
        return Ok(None);
    }
    let neutral = &state.config.rewrite.neutral_message;
    Ok(Some(json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"content": [{"type": "text", "text": neutral.as_ref() as &str}], "isError": true},
    })))
}
