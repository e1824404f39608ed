//! A gated request, whatever its protocol: read → parse → context → fence →
//! hide → upstream → the protocol's stream or whole-body rewriter.

use std::sync::Arc;
use std::time::Instant;

use http::{header, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;

use super::{full, is_json, reply, upstream_status, ProxyBody, Routed};
use crate::context::{self, Context};
use crate::error::Error;
use crate::fence;
use crate::gate::Gates;
use crate::policy::RewriteMode;
use crate::protocol::{tree_cost, Held, Parsed, Protocol};
use crate::proxy::body;
use crate::proxy::complete;
use crate::proxy::conversations;
use crate::proxy::gather::{self, content_length};
use crate::proxy::resume::{self, FollowUp, Sent};
use crate::proxy::state::State;
use crate::proxy::threads::Facts;
use crate::upstream::encoding::ContentDecoder;

/// Gates one request; `asker` holds the request's own part of the gates'
/// context (id, principal, verdict tally, trace span).
///
/// This future is boxed per request and lives until the response head is
/// returned (while a whole response's calls wait for a person, until they
/// are answered); what is large and seldom needed in it is boxed (the
/// context, a follow-up, the error and resume paths). At 7 KiB it shared
/// the allocator's 8 KiB pages with the buffers each open connection keeps,
/// and a burst of requests left those pages part-used.
///
/// An `async move` block, not an `async fn`, for the reason `proxy::handle`
/// is one.
#[allow(clippy::manual_async_fn)] // see the doc
pub fn handle<'a>(
    state: &'a Arc<State>,
    parts: http::request::Parts,
    body: Incoming,
    routed: &'a Routed,
    protocol: Protocol,
    asker: Box<Context>,
) -> impl std::future::Future<Output = Result<Response<ProxyBody>, Error>> + Send + 'a {
    async move {
        let mut charge = state.budget.charge();
        let bytes =
            gather::agent_body(&state.config.limits, &parts.headers, body, &mut charge).await?;
        // The parsed tree is charged too, before it is built.
        charge.grow_to(bytes.len() + tree_cost(&bytes)?)?;
        let mut req = protocol.parse(&bytes)?;
        protocol
            .codec()
            .read_path(&mut req, &routed.rest, parts.uri.query())?;
        let model = req.model.as_deref();
        if let Some(t) = &asker.trace {
            t.chat(model);
        }
        if let Some(x) = &asker.exchange {
            x.requested(model, req.stream);
        }
        let size = bytes.len();
        // From here on only the parsed request exists: what goes upstream is
        // written from it, so the provider reads exactly what toolgate read (a
        // repeated key, say, cannot show it something the gates never saw), and
        // the original bytes are not held beside the tree.
        drop(bytes);
        let mut ctx = asker;
        ctx.protocol = protocol.label();
        ctx.declared = std::mem::take(&mut req.declared);
        // A thread's continue declares nothing: the thread's facts stand in.
        let held = protocol.held(&req.body);
        let by_reference_later = protocol.continued_by_reference(&req.body);
        let continued = match &held {
            Held::From(prev) => {
                // This replica's record, or another replica's.
                let facts = state.thread(prev).await?;
                // Another client's, or an id the provider gave to two threads.
                Some(
                    facts
                        .filter(|f| f.belongs_to(&ctx.principal))
                        .ok_or(Error::ThreadNotFound)?,
                )
            }
            Held::Not | Held::New => None,
        };
        ctx.structured_output = req.structured_output;
        let gates = state.gates();
        let policy = gates.policy();
        let texts =
            protocol.texts_and_calls(&req.body, policy.reading.texts, policy.reading.pointed);
        // A conversation sent by reference is read as though it had come
        // whole: the earlier turns' texts this replica remembers, then the
        // request's own; when it remembers none, the signals say so.
        let conversation = protocol.conversation(&req.body)?;
        let known = match &conversation {
            Some(c) => Some(conversations::known(state, c, &ctx.principal).await?),
            None => None,
        };
        let prev = match &known {
            Some(k) => k.head.clone(),
            None => protocol.stored_from(&req.body),
        };
        // What a follow-up by reference will continue from: this turn,
        // linked to the one before.
        let history = by_reference_later.then(|| {
            Arc::new(crate::context::Turn {
                prev: prev.clone(),
                texts: texts.clone(),
                conversation: conversation.clone(),
            })
        });
        let texts = match prev {
            Some(prev) => match state.history(&prev).await? {
                Some(earlier) => texts.after(&earlier),
                None => {
                    ctx.history_incomplete = true;
                    texts
                }
            },
            None => texts,
        };
        let default_phase = state.config.policy.default_phase.as_deref();
        context::fill(
            &mut ctx,
            &parts.headers,
            routed.phase.as_deref(),
            default_phase,
            texts,
        );
        if let Some(facts) = &continued {
            facts.continue_in(&mut ctx, &parts.headers);
        }
        super::definitions::note(state, policy, &mut ctx, protocol, &req.body).await?;
        fence_tool_results(state, &gates, &ctx, protocol, &mut req.body).await?;
        // After the fence: these answers are toolgate's own, not a tool's output.
        state.recall(protocol, &req.body).await?;
        protocol.continue_stored(
            &mut req.body,
            &**state,
            &state.config.rewrite.neutral_message,
        );
        if let (Some(c), Some(k)) = (&conversation, &known) {
            conversations::answer_withheld(state, protocol, c, k, &mut req.body).await?;
        }
        hide_tools(state, &gates, &mut ctx, protocol, &mut req)?;
        let body = protocol.write_request(&req.body, &mut ctx.declared, |marks| {
            gather::json_body(&req.body, size, marks)
        })?;
        let thread = match held {
            Held::Not => None,
            Held::New => Some(Arc::new(Facts::of(&ctx))),
            Held::From(_) => continued,
        };
        // A held conversation is not continued by follow-ups: its withheld
        // calls are answered on the agent's next request instead.
        // Nor is one the provider holds as a conversation.
        let resumes = thread.is_none()
            && conversation.is_none()
            && req.choices <= 1
            && protocol.codec().resumes()
            && resumable(state, &gates);
        let mut follow = resumes.then(|| {
            Box::new(FollowUp {
                protocol,
                method: parts.method.clone(),
                rest: routed.rest.clone(),
                query: parts.uri.query().map(str::to_string),
                headers: parts.headers.clone(),
                body: body.clone(),
                stream: req.stream,
                made: 0,
                max: state.config.rewrite.max_resumes,
            })
        });
        drop(req.body);
        let upstream = state.upstream_for(protocol);
        if let Some(t) = &ctx.trace {
            t.server(upstream.server());
        }
        let up = upstream.request(
            parts.method,
            &routed.rest,
            parts.uri.query(),
            parts.headers,
            full(body),
        )?;
        let sent = Instant::now();
        let deadline = tokio::time::Instant::now() + upstream.timeout;
        let resp = Box::pin(upstream.send(up)).await?;
        state.metrics.genai.upstream_took(
            protocol.upstream_section().unwrap_or("default"),
            protocol.label(),
            sent.elapsed().as_secs_f64(),
        );
        let (mut head, body) = resp.into_parts();
        if !head.status.is_success() {
            let status = upstream_status(state, head.status, &head.headers, body, deadline);
            return Err(Box::pin(status).await);
        }
        let (decoder, announced) = read_head(&mut head, req.stream, &state.scrub)?;
        ctx.upstream_request_id = super::provider_request_id(&head.headers);
        let ctx: Arc<Context> = Arc::from(ctx);
        if req.stream {
            let sent = Sent {
                body,
                decoder,
                announced,
                deadline,
                ctx,
                thread,
                history,
            };
            let b = body::gated_stream(protocol, state.clone(), gates, sent, follow.take());
            return Ok(Response::from_parts(
                head,
                b.map_err(|never| match never {}).boxed_unsync(),
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
        let raw = state.scrub.bytes(raw);
        let more = follow.as_ref().is_some_and(|f| f.left());
        let round = complete::gate(state, &gates, &ctx, protocol, &raw, more).await?;
        if let (Some(facts), Some(id)) = (thread, &round.id) {
            state.remember_thread(id.clone(), facts);
        }
        if let (Some(h), Some(id)) = (&history, &round.id) {
            let decided = ctx.decided.lock().map(|d| d.clone()).unwrap_or_default();
            state.remember_history(id, h, &decided, ctx.read_in_answer());
            // Before the agent hears back: its next request may go to
            // another replica.
            if let Some(c) = &conversation {
                state.share_conversation(c).await;
            }
        }
        let body = match (round.again, follow) {
            (Some(r), Some(f)) => {
                let dropped = resume::concat(round.pieces);
                Box::pin(resume::whole(
                    state,
                    &gates,
                    &ctx,
                    *f,
                    &raw,
                    r,
                    dropped,
                    &mut charge,
                ))
                .await
            }
            _ if !round.changed => return Ok(Response::from_parts(head, reply(raw))),
            _ => {
                return Ok(Response::from_parts(
                    head,
                    body::Pieces::new(round.pieces).boxed_unsync(),
                ))
            }
        };
        Ok(Response::from_parts(head, reply(body)))
    }
}

/// Checks a successful upstream head against the request (an event stream
/// when it streams, JSON otherwise) and readies it for the agent: the body's
/// decoder and announced length; hop-by-hop, length and encoding headers go.
pub(crate) fn read_head(
    head: &mut http::response::Parts,
    stream: bool,
    scrub: &crate::upstream::scrub::Scrub,
) -> Result<(ContentDecoder, Option<u64>), Error> {
    let decoder = ContentDecoder::for_headers(&head.headers)?;
    let content_type = head
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let announced = content_length(&head.headers);
    // Only the allowed headers go on (which leaves out hop-by-hop, length and
    // encoding headers: the body is written anew).
    scrub.headers(&mut head.headers, &[]);
    let is_sse = content_type.starts_with("text/event-stream");
    if stream != is_sse || (!is_sse && !is_json(&content_type)) {
        return Err(Error::UpstreamUnreadable(
            "the response's content type does not match the request",
        ));
    }
    Ok((decoder, announced))
}

/// Whether a response may be continued by follow-ups (`rewrite =
/// "resume"` somewhere, follow-ups allowed; the caller checks that one
/// choice is asked for).
fn resumable(state: &State, gates: &Gates) -> bool {
    let wanted = state.config.rewrite.mode == RewriteMode::Resume
        || gates
            .policy()
            .rules
            .iter()
            .any(|r| r.rewrite == Some(RewriteMode::Resume));
    wanted && state.config.rewrite.max_resumes > 0 && !state.monitor()
}

/// Redacts and fences the request's tool results in place. Requests whose
/// results had secrets or were truncated get an audit record.
async fn fence_tool_results(
    state: &State,
    gates: &Gates,
    ctx: &Context,
    protocol: Protocol,
    body: &mut Value,
) -> Result<(), Error> {
    if !state.config.fence.enabled {
        return Ok(());
    }
    let settings = fence_settings(state, gates, known_digests(ctx));
    let report = protocol.fence(body, &settings, !ctx.declared.is_empty());
    fenced(
        state,
        (&ctx.request_id, &ctx.principal, ctx.protocol),
        &report,
    )
    .await
}

/// How this deployment fences tool results, with the digests of the
/// results already hashed.
pub(super) fn fence_settings<'a>(
    state: &'a State,
    gates: &'a Gates,
    digests: fence::kept::Digests<'a>,
) -> fence::Settings<'a> {
    fence::Settings {
        secret: &state.fence_secret,
        redactor: &state.redactor,
        policy: gates.policy(),
        max_bytes: state.config.fence.max_tool_result_bytes,
        kept: Some(&state.fenced),
        digests,
    }
}

/// Counts what fencing did to a request's tool results, and audits
/// (`event: "tool_results"`) the requests whose results had secrets or
/// were cut: `(request id, principal, protocol)`.
pub(super) async fn fenced(
    state: &State,
    (request_id, principal, protocol): (&str, &str, &str),
    report: &fence::Fenced,
) -> Result<(), Error> {
    state
        .metrics
        .fenced_tool_results
        .inc_by(report.fenced as u64);
    if !report.redactions.is_empty() || report.truncated > 0 {
        state.metrics.redacted(&report.redactions);
        let record = serde_json::json!({
            "ts": crate::digest::now_rfc3339(),
            "request_id": request_id,
            "principal": principal,
            "protocol": protocol,
            "event": "tool_results",
            "fenced": report.fenced,
            "redactions": report.redactions,
            "truncated": report.truncated,
        });
        state.audit.record(&record).await?;
    }
    Ok(())
}

/// The digests of the tool results the context holds (hashed once per
/// request for the injection scan, made here when not yet), for the fence
/// to find its remembered results by without hashing them again.
fn known_digests(ctx: &Context) -> fence::kept::Digests<'_> {
    let texts = ctx.tool_results.iter().zip(ctx.result_keys());
    fence::kept::Digests::new(
        texts
            .filter_map(|((range, id), key)| {
                Some((id.as_str(), ctx.tool_text.get(range.clone())?, *key))
            })
            .collect(),
    )
}

/// Tools the rules deny whatever the arguments. With `hide_denied_tools`
/// they are removed from the request. A denied tool the provider runs itself
/// (`hosted`: its calls never pass toolgate), or one denied under another
/// name it is known by (`aliases`), is removed too, and without
/// `hide_denied_tools` the request is refused. A provider-run tool that needs
/// an explicit allow (an MCP server) and has none refuses the request.
fn hide_tools(
    state: &State,
    gates: &Gates,
    ctx: &mut Context,
    protocol: Protocol,
    req: &mut Parsed,
) -> Result<(), Error> {
    if state.monitor() {
        return Ok(());
    }
    let policy = &gates.policy_gate;
    if let Some(name) = req
        .explicit
        .iter()
        .find(|n| !policy.explicitly_allowed(n, ctx))
    {
        let what = name.strip_prefix("mcp.").unwrap_or(name);
        return Err(Error::BadRequest(format!(
            "MCP server '{what}' is not available."
        )));
    }
    let hide = state.config.policy.hide_denied_tools;
    let mut names: Vec<String> = ctx
        .declared
        .keys()
        .filter(|n| hide || req.hosted.contains(n))
        .filter(|n| policy.always_denied(n, ctx))
        .cloned()
        .collect();
    // A tool denied under another name it is known by goes too (with or
    // without `hide_denied_tools`: its type names no call to gate).
    names.extend(
        req.aliases
            .iter()
            .filter(|(alias, _)| policy.always_denied(alias, ctx))
            .map(|(_, name)| name.clone()),
    );
    if names.is_empty() {
        return Ok(());
    }
    names.sort();
    names.dedup();
    if !hide {
        return Err(Error::BadRequest(format!(
            "Tool '{}' is not available.",
            names[0]
        )));
    }
    if protocol.hide(&mut req.body, &names) {
        for name in &names {
            ctx.declared.remove(name);
        }
    }
    Ok(())
}
