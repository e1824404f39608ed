//! What carries over from a response to the requests after it: the
//! [`Resumption`] a `resume` follow-up is made from, and the calls
//! [`Withheld`] from a stored response, which toolgate keeps ([`Stored`]).

use serde_json::Value;

use crate::error::Error;

/// A response whose calls were all withheld for `resume`: what the
/// follow-up request adds to the conversation, and what the agent was not
/// sent of the response so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resumption {
    /// Appended to the conversation (`messages`, or `input`): the assistant
    /// turn with the withheld calls, then a neutral result for each.
    pub turn: Vec<Value>,
    /// Tools of `deny`ed calls: removed from the follow-up's `tools`.
    pub denied: Vec<String>,
    /// The response's text before its calls (whole chat bodies), joined to
    /// the continuation's.
    pub text: Option<String>,
    /// The response's other blocks (whole Messages bodies), put before the
    /// continuation's.
    pub blocks: Vec<Value>,
    /// The response's token usage, added to the continuation's.
    pub usage: Option<Value>,
    /// The response's id, when the provider stores it (Responses): the
    /// follow-up continues from it.
    pub previous: Option<String>,
}

impl Resumption {
    /// The calls of a stored response whose follow-up failed: they are
    /// answered when the agent continues from it, as withheld calls are.
    pub fn unanswered(&self) -> Option<Withheld> {
        let id = self.previous.as_ref()?;
        let calls = self
            .turn
            .iter()
            .filter(|i| i["type"] == "function_call")
            .filter_map(|i| {
                Some((
                    i["call_id"].as_str()?.to_string(),
                    "function_call".to_string(),
                ))
            })
            .collect();
        Some(Withheld {
            response_id: id.clone(),
            calls,
        })
    }
}

/// Whether the provider holds a request's conversation, tools and system
/// text included ([`super::Protocol::held`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// The request carries all of it.
    Not,
    /// From this request's answer on.
    New,
    /// From the earlier answer of this id: the request carries only what
    /// came after it, and declares no tools of its own.
    From(String),
}

/// What toolgate remembers of stored responses (kept by the proxy's state).
pub trait Stored {
    /// The response that continued stored response `id`, if any.
    fn renamed(&self, id: &str) -> Option<std::sync::Arc<str>>;
    /// The `(call id, item type)` of calls withheld from stored response `id`.
    fn withheld(&self, id: &str) -> Option<std::sync::Arc<Vec<(String, String)>>>;
}

/// Appends a resumption's turn to the request's `list` (`messages`).
pub fn append_turn(body: &mut Value, list: &str, r: &Resumption) -> Result<(), Error> {
    body.get_mut(list)
        .and_then(Value::as_array_mut)
        .ok_or(Error::UpstreamUnreadable(
            "the request has no messages to continue",
        ))?
        .extend(r.turn.iter().cloned());
    Ok(())
}

/// A whole continuation `last` as the agent receives it: under the first
/// response's `keys` (its id, …), the `blocks` of the responses continued
/// (`before`) put before its own in `list` when given, usage summed.
pub fn join_whole(
    first: &Value,
    before: &[Resumption],
    last: &mut Value,
    keys: &[&str],
    list: Option<&str>,
) {
    let Value::Object(obj) = last else {
        return;
    };
    for key in keys {
        if let Some(v) = first.get(*key) {
            obj.insert(key.to_string(), v.clone());
        }
    }
    if let Some(list) = list {
        let mut items: Vec<Value> = before.iter().flat_map(|r| r.blocks.clone()).collect();
        if let Some(Value::Array(own)) = obj.get(list) {
            items.extend(own.iter().cloned());
        }
        obj.insert(list.to_string(), Value::Array(items));
    }
    for u in before.iter().filter_map(|r| r.usage.as_ref()) {
        add_usage(obj.entry("usage").or_insert(Value::Null), u);
    }
}

/// Adds the numbers of `extra` into `into`, key by key (token usage).
pub fn add_usage(into: &mut Value, extra: &Value) {
    match (into, extra) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(slot) => add_usage(slot, v),
                    None => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot @ Value::Number(_), Value::Number(n)) => {
            let sum = match (slot.as_u64(), n.as_u64()) {
                (Some(x), Some(y)) => Value::from(x.saturating_add(y)),
                _ => Value::from(slot.as_f64().unwrap_or(0.0) + n.as_f64().unwrap_or(0.0)),
            };
            *slot = sum;
        }
        (slot @ Value::Null, v) => *slot = v.clone(),
        _ => {}
    }
}

/// The calls of a stored response that were withheld, so that a request
/// continuing from it can answer them (the provider still holds them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Withheld {
    pub response_id: String,
    /// `(call id, item type)` of each withheld call.
    pub calls: Vec<(String, String)>,
}
