//! Conversations the provider holds (Messages threads): a continuing
//! request sends only its new messages, no `tools` and no `system`, so what
//! the gates know of the conversation is remembered from the request that
//! created the thread, under the id of each answer in it, and given back to
//! the request that continues from that answer. An answer toolgate does not
//! know (expired, another client's) is a lost thread: the SDK replays the
//! conversation under a new one, which toolgate reads whole.

use std::collections::HashMap;
use std::sync::Arc;

use http::HeaderMap;

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
}

impl Facts {
    /// The facts of a request that creates or continues a thread (its
    /// hidden tools already taken out of what it declares).
    pub fn of(ctx: &Context) -> Facts {
        Facts {
            principal: ctx.principal.clone(),
            declared: ctx.declared.clone(),
            system_text: ctx.system_text.clone(),
            session: ctx.session.clone(),
            mission: ctx.mission.clone(),
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

    /// Whether `principal` may continue the thread.
    pub fn belongs_to(&self, principal: &str) -> bool {
        self.principal == principal
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
