//! The Conversations API (`/v1/conversations` and its items), served
//! through the gates: a conversation belongs to the principal who opened
//! it; items written into it are read and fenced ([`items::write`]), and
//! become a turn of its history, so that a Responses request naming the
//! conversation is read as though it had come whole; items read from it
//! carry only calls the agent got from toolgate ([`items::read_back`]).

pub mod items;

use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use hyper::body::Incoming;
use serde_json::Value;

use super::{full, reply, upstream_status, ProxyBody, Routed};
use crate::context::Turn;
use crate::error::Error;
use crate::protocol::Protocol;
use crate::proxy::gather;
use crate::proxy::state::conversations::{before_toolgate, Conversation};
use crate::proxy::state::State;

const NOT_FOUND: &str = "Conversation not found.";

/// What a request to the Conversations API is about.
#[derive(Debug, PartialEq, Eq)]
enum Path<'a> {
    /// `POST /conversations`: a new conversation.
    Create,
    /// `/conversations/{id}` (retrieve, update, delete).
    One(&'a str),
    /// `/conversations/{id}/items` (list, or add).
    Items(&'a str),
    /// `/conversations/{id}/items/{item}` (retrieve, delete).
    Item(&'a str),
}

fn path_of(rest: &str) -> Option<Path<'_>> {
    let segs: Vec<&str> = rest.trim_matches('/').split('/').collect();
    match segs[..] {
        [c] if c.eq_ignore_ascii_case("conversations") => Some(Path::Create),
        [_, id] => Some(Path::One(id)),
        [_, id, i] if i.eq_ignore_ascii_case("items") => Some(Path::Items(id)),
        [_, id, i, _] if i.eq_ignore_ascii_case("items") => Some(Path::Item(id)),
        _ => None,
    }
}

/// The record of conversation `id` for a request of `principal`: another
/// principal's is not found; one toolgate has not seen (opened elsewhere,
/// or forgotten) is bound to `principal` from now on, its earlier turns
/// unknown.
pub async fn known(state: &State, id: &str, principal: &str) -> Result<Conversation, Error> {
    match state.conversation(id).await? {
        Some(k) if !k.belongs_to(principal) => Err(Error::NotServed(NOT_FOUND)),
        Some(k) => Ok((*k).clone()),
        None => {
            let k = Conversation {
                owner: principal.to_string(),
                head: Some(before_toolgate(id)),
                open: None,
                turns: 0,
            };
            state.remember_conversation(id, k.clone());
            Ok(k)
        }
    }
}

/// Answers, in a request going on in conversation `id`, the calls
/// withheld from the last response in it (the provider holds them
/// unanswered), once.
pub async fn answer_withheld(
    state: &State,
    protocol: Protocol,
    id: &str,
    k: &Conversation,
    body: &mut Value,
) -> Result<(), Error> {
    let Some(open) = &k.open else {
        return Ok(());
    };
    state.recall_response(open).await?;
    if let Some(calls) = state.withheld_from(open) {
        protocol.answer_withheld(body, &calls, &state.config.rewrite.neutral_message);
    }
    state.remember_conversation(
        id,
        Conversation {
            open: None,
            ..k.clone()
        },
    );
    Ok(())
}

/// Serves one request to the Conversations API.
pub async fn handle(
    state: &Arc<State>,
    parts: http::request::Parts,
    body: Incoming,
    routed: &Routed,
    principal: &str,
    request_id: &str,
) -> Result<Response<ProxyBody>, Error> {
    let path = path_of(&routed.rest).ok_or(Error::UnsupportedEndpoint)?;
    let conversation = match path {
        Path::One(id) | Path::Items(id) | Path::Item(id) => {
            Some((id, known(state, id, principal).await?))
        }
        Path::Create => None,
    };
    let mut charge = state.budget.charge();
    let bytes = gather::agent_body(&state.config.limits, &parts.headers, body, &mut charge).await?;
    let gates = state.gates();
    let (sent, written) = if bytes.is_empty() {
        (Bytes::new(), None)
    } else {
        charge.grow_to(bytes.len() + crate::protocol::tree_cost(&bytes)?)?;
        let mut tree = crate::protocol::request::request_tree(&bytes)?;
        let written = items::write(state, &gates, principal, request_id, &mut tree).await?;
        let sent = serde_json::to_vec(&tree).map_err(|_| Error::Overloaded("memory"))?;
        (Bytes::from(sent), Some(written))
    };
    let upstream = state.upstream_for(routed.route.protocol());
    let up = upstream.request(
        parts.method.clone(),
        &routed.rest,
        parts.uri.query(),
        parts.headers,
        full(sent),
    )?;
    let deadline = tokio::time::Instant::now() + upstream.timeout;
    let resp = Box::pin(upstream.send(up)).await?;
    let (mut head, body) = resp.into_parts();
    if !head.status.is_success() {
        let status = upstream_status(state, head.status, &head.headers, body, deadline);
        return Err(Box::pin(status).await);
    }
    let (decoder, announced) = super::gated::read_head(&mut head, false, &state.scrub)?;
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
    let out = items::read_back(state, principal, request_id, &raw).await?;
    if parts.method == http::Method::POST {
        if let Some(id) = remember(state, principal, request_id, &raw, conversation, written) {
            // Before the agent hears back: its next request may go to
            // another replica.
            state.share_conversation(&id).await;
        }
    }
    let body = out.map(Bytes::from).unwrap_or(raw);
    Ok(Response::from_parts(head, reply(body)))
}

/// After a write the provider took: a new conversation is recorded as the
/// principal's, and the items written become its newest turn. The
/// conversation's id, when it is recorded.
fn remember(
    state: &State,
    principal: &str,
    request_id: &str,
    raw: &[u8],
    conversation: Option<(&str, Conversation)>,
    written: Option<items::Wrote>,
) -> Option<String> {
    let (id, known) = match conversation {
        Some((id, k)) => (id.to_string(), k),
        None => {
            let made = serde_json::from_slice::<Value>(raw)
                .ok()
                .and_then(|v| Some(v.get("id")?.as_str()?.to_string()));
            let id = made?;
            let k = Conversation {
                owner: principal.to_string(),
                head: None,
                open: None,
                turns: 0,
            };
            state.remember_conversation(&id, k.clone());
            (id, k)
        }
    };
    let Some(w) = written.filter(|w| w.items > 0) else {
        return Some(id);
    };
    let turn = format!("{id}#items-{request_id}");
    let t = Turn {
        prev: known.head.clone(),
        texts: w.texts,
        conversation: None,
    };
    state.remember_history(&turn, &t, &[], false);
    state.advance_conversation(&id, &turn, false);
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_says_what_it_is_about() {
        assert_eq!(path_of("conversations"), Some(Path::Create));
        assert_eq!(path_of("/conversations/c1"), Some(Path::One("c1")));
        assert_eq!(path_of("conversations/c1/items"), Some(Path::Items("c1")));
        assert_eq!(path_of("conversations/c1/items/i"), Some(Path::Item("c1")));
        assert_eq!(path_of("conversations/c1/other"), None);
        assert_eq!(path_of("conversations/c1/items/i/x"), None);
    }
}
