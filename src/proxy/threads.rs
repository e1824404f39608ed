//! Conversations the provider holds (Messages threads): a continuing
//! request sends only its new messages, no `tools` and no `system`, so what
//! the gates know of the conversation is remembered from the request that
//! created the thread, under the id of each answer in it, and given back to
//! the request that continues from that answer. An answer toolgate does not
//! know (expired, another client's) is a lost thread: the SDK replays the
//! conversation under a new one, which toolgate reads whole. An answer id
//! the provider gave to two threads is a provider fault: it is not rebound,
//! and no thread continues from it (the SDK replays, read whole).

use std::collections::HashMap;
use std::sync::Arc;

use http::HeaderMap;
use serde_json::{json, Map, Value};

use crate::context::{Context, Declared};

/// What the gates know of a held conversation.
#[derive(Debug)]
pub struct Facts {
    /// The client the thread belongs to: another one cannot continue it.
    principal: String,
    declared: HashMap<String, Declared>,
    system_text: String,
    session: String,
    mission: Option<String>,
    /// The answer id these facts were remembered under was given to two
    /// threads: nobody continues from it.
    reused: bool,
}

impl Facts {
    /// What an answer id given to two threads is remembered with.
    pub fn reused() -> Facts {
        Facts {
            principal: String::new(),
            declared: HashMap::new(),
            system_text: String::new(),
            session: String::new(),
            mission: None,
            reused: true,
        }
    }

    /// Whether these are the facts of an answer id given to two threads.
    pub fn is_reused(&self) -> bool {
        self.reused
    }

    /// Whether `other` are the same facts (the same thread answering
    /// again under an id it had: nothing to rebind).
    pub fn same_as(&self, other: &Facts) -> bool {
        !self.reused && !other.reused && self.to_json() == other.to_json()
    }

    /// The facts of a request that creates or continues a thread (its
    /// hidden tools already taken out of what it declares).
    pub fn of(ctx: &Context) -> Facts {
        Facts {
            principal: ctx.principal.clone(),
            declared: ctx.declared.clone(),
            system_text: ctx.system_text.clone(),
            session: ctx.session.clone(),
            mission: ctx.mission.clone(),
            reused: false,
        }
    }

    /// Bytes it takes, about.
    pub fn weight(&self) -> usize {
        let declared: usize = self
            .declared
            .iter()
            .map(|(k, d)| k.len() + d.parameters.as_ref().map_or(0, |p| p.len()) + 64)
            .sum();
        declared
            + self.principal.len()
            + self.system_text.len()
            + self.session.len()
            + self.mission.as_ref().map_or(0, String::len)
            + 128
    }

    /// The facts as JSON, for replicas that share them (sealed: the system
    /// text is a prompt).
    pub fn to_json(&self) -> Value {
        let declared: Map<String, Value> = self
            .declared
            .iter()
            .map(|(name, d)| {
                (
                    name.clone(),
                    d.parameters.as_deref().map_or(Value::Null, Value::from),
                )
            })
            .collect();
        json!({
            "principal": self.principal,
            "declared": declared,
            "system_text": self.system_text,
            "session": self.session,
            "mission": self.mission,
        })
    }

    /// Facts another replica wrote with [`Facts::to_json`].
    pub fn from_json(v: &Value) -> Option<Facts> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let declared = v
            .get("declared")?
            .as_object()?
            .iter()
            .map(|(name, p)| {
                let parameters = p.as_str().map(Box::from);
                (name.clone(), Declared { parameters })
            })
            .collect();
        Some(Facts {
            principal: text("principal")?,
            declared,
            system_text: text("system_text")?,
            session: text("session")?,
            mission: text("mission"),
            reused: false,
        })
    }

    /// Whether `principal` may continue the thread (nobody continues from
    /// an answer id given to two threads).
    pub fn belongs_to(&self, principal: &str) -> bool {
        !self.reused && self.principal == principal
    }

    /// Gives a continuing request the thread's facts: its declared tools,
    /// its system text, and the session and mission the thread was given
    /// (unless the request's headers name them).
    pub fn continue_in(&self, ctx: &mut Context, headers: &HeaderMap) {
        ctx.declared = self.declared.clone();
        if ctx.system_text.is_empty() {
            ctx.system_text = self.system_text.clone();
        }
        if !headers.contains_key("x-toolgate-session") {
            ctx.session = self.session.clone();
        }
        if !headers.contains_key("x-toolgate-mission") {
            ctx.mission = self.mission.clone();
        }
    }
}

/// The facts a thread's answers are remembered with, shared.
pub type Shared = Arc<Facts>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_read_back_from_their_json_as_they_were() {
        let mut declared = HashMap::new();
        declared.insert(
            "pay".to_string(),
            Declared {
                parameters: Some("{\"type\":\"object\"}".into()),
            },
        );
        declared.insert("look".to_string(), Declared { parameters: None });
        let f = Facts {
            principal: "ana".into(),
            declared,
            system_text: "You pay bills.".into(),
            session: "s1".into(),
            mission: None,
            reused: false,
        };
        let back = Facts::from_json(&f.to_json()).unwrap_or_else(|| panic!("unreadable"));
        assert_eq!(back.declared, f.declared);
        assert_eq!(
            (back.principal, back.system_text, back.session, back.mission),
            (f.principal, f.system_text, f.session, f.mission)
        );
        assert!(Facts::from_json(&json!({"principal": "x"})).is_none());
    }
}
