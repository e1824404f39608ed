//! `rewrite = "resume"`: the follow-up requests toolgate makes itself when
//! every call of a response was withheld, so the model (not the agent)
//! absorbs the failure and goes on in the same response.
//!
//! A follow-up is the last request that went upstream plus the turn the
//! protocol writes ([`Resumption`]), sent with the agent's own headers (its
//! credentials replaced as for any request), audited (`event = "resume"`)
//! and counted. Its response is gated like any other.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method};
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use crate::context::Context;
use crate::error::Error;
use crate::gate::Gates;
use crate::protocol::{Protocol, Resumption};
use crate::proxy::budget::Charge;
use crate::proxy::complete;
use crate::proxy::gather;
use crate::proxy::state::State;
use crate::upstream::encoding::ContentDecoder;
use crate::upstream::ResponseBody;

/// What a response needs to make its follow-ups.
pub struct FollowUp {
    pub protocol: Protocol,
    pub method: Method,
    pub rest: String,
    pub query: Option<String>,
    /// The agent's headers (credentials are replaced as for its request).
    pub headers: HeaderMap,
    /// What went upstream last: the agent's request as gated, or the last follow-up.
    pub body: Bytes,
    pub stream: bool,
    /// Follow-ups made so far, and at most.
    pub made: u32,
    pub max: u32,
}

impl FollowUp {
    /// Whether another follow-up may be made.
    pub fn left(&self) -> bool {
        self.made < self.max
    }
}

/// An upstream response to gate, its head checked against the request.
pub struct Sent {
    pub body: ResponseBody,
    pub decoder: ContentDecoder,
    pub announced: Option<u64>,
    pub deadline: tokio::time::Instant,
    /// The context its calls are decided in.
    pub ctx: Arc<Context>,
    /// The facts of the thread the answer belongs to (a Messages thread),
    /// remembered under the answer's id.
    pub thread: Option<crate::proxy::threads::Shared>,
    /// This request's turn of the conversation, remembered under the
    /// answer's id with the calls decided in it (a stored response, a
    /// thread).
    pub history: Option<Arc<crate::context::Turn>>,
}

pub type Sending = Pin<Box<dyn Future<Output = (FollowUp, Result<Sent, Error>)> + Send>>;

/// Makes the next follow-up for `r`; the [`FollowUp`] comes back with it.
pub fn send(state: Arc<State>, ctx: Arc<Context>, mut f: FollowUp, r: Resumption) -> Sending {
    Box::pin(async move {
        let sent = make(&state, &ctx, &mut f, &r).await;
        if let Err(e) = &sent {
            state.metrics.resume_failures.inc();
            tracing::warn!(request_id = %ctx.request_id, error = %e, "follow-up failed; the response ends with the neutral text");
        }
        (f, sent)
    })
}

async fn make(
    state: &State,
    ctx: &Context,
    f: &mut FollowUp,
    r: &Resumption,
) -> Result<Sent, Error> {
    f.made += 1;
    state.metrics.resumes.inc();
    let record = serde_json::json!({
        "ts": crate::digest::now_rfc3339(),
        "request_id": ctx.request_id,
        "principal": ctx.principal,
        "protocol": ctx.protocol,
        "event": "resume",
        "resume": f.made,
        "withheld": r.turn.len().saturating_sub(1),
        "hidden_tools": r.denied.len(),
    });
    state.audit.record(&record).await?;
    let mut body: Value = serde_json::from_slice(&f.body)
        .map_err(|_| Error::UpstreamUnreadable("the request could not be read again"))?;
    f.protocol.follow_up(&mut body, r)?;
    f.body = Bytes::from(
        serde_json::to_vec(&body)
            .map_err(|_| Error::UpstreamUnreadable("the follow-up could not be written"))?,
    );
    let upstream = state.upstream_for(f.protocol);
    let req = upstream.request(
        f.method.clone(),
        &f.rest,
        f.query.as_deref(),
        f.headers.clone(),
        Full::new(f.body.clone())
            .map_err(|never| match never {})
            .boxed(),
    )?;
    let deadline = tokio::time::Instant::now() + upstream.timeout;
    let resp = upstream.send(req).await?;
    let (mut head, body) = resp.into_parts();
    if !head.status.is_success() {
        return Err(Error::UpstreamUnreadable("the follow-up was refused"));
    }
    let (decoder, announced) = crate::proxy::read_head(&mut head, f.stream, &state.scrub)?;
    let mut next = ctx.clone();
    next.resume = f.made;
    next.upstream_request_id = crate::proxy::provider_request_id(&head.headers);
    for name in &r.denied {
        next.declared.remove(name);
    }
    Ok(Sent {
        body,
        decoder,
        announced,
        deadline,
        ctx: Arc::new(next),
        thread: None,
        history: None,
    })
}

/// The drop rewrite of a whole body, as one piece.
pub fn concat(pieces: Vec<Bytes>) -> Bytes {
    match <[Bytes; 1]>::try_from(pieces) {
        Ok([one]) => one,
        Err(pieces) => Bytes::from(pieces.concat()),
    }
}

/// A whole (non-streamed) body whose calls were all withheld for resume:
/// follow-ups until a response has something to release or none is left.
/// `dropped` is the first body as `drop` rewrote it, sent when the first
/// follow-up fails. Never an error: a failed follow-up ends the response
/// with the neutral text.
#[allow(clippy::too_many_arguments)]
pub async fn whole(
    state: &Arc<State>,
    gates: &Gates,
    ctx: &Arc<Context>,
    mut f: FollowUp,
    first: &[u8],
    r: Resumption,
    dropped: Bytes,
    charge: &mut Charge,
) -> Bytes {
    let protocol = f.protocol;
    let first: Value = serde_json::from_slice(first).unwrap_or(Value::Null);
    // The id the agent knows the response by (a stored Responses
    // response), as its codec read it: each follow-up continues it.
    let first_id = r.previous.clone();
    let (mut before, mut pending, mut fallback) = (Vec::new(), r, dropped);
    let max = state.config.limits.max_response_bytes;
    loop {
        let (back, sent) = send(state.clone(), ctx.clone(), f, pending.clone()).await;
        f = back;
        let Ok(sent) = sent else {
            unanswered(state, &pending);
            return joined(protocol, &first, &before, &fallback);
        };
        let read = gather::response(
            sent.body,
            sent.decoder,
            sent.announced,
            max,
            sent.deadline,
            charge,
        )
        .await;
        let round = match read.map(|next| state.scrub.bytes(next)) {
            Ok(next) => complete::gate(state, gates, &sent.ctx, protocol, &next, f.left()).await,
            Err(e) => Err(e),
        };
        let round = match round {
            Ok(r) => r,
            Err(e) => {
                state.metrics.resume_failures.inc();
                tracing::warn!(request_id = %ctx.request_id, error = %e, "follow-up unreadable; the response ends with the neutral text");
                unanswered(state, &pending);
                return joined(protocol, &first, &before, &fallback);
            }
        };
        before.push(pending);
        if let (Some(first), Some(then)) = (&first_id, round.id) {
            state.remember_renamed(first.clone(), then);
        }
        let body = concat(round.pieces);
        match round.again {
            Some(r) => (pending, fallback) = (r, body),
            None => return joined(protocol, &first, &before, &body),
        }
    }
}

/// A stored response whose follow-up failed still holds its calls: they are
/// answered when the agent continues from it, as withheld calls are.
fn unanswered(state: &State, r: &Resumption) {
    if let Some(w) = r.unanswered() {
        state.remember_withheld(w);
    }
}

/// `body` continuing `first` after the responses in `before`.
fn joined(protocol: Protocol, first: &Value, before: &[Resumption], body: &[u8]) -> Bytes {
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return Bytes::copy_from_slice(body);
    };
    protocol.join(first, before, &mut v);
    serde_json::to_vec(&v).map_or_else(|_| Bytes::copy_from_slice(body), Bytes::from)
}
