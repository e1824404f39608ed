//! What toolgate remembers of each conversation of the Conversations API:
//! whose it is, its last turn (what the signals read of it, through the
//! turns' history), the last response in it whose withheld calls the next
//! request answers; and the calls a principal may read back from a
//! conversation's items (released by the gates, or written by the agent
//! itself). Shared with other replicas, sealed, like the other records.

use std::sync::Arc;

use serde_json::{json, Value};

use super::recall::{open_record, seal_record};
use super::State;
use crate::call::Call;
use crate::error::Error;

const CONVERSATION: &str = "conversation";
const VOUCHED: &str = "vouched";

/// One conversation as toolgate knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// The principal who opened it (or first continued it here).
    pub owner: String,
    /// The id of its last turn toolgate remembers (a response id, or one
    /// of its own for items written); `None`: it has none yet.
    pub head: Option<String>,
    /// The last response in it, until the next request answers the calls
    /// withheld from it.
    pub open: Option<String>,
}

impl Conversation {
    fn to_json(&self) -> Value {
        json!({"owner": self.owner, "head": self.head, "open": self.open})
    }

    fn from_json(v: &Value) -> Option<Conversation> {
        let opt = |k: &str| match v.get(k)? {
            Value::Null => Some(None),
            Value::String(s) => Some(Some(s.clone())),
            _ => None,
        };
        Some(Conversation {
            owner: v.get("owner")?.as_str()?.to_string(),
            head: opt("head")?,
            open: opt("open")?,
        })
    }

    /// The bytes it holds, about.
    pub fn weight(&self) -> usize {
        let len = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        self.owner.len() + len(&self.head) + len(&self.open) + 64
    }

    /// Whether `principal` may read and continue it.
    pub fn belongs_to(&self, principal: &str) -> bool {
        self.owner == principal
    }
}

/// The turn id standing for what a conversation held before toolgate
/// knew it: no turn is remembered under it, so its history reads as not
/// known (`context.history_complete` is false).
pub fn before_toolgate(conversation: &str) -> String {
    format!("{conversation}#before")
}

impl State {
    fn conversation_key(&self) -> [u8; 32] {
        crate::fence::marker::hmac_sha256(&self.fence_secret, &[b"shared conversations"])
    }

    /// What toolgate knows of conversation `id`: this replica's record,
    /// else another replica's from the shared state.
    pub async fn conversation(&self, id: &str) -> Result<Option<Arc<Conversation>>, Error> {
        if let Some(c) = self.conversations.get(id) {
            return Ok(Some(c));
        }
        let Some(s) = &self.parts.shared else {
            return Ok(None);
        };
        let sealed = match s.get(CONVERSATION, id).await {
            Ok(v) => v,
            Err(e) => return self.unreadable(s, &e).map(|()| None),
        };
        let key = self.conversation_key();
        let c = sealed
            .and_then(|v| open_record(&key, &v, CONVERSATION, id, 1))
            .and_then(|mut f| f.pop())
            .and_then(|plain| serde_json::from_str::<Value>(&plain).ok())
            .and_then(|v| Conversation::from_json(&v))
            .map(Arc::new);
        if let Some(c) = &c {
            self.conversations.insert(id.to_string(), c.clone());
        }
        Ok(c)
    }

    /// Records conversation `id` as `c`, here and in the shared state.
    pub fn remember_conversation(&self, id: &str, c: Conversation) {
        if id.is_empty() {
            return;
        }
        if self.parts.shared.is_some() {
            let plain = c.to_json().to_string();
            if let Some(sealed) = seal_record(&self.conversation_key(), CONVERSATION, id, &[&plain])
            {
                let id = id.to_string();
                self.write_behind(
                    |s, ttl| async move { s.put(CONVERSATION, &id, &sealed, ttl).await },
                );
            }
        }
        self.conversations.insert(id.to_string(), Arc::new(c));
    }

    /// Conversation `id` goes on with turn `turn` (a response when
    /// `response`: the next request answers the calls withheld from it).
    pub fn advance_conversation(&self, id: &str, turn: &str, response: bool) {
        let Some(known) = self.conversations.get(id) else {
            return;
        };
        if known.head.as_deref() == Some(turn) {
            return;
        }
        let open = match response {
            true => Some(turn.to_string()),
            false => known.open.clone(),
        };
        let next = Conversation {
            owner: known.owner.clone(),
            head: Some(turn.to_string()),
            open,
        };
        self.remember_conversation(id, next);
    }

    /// The key `call` is vouched for `principal` under (see
    /// [`State::vouch`]).
    pub fn vouch_key(&self, principal: &str, call: &Call) -> [u8; 32] {
        let key = crate::fence::marker::hmac_sha256(&self.fence_secret, &[b"vouched calls"]);
        let kind = call.kind.as_str();
        let parts: Vec<&[u8]> = [principal, &call.id, kind, &call.name, &call.arguments]
            .iter()
            .flat_map(|p| [p.as_bytes(), &[0u8][..]])
            .collect();
        crate::fence::marker::hmac_sha256(&key, &parts)
    }

    /// Records that a call may be read back from a conversation by the
    /// principal of `key` ([`State::vouch_key`]): the gates released it to
    /// them, or they wrote it themselves.
    pub fn vouch(&self, key: [u8; 32]) {
        self.vouched.insert(key, ());
        if self.parts.shared.is_some() {
            let id = crate::digest::hex(&key);
            if let Some(sealed) = self.seal_record(VOUCHED, &id, &[]) {
                self.write_behind(|s, ttl| async move { s.put(VOUCHED, &id, &sealed, ttl).await });
            }
        }
    }

    /// Whether `principal` may read `call` back (see [`State::vouch`]).
    pub async fn vouched(&self, principal: &str, call: &Call) -> Result<bool, Error> {
        let key = self.vouch_key(principal, call);
        if self.vouched.contains_key(&key) {
            return Ok(true);
        }
        let Some(s) = &self.parts.shared else {
            return Ok(false);
        };
        let id = crate::digest::hex(&key);
        let sealed = match s.get(VOUCHED, &id).await {
            Ok(v) => v,
            Err(e) => return self.unreadable(s, &e).map(|()| false),
        };
        let known = sealed.is_some_and(|v| self.open_record(&v, VOUCHED, &id, 0).is_some());
        if known {
            self.vouched.insert(key, ());
        }
        Ok(known)
    }

    /// The calls withheld from stored response `id`.
    pub fn withheld_from(&self, id: &str) -> Option<Arc<Vec<(String, String)>>> {
        self.withheld.get(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_record_reads_back_as_written() {
        let c = Conversation {
            owner: "research".into(),
            head: Some("resp_2".into()),
            open: None,
        };
        assert_eq!(Conversation::from_json(&c.to_json()), Some(c.clone()));
        assert!(c.belongs_to("research") && !c.belongs_to("ops"));
        assert_eq!(Conversation::from_json(&json!({"owner": 1})), None);
        assert_eq!(
            Conversation::from_json(&json!({"owner": "a", "head": 2, "open": null})),
            None
        );
    }
}
