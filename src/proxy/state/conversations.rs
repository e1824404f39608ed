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
    /// How many turns toolgate has seen it take: the version of its
    /// shared record (a write that lands late never replaces a newer one).
    pub turns: u64,
}

impl Conversation {
    fn to_json(&self) -> Value {
        json!({"owner": self.owner, "head": self.head, "open": self.open, "turns": self.turns})
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
            turns: v.get("turns")?.as_u64()?,
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

    /// What toolgate knows of conversation `id`: the newer of this
    /// replica's record and the shared one (another replica may have served
    /// its last turn).
    pub async fn conversation(&self, id: &str) -> Result<Option<Arc<Conversation>>, Error> {
        let local = self.conversations.get(id);
        let Some(s) = &self.parts.shared else {
            return Ok(local);
        };
        let stored = match s.get_versioned(CONVERSATION, id).await {
            Ok(v) => v,
            Err(_) if local.is_some() => return Ok(local),
            Err(e) => return self.unreadable(s, &e).map(|()| None),
        };
        let key = self.conversation_key();
        let shared = stored
            .and_then(|(n, v)| Some((n, open_record(&key, &v, CONVERSATION, id, 1)?)))
            .and_then(|(n, mut f)| Some((n, f.pop()?)))
            .and_then(|(n, plain)| Some((n, serde_json::from_str::<Value>(&plain).ok()?)))
            .and_then(|(n, v)| Conversation::from_json(&v).filter(|c| c.turns == n));
        match (local, shared) {
            (Some(l), Some(sh)) if sh.turns <= l.turns => Ok(Some(l)),
            (_, Some(sh)) => {
                let sh = Arc::new(sh);
                self.conversations.insert(id.to_string(), sh.clone());
                Ok(Some(sh))
            }
            (local, None) => Ok(local),
        }
    }

    /// Records conversation `id` as `c` on this replica.
    pub fn remember_conversation(&self, id: &str, c: Conversation) {
        if !id.is_empty() {
            self.conversations.insert(id.to_string(), Arc::new(c));
        }
    }

    /// This replica's record of conversation `id`, sealed, with its
    /// version; `None` without shared state or a record.
    fn sealed_conversation(&self, id: &str) -> Option<(u64, String, Option<String>)> {
        self.parts.shared.as_ref()?;
        let c = self.conversations.get(id)?;
        let plain = c.to_json().to_string();
        let sealed = seal_record(&self.conversation_key(), CONVERSATION, id, &[&plain])?;
        Some((c.turns, sealed, c.head.clone()))
    }

    /// Writes this replica's record of conversation `id` to the shared
    /// state, and waits for it: a request that goes on with the
    /// conversation on another replica reads it.
    pub async fn share_conversation(&self, id: &str) {
        let (Some(s), Some((turns, sealed, head))) =
            (&self.parts.shared, self.sealed_conversation(id))
        else {
            return;
        };
        // Its last turn first: a replica that reads the record finds it.
        if let Some(head) = &head {
            self.share_history_now(head).await;
        }
        let ttl = self.config.responses.remember_ttl;
        if s.put_newer(CONVERSATION, id, (turns, &sealed), ttl)
            .await
            .is_err()
        {
            self.metrics.state_failed("remember", "local");
        }
    }

    /// The same, in the background.
    fn share_conversation_behind(&self, id: &str) {
        let Some((turns, sealed, _)) = self.sealed_conversation(id) else {
            return;
        };
        let id = id.to_string();
        self.write_behind(move |s, ttl| async move {
            s.put_newer(CONVERSATION, &id, (turns, &sealed), ttl)
                .await
                .map(|_| ())
        });
    }

    /// Conversation `id` goes on with turn `turn` (a response when
    /// `response`: the next request answers the calls withheld from it),
    /// here and, in the background, in the shared state.
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
            turns: known.turns + 1,
        };
        self.remember_conversation(id, next);
        self.share_conversation_behind(id);
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
            turns: 3,
        };
        assert_eq!(Conversation::from_json(&c.to_json()), Some(c.clone()));
        assert!(c.belongs_to("research") && !c.belongs_to("ops"));
        assert_eq!(Conversation::from_json(&json!({"owner": 1})), None);
        assert_eq!(
            Conversation::from_json(&json!({"owner": "a", "head": 2, "open": null, "turns": 1})),
            None
        );
    }
}
