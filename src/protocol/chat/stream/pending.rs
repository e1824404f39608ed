//! The calls a gate decides: the choices that finished holding them, the
//! finish chunk held behind them (kept as text while a slow gate decides),
//! and their release once decided.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Map, Value};

use super::{set_finish, write_event, ChatCall, Final, Site, StreamRewriter};
use crate::call::{Call, Release};
use crate::protocol::text_calls::Piece;

#[derive(Debug)]
pub(super) struct PendingChoice {
    pub(super) choice: u32,
    /// Position in the held chunk's `choices`, when a finish chunk triggered the gate.
    pub(super) pos: Option<usize>,
    pub(super) finish: Option<String>,
}

/// A held chunk: parsed, or written out while a slow gate decides (a tree
/// costs about 1 KiB more), or as it came when nothing in it had to change.
#[derive(Debug)]
pub(super) enum Held {
    Tree(Map<String, Value>),
    Text(Box<str>),
    /// The event as it came (`event`) and its data: it goes on so unless
    /// its finish must change.
    Raw {
        event: Bytes,
        data: Bytes,
    },
}

impl Held {
    fn compact(&mut self) {
        match self {
            Held::Tree(m) => {
                let text = Value::Object(std::mem::take(m)).to_string();
                *self = Held::Text(text.into_boxed_str());
            }
            // Its own bytes, not a view that keeps the read buffer alive.
            Held::Raw { event, data } => {
                *event = Bytes::copy_from_slice(event);
                *data = Bytes::copy_from_slice(data);
            }
            Held::Text(_) => {}
        }
    }

    fn into_tree(self) -> Option<Map<String, Value>> {
        match self {
            Held::Tree(m) => Some(m),
            // Written by `compact` from a map: it reads back as one.
            Held::Text(t) => serde_json::from_str(&t).ok(),
            // Read whole before it was held (strictly, or by the typed reader,
            // which takes less).
            Held::Raw { data, .. } => match crate::json::strict_value(&data) {
                Ok(Value::Object(m)) => Some(m),
                _ => None,
            },
        }
    }
}

#[derive(Debug)]
pub(super) struct Pending {
    choices: Vec<PendingChoice>,
    pub(super) calls: Vec<Call>,
    /// Where each of `calls` sits.
    sites: Vec<Site>,
    /// The finish chunk, tool deltas stripped, emitted after the calls.
    chunk: Option<Held>,
    /// `[DONE]`, emitted last when it triggered the gate.
    then_raw: Option<Bytes>,
    /// Calls written as text, by choice: their pieces and where their
    /// calls start in `calls` (after every structured call).
    texts: Vec<TextCalls>,
    /// One call complete before its choice finished ([`super::early`]).
    early: bool,
}

/// One choice's calls written as text: its pieces, and where its calls
/// start in [`Pending::calls`] (after every structured call).
pub(super) type TextCalls = (u32, Vec<Piece>, usize);

impl Pending {
    /// One call whose arguments are complete, gated before its choice finishes.
    pub(super) fn early(choice: PendingChoice, call: Call, site: Site) -> Pending {
        Pending {
            choices: vec![choice],
            calls: vec![call],
            sites: vec![site],
            chunk: None,
            then_raw: None,
            texts: Vec::new(),
            early: true,
        }
    }

    pub(super) fn sites(&self) -> &[Site] {
        &self.sites
    }

    /// Keeps the held finish chunk as text while a slow gate decides, and
    /// the calls in no more room than they take (collected one by one, a
    /// list has room for four; arguments grew delta by delta).
    pub(super) fn compact(&mut self) {
        if let Some(c) = self.chunk.as_mut() {
            c.compact();
        }
        self.calls.shrink_to_fit();
        self.sites.shrink_to_fit();
        self.texts.shrink_to_fit();
        for c in &mut self.calls {
            c.arguments.shrink_to_fit();
        }
    }
}

impl StreamRewriter {
    pub(super) fn start_pending(
        &mut self,
        choices: Vec<PendingChoice>,
        chunk: Option<Held>,
        then_raw: Option<Bytes>,
    ) {
        let (mut calls, sites): (Vec<Call>, Vec<Site>) = choices
            .iter()
            .flat_map(|pc| self.asm.take(pc.choice))
            .map(ChatCall::into_parts)
            .unzip();
        let texts = self.take_text_calls(&choices, &mut calls);
        self.pending = Some(Box::new(Pending {
            choices,
            calls,
            sites,
            chunk,
            then_raw,
            texts,
            early: false,
        }));
    }

    /// Emits the gated choices: allowed calls (one complete delta each, indices
    /// from 0), a neutral message when none is left, then the finish.
    /// `verdicts[i]` answers `pending()[i]`; a missing answer withholds.
    pub(super) fn release(&mut self, verdicts: &[Release], out: &mut BytesMut) {
        let Some(p) = self.pending.take() else {
            return;
        };
        if p.early {
            self.release_early(*p, verdicts, out);
            return;
        }
        let mut held = p.chunk;
        for pc in &p.choices {
            // Calls of the choice sent before it finished come first.
            let early = self.take_early(pc.choice).unwrap_or_default();
            let kept: Vec<(&Call, &Site)> = p
                .calls
                .iter()
                .zip(&p.sites)
                .enumerate()
                .filter(|(i, (c, _))| c.choice == pc.choice && Release::at(verdicts, *i).allowed())
                .map(|(_, cs)| cs)
                .collect();
            let (texts, text_kept) = self.write_text_calls(&p.texts, pc.choice, verdicts, out);
            let one = kept.is_empty() && !texts && p.choices.len() == 1 && early.released == 0;
            if one {
                let mut chunk = held.take().and_then(Held::into_tree);
                if self.resumes(pc.choice, &p.calls, &p.sites, verdicts, &mut chunk, out) {
                    self.ended |= p.then_raw.is_some();
                    return;
                }
                held = chunk.map(Held::Tree);
            }
            // Held reasoning goes out unless it names a withheld call.
            let withheld: Vec<&str> = p
                .calls
                .iter()
                .filter(|c| {
                    c.choice == pc.choice && !kept.iter().any(|(k, _)| std::ptr::eq(*k, *c))
                })
                .map(|c| c.id.as_str())
                .collect();
            let reasoning = self.take_reasoning(pc.choice, &withheld);
            if !reasoning.is_empty() {
                let delta = json!({ "reasoning_details": reasoning });
                self.template
                    .write_chunk(out, pc.choice, &delta, &Value::Null);
            }
            for (j, (call, site)) in kept.iter().enumerate() {
                self.template
                    .write_call(out, pc.choice, early.released + j, call, site);
            }
            let sent = if kept.is_empty() && early.released > 0 {
                pc.finish
                    .clone()
                    .unwrap_or_else(|| "tool_calls".to_string())
            } else if kept.is_empty() && text_kept == 0 {
                self.write_neutral(out, pc.choice);
                "stop".to_string()
            } else if kept.is_empty() {
                // Only calls written as text went out: an answer in text.
                pc.finish.clone().unwrap_or_else(|| "stop".to_string())
            } else {
                pc.finish.clone().unwrap_or_else(|| {
                    let legacy = kept.iter().all(|(_, s)| s.legacy);
                    (if legacy {
                        "function_call"
                    } else {
                        "tool_calls"
                    })
                    .to_string()
                })
            };
            let rewritten = pc.finish.as_deref() != Some(sent.as_str());
            self.any_rewritten |= rewritten;
            match (held.is_some(), pc.pos) {
                // The held chunk says the finish: as it came unless it changes.
                (true, Some(_)) if !rewritten => {}
                (true, Some(pos)) => {
                    let mut chunk = held.take().and_then(Held::into_tree);
                    match chunk.as_mut().and_then(|o| o.get_mut("choices")) {
                        Some(Value::Array(arr)) => {
                            if let Some(Value::Object(c)) = arr.get_mut(pos) {
                                set_finish(c, &sent);
                            }
                        }
                        _ => self.template.write_finish(out, pc.choice, &sent),
                    }
                    held = chunk.map(Held::Tree);
                }
                _ => self.template.write_finish(out, pc.choice, &sent),
            }
            self.finals.insert(pc.choice, Final { sent });
        }
        match held {
            Some(Held::Raw { event, .. }) => out.put_slice(&event),
            Some(other) => {
                if let Some(obj) = other.into_tree() {
                    write_event(out, &Value::Object(obj));
                }
            }
            None => {}
        }
        if let Some(raw) = p.then_raw {
            out.put_slice(&raw);
            self.ended = true;
        }
    }
}
