//! Calls released before their choice finishes: a call whose arguments are
//! a whole JSON object is gated at the fragment that completed them, and
//! goes out at once when allowed, so it does not wait for the finish the
//! provider sends one token later. What comes afterwards for such a call
//! is nothing (an empty or blank fragment, dropped) or a fault; the choice's
//! finish then counts its early calls: their indices come first, and a
//! choice whose every call was withheld still ends with the neutral text.
//!
//! Only calls with an `index`, an id and a name are let go early, and only
//! where nothing else waits on the choice's calls: not with calls written
//! as text gated, not with reasoning held for the choice, not when a
//! withheld call would be answered by a follow-up request (`resume`).
//! Where calls wait for their finish because a judge decides them, a
//! complete call is reported once ([`StreamRewriter::complete_ahead`]) so
//! its judge is asked while the turn streams on.

use bytes::BytesMut;

use super::pending::{Pending, PendingChoice};
use super::{malformed, StreamRewriter};
use crate::call::{Call, Release};
use crate::error::Error;

/// What a tool-call entry says, for [`StreamRewriter::after_early`].
pub(super) struct Entry<'a> {
    pub(super) index: Option<u64>,
    pub(super) id: Option<&'a str>,
    pub(super) name: Option<&'a str>,
    pub(super) arguments: &'a str,
    /// Keys besides `index`, `id`, `type` and `function`.
    pub(super) other_keys: bool,
}

impl<'a> Entry<'a> {
    /// The parts of an entry read typed.
    pub(super) fn of(d: &'a crate::protocol::chat::assemble::Delta<'_>) -> Entry<'a> {
        Entry {
            index: d.index,
            id: d.id.as_deref(),
            name: d.name.as_deref(),
            arguments: &d.arguments,
            other_keys: !d.extra.is_empty(),
        }
    }

    /// The parts of an entry as a tree (a malformed one reads as adding).
    pub(super) fn of_tree(v: &'a serde_json::Value) -> Entry<'a> {
        let f = v.get("function");
        let arguments = match f.and_then(|f| f.get("arguments")) {
            None | Some(serde_json::Value::Null) => "",
            Some(serde_json::Value::String(s)) => s,
            Some(_) => "{}",
        };
        Entry {
            index: v.get("index").and_then(serde_json::Value::as_u64),
            id: v.get("id").and_then(serde_json::Value::as_str),
            name: f
                .and_then(|f| f.get("name"))
                .and_then(serde_json::Value::as_str),
            arguments,
            other_keys: v.as_object().is_none_or(|o| {
                o.keys()
                    .any(|k| !matches!(k.as_str(), "index" | "id" | "type" | "function"))
            }),
        }
    }
}

/// What was decided early in one choice.
#[derive(Debug, Default)]
pub(super) struct Early {
    pub(super) choice: u32,
    /// Calls sent: the next early or late call of the choice takes this index.
    pub(super) released: usize,
    /// The assembly keys and ids of every call decided early.
    keys: Vec<u64>,
    ids: Vec<String>,
}

impl Early {
    /// Whether an entry with `index` and `id` continues a call decided here.
    fn continues(&self, index: Option<u64>, id: Option<&str>) -> bool {
        let id = id.filter(|s| !s.is_empty());
        match index {
            Some(k) => self.keys.contains(&k),
            // Without an index an entry is matched by its id; one with none
            // continues the last call.
            None => id.is_none_or(|id| self.ids.iter().any(|i| i == id)),
        }
    }
}

impl StreamRewriter {
    /// The early decisions of `choice`, if any.
    pub(super) fn early_of(&self, choice: u32) -> Option<&Early> {
        self.early.iter().find(|e| e.choice == choice)
    }

    /// Takes `choice`'s early decisions (its finish is being decided).
    pub(super) fn take_early(&mut self, choice: u32) -> Option<Early> {
        let i = self.early.iter().position(|e| e.choice == choice)?;
        Some(self.early.swap_remove(i))
    }

    /// The choices with calls decided early that have not finished.
    pub(super) fn early_choices(&self) -> impl Iterator<Item = u32> + '_ {
        self.early.iter().map(|e| e.choice)
    }

    /// An entry for a call of `choice` that was decided early: `Ok(true)`
    /// when it adds nothing (no name, no other id, blank arguments, no
    /// other keys: dropped, counted late); a fault when it would change the
    /// call the agent was sent; `Ok(false)` when it is not such an entry.
    pub(super) fn after_early(&mut self, choice: u32, entry: Entry<'_>) -> Result<bool, Error> {
        let Some(e) = self.early_of(choice) else {
            return Ok(false);
        };
        let id = entry.id.filter(|s| !s.is_empty());
        if !e.continues(entry.index, id) {
            return Ok(false);
        }
        let adds = entry.name.is_some_and(|n| !n.is_empty())
            || !entry.arguments.trim_ascii().is_empty()
            || entry.other_keys
            || id.is_some_and(|id| !e.ids.iter().any(|i| i == id));
        if adds {
            return Err(malformed(
                "a tool call went on after its arguments were complete",
            ));
        }
        self.late_deltas += 1;
        Ok(true)
    }

    /// Holds the first call that is complete for a gate of its own, when
    /// nothing else is pending and the call's choice may let it go early.
    pub(super) fn gate_complete(&mut self) {
        if !self.early_on || self.pending.is_some() || self.scans.is_some() {
            return;
        }
        let reasoning = &self.held_reasoning;
        let finals = &self.finals;
        let may = |c: u32| !finals.contains_key(&c) && !reasoning.iter().any(|(rc, _, _)| *rc == c);
        let Some((choice, key)) = self.asm.complete(may) else {
            return;
        };
        let Some(call) = self.asm.take_one(choice, key) else {
            return;
        };
        let (call, site) = call.into_parts();
        self.pending = Some(Box::new(Pending::early(
            PendingChoice {
                choice,
                pos: None,
                finish: None,
            },
            call,
            site,
        )));
    }

    /// The calls complete now that were not reported before, for the
    /// driver to ask their sensors ahead ([`crate::protocol::Rewriter::foresee`]);
    /// they stay held for their choice's finish.
    pub(super) fn complete_ahead(&mut self) -> Vec<Call> {
        if !self.foresee_on || !self.asm.any() {
            return Vec::new();
        }
        let seen = &self.foreseen;
        let found = self
            .asm
            .whole_calls(|choice, key| seen.contains(&(choice, key)));
        let mut calls = Vec::with_capacity(found.len());
        for (choice, key, c) in found {
            self.foreseen.push((choice, key));
            calls.push(c.clone().into_parts().0);
        }
        calls
    }

    /// Sends an early call if it is allowed, and notes it either way.
    pub(super) fn release_early(&mut self, p: Pending, verdicts: &[Release], out: &mut BytesMut) {
        for (i, (call, site)) in p.calls.iter().zip(p.sites()).enumerate() {
            let at = match self.early.iter().position(|e| e.choice == call.choice) {
                Some(at) => at,
                None => {
                    self.early.push(Early {
                        choice: call.choice,
                        ..Early::default()
                    });
                    self.early.len() - 1
                }
            };
            let j = self.early[at].released;
            if Release::at(verdicts, i).allowed() {
                self.template.write_call(out, call.choice, j, call, site);
                self.early[at].released += 1;
            }
            self.early[at].keys.push(site.index);
            self.early[at].ids.push(call.id.clone());
        }
        // The next fragment is not read as a repeat of the released call's.
        self.last.clear();
        // A call that completed behind this one goes next.
        self.gate_complete();
    }
}
