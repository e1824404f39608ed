//! The streaming rewriter: text passes at once, tool calls are held until gated.
//!
//! Sans-IO ([`Rewriter`]). A gate is due when a call's arguments are complete
//! ([`early`], when every call is decided at once) or when a choice finishes
//! while holding calls; [`Rewriter::resolve`] emits each allowed call as one
//! complete delta (indices renumbered from 0), and at the finish a neutral
//! message when none was sent, and the finish chunk. A failure ends the
//! stream with an error data event and `[DONE]`, never releasing held calls.
//!
//! Events that cannot carry a tool call ([`super::prefilter`]) nor a finish
//! are forwarded byte for byte without parsing while nothing is held. Finishes
//! are parsed so that tool-call deltas arriving after their choice finished are
//! recognised and stripped.

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;

use super::assemble::{Assembler, Delta};
use super::chunk::{is_empty_after, roles, set_finish};
use super::delta;
use super::finish;
use super::repeat::Last;
use super::template::Template;
use super::{
    has_finish, has_text, keys, prefilter, text_chunk, write_event, ChatCall, Prefilter, Site, DONE,
};
use crate::call::{Call, Release};
use crate::error::Error;
use crate::protocol::events::{self, Events};
use crate::protocol::malformed;
use crate::protocol::sse::{SseDecoder, SseEvent};
use crate::protocol::text_calls::TextScan;
use crate::protocol::{map_guard, write_raw_data, Options, Rewriter, Step};
use crate::protocol::{Totals, Update};
use resume::ResumeState;

mod blocks;
mod choice;
mod early;
mod pending;
mod resume;
mod text;
use pending::{Held, Pending, PendingChoice, TextCalls};

/// The finish reason the agent was sent for a choice.
#[derive(Debug)]
struct Final {
    sent: String,
}

#[derive(Debug)]
pub struct StreamRewriter {
    decoder: SseDecoder,
    asm: Assembler,
    finals: HashMap<u32, Final>,
    any_rewritten: bool,
    template: Template,
    /// The last chunk of one tool-call entry, for [`super::repeat`].
    last: Last,
    /// Boxed: most of a stream has no call held, and every open stream holds
    /// the field.
    pending: Option<Box<Pending>>,
    ended: bool,
    text_seen: bool,
    neutral: std::sync::Arc<str>,
    /// The neutral text goes in `refusal` (structured output).
    refusal: bool,
    /// A call event was read since the driver last polled (`Update::CallRead`).
    call_delta: bool,
    late_deltas: u64,
    resume: ResumeState,
    /// Token usage seen in the events, for the metrics.
    usage: crate::protocol::usage::Usage,
    /// `reasoning_details` entries that name an id (Gemini's thought
    /// signatures name the call they belong to), by choice: held until that
    /// choice's calls are decided, and dropped with a withheld call; each
    /// with its size as JSON.
    held_reasoning: Vec<(u32, Value, usize)>,
    /// Their size as JSON: counted in [`Rewriter::held_bytes`], at most
    /// `max_held` for the stream.
    held_reasoning_bytes: usize,
    max_held: usize,
    /// Each choice's text, scanned for calls written as text (`None`:
    /// `[gate] text_tool_calls` is off).
    /// Boxed: the map is 48 bytes and every open stream holds the field.
    #[allow(clippy::box_collection)]
    scans: Option<Box<HashMap<u32, TextScan>>>,
    /// The role each choice's agent was sent, by choice index (as the
    /// whole-tree path sends it): repeated in a chunk whose calls are held,
    /// it is not sent again.
    roles_sent: Vec<(u32, String)>,
    /// Call deltas and finishes are read typed ([`delta`], [`finish`]),
    /// and data events where they lie in the decoder's buffer; off only to
    /// compare with the whole-tree way (each block an event of its own) in
    /// tests.
    typed: bool,
    /// Calls complete before their choice finished are gated and sent
    /// then ([`early`]); off when a withheld call may be resumed.
    early_on: bool,
    /// What was decided early, by choice, until the choice finishes.
    early: Vec<early::Early>,
    /// Complete calls are reported ahead of their gate ([`Rewriter::foresee`]).
    foresee_on: bool,
    /// The calls reported so far, by choice and assembly key.
    foreseen: Vec<(u32, u64)>,
}

impl StreamRewriter {
    pub fn new(o: &Options) -> StreamRewriter {
        StreamRewriter {
            usage: Default::default(),
            decoder: SseDecoder::new(o.max_event_bytes),
            asm: Assembler::new(o.max_call_bytes, o.max_held_bytes),
            finals: HashMap::new(),
            any_rewritten: false,
            template: Template::default(),
            last: Last::default(),
            pending: None,
            ended: false,
            text_seen: false,
            neutral: o.neutral_message.clone(),
            refusal: o.refusal,
            call_delta: false,
            late_deltas: 0,
            resume: ResumeState::new(o.resume, &o.neutral_result),
            held_reasoning: Vec::new(),
            held_reasoning_bytes: 0,
            max_held: o.max_held_bytes,
            scans: o.text_calls.then(Box::default),
            typed: true,
            roles_sent: Vec::new(),
            early_on: o.early && !o.resume,
            early: Vec::new(),
            foresee_on: o.foresee,
            foreseen: Vec::new(),
        }
    }

    /// The role the agent was sent for `choice`, if any.
    pub(super) fn role_sent(&self, choice: u32) -> Option<&str> {
        let (_, role) = self.roles_sent.iter().find(|(c, _)| *c == choice)?;
        Some(role)
    }

    /// A choice finished whose calls were all decided early: its finish is
    /// settled here, with no gate to wait for.
    fn nothing_to_decide(&self) -> bool {
        self.pending.as_ref().is_some_and(|p| p.calls.is_empty())
    }

    /// Remembers the roles a chunk that goes out sends.
    fn note_roles(&mut self, obj: &serde_json::Map<String, Value>) {
        for (choice, role) in roles(obj) {
            self.note_role(choice, role);
        }
    }

    /// Remembers that `choice`'s agent was sent `role` (the first only).
    pub(super) fn note_role(&mut self, choice: u32, role: &str) {
        if self.role_sent(choice).is_none() {
            self.roles_sent.push((choice, role.to_string()));
        }
    }

    /// Every chunk read the whole-tree way (the typed readers off, each
    /// block taken as an event of its own): for tests that compare the two.
    #[doc(hidden)]
    pub fn whole_tree_only(mut self) -> Self {
        self.typed = false;
        self
    }

    /// Parses the chunk, strips tool deltas into the assembler, and rewrites
    /// finishes (`finish`: [`has_finish`] said it may hold one).
    fn slow(
        &mut self,
        raw: Bytes,
        data: Bytes,
        risky: bool,
        finish: bool,
        out: &mut BytesMut,
    ) -> Result<(), Error> {
        // A chunk with a finish is never one of tool deltas only: the
        // typed reader is not tried on it.
        let typed = self.typed && !finish;
        let sent = |choice: u32, role: &str| self.role_sent(choice) == Some(role);
        if let Some(r) = typed.then(|| delta::read(&data, sent)).flatten() {
            if let (Some(span), [(choice, entries)]) = (r.span, &r.choices[..]) {
                self.last
                    .remember(&data, span, r.obfuscation, *choice, &entries[0]);
            }
            self.template.remember_raw(r.template)?;
            for (pos, (choice, entries)) in r.choices.into_iter().enumerate() {
                self.tool_entries(pos, choice, entries)?;
            }
            return Ok(());
        }
        self.last.clear();
        self.usage.sniff(&data);
        // Repeated keys are refused: the tree would keep one value of a key and
        // a reader could act on the other.
        let mut obj = match crate::json::strict_value(&data) {
            Ok(Value::Object(o)) => o,
            _ if risky => return Err(malformed("event data is not a JSON object")),
            _ => {
                out.put_slice(&raw);
                return Ok(());
            }
        };
        map_guard(&obj, &keys::TOP)?;
        if obj.get("error").is_some_and(|e| !e.is_null()) {
            return Err(Error::UpstreamEvent(data));
        }
        let mut changed = false;
        let mut gated = Vec::new();
        match obj.get_mut("choices") {
            None | Some(Value::Null) => {}
            Some(Value::Array(arr)) => {
                for (pos, ch) in arr.iter_mut().enumerate() {
                    self.choice(pos, ch, &mut changed, &mut gated)?;
                }
            }
            Some(_) if risky => return Err(malformed("choices is not an array")),
            Some(_) => {}
        }
        if !changed && gated.is_empty() {
            self.note_roles(&obj);
            out.put_slice(&raw);
            return Ok(());
        }
        self.template.remember(&obj);
        if gated.is_empty() {
            if !is_empty_after(&obj, |c| self.role_sent(c)) {
                self.note_roles(&obj);
                write_event(out, &Value::Object(obj));
            }
            return Ok(());
        }
        let held = if changed {
            Held::Tree(obj)
        } else {
            Held::Raw { event: raw, data }
        };
        self.start_pending(gated, Some(held), None);
        Ok(())
    }

    /// One choice's tool-call entries from a chunk of such entries only
    /// ([`delta`], [`super::repeat`]): they are held, nothing is sent (what
    /// the whole-tree path does with such a chunk, without the tree).
    fn tool_entries<'d>(
        &mut self,
        pos: usize,
        choice: Option<u32>,
        entries: impl IntoIterator<Item = Delta<'d>>,
    ) -> Result<(), Error> {
        let idx = match choice {
            Some(i) => i,
            None => {
                u32::try_from(pos).map_err(|_| malformed("choice index is not a small integer"))?
            }
        };
        if self.finals.contains_key(&idx) {
            self.late_deltas += 1;
            return Ok(());
        }
        for (p, e) in entries.into_iter().enumerate() {
            if !self.after_early(idx, early::Entry::of(&e))? {
                self.asm.push_delta(idx, p, e)?;
            }
        }
        self.call_delta = true;
        Ok(())
    }
}

impl Events for StreamRewriter {
    fn decoder(&mut self) -> &mut SseDecoder {
        &mut self.decoder
    }
    fn gating(&self) -> bool {
        self.pending.is_some()
    }
    fn ended(&self) -> bool {
        self.ended
    }
    fn on_event(&mut self, ev: SseEvent, out: &mut BytesMut) -> Result<(), Error> {
        self.handle(ev, out)?;
        self.gate_complete();
        Ok(())
    }
    fn read_next(&mut self, dec: &mut SseDecoder, out: &mut BytesMut) -> Result<bool, Error> {
        self.next(dec, out)
    }
}

impl Rewriter for StreamRewriter {
    fn totals(&mut self) -> Totals {
        self.usage.settle();
        Totals {
            usage: std::mem::take(&mut self.usage),
            late_deltas: self.late_deltas,
        }
    }

    fn held_bytes(&self) -> usize {
        self.asm.held_bytes() + self.held_reasoning_bytes + self.text_held_bytes()
    }

    fn compact(&mut self) {
        if let Some(p) = self.pending.as_mut() {
            p.compact();
        }
        self.decoder.compact();
        // Caches of the chunks before: the next chunk is read the long way.
        self.last = Last::default();
        self.template.compact();
    }

    fn push(&mut self, bytes: &[u8]) {
        if !self.ended {
            self.decoder.push(bytes);
        }
    }

    fn pending(&self) -> &[Call] {
        self.pending.as_ref().map(|p| &p.calls[..]).unwrap_or(&[])
    }

    fn poll(&mut self) -> Option<Update> {
        if std::mem::take(&mut self.call_delta) {
            return Some(Update::CallRead);
        }
        self.take_ready().map(Update::Resumption)
    }

    fn process(&mut self, out: &mut BytesMut) -> Result<Step, Error> {
        loop {
            let step = events::process(self, out)?;
            if step == Step::Gate && self.nothing_to_decide() {
                self.release(&[], out);
                continue;
            }
            return Ok(step);
        }
    }

    fn end(&mut self, out: &mut BytesMut) -> Result<Step, Error> {
        while let Some(step) = events::finish(self, out)? {
            if step == Step::Gate && self.nothing_to_decide() {
                self.release(&[], out);
                continue;
            }
            return Ok(step);
        }
        if self.asm.any() || self.text_held() || !self.early.is_empty() {
            return Err(malformed("stream ended before its tool calls finished"));
        }
        Ok(Step::NeedMore)
    }

    fn foresee(&mut self) -> Vec<Call> {
        self.complete_ahead()
    }

    fn fail(&mut self, err: &Error, passthrough: bool, out: &mut BytesMut) -> Vec<Call> {
        self.ended = true;
        self.decoder.clear();
        let mut dropped = self.pending.take().map(|p| p.calls).unwrap_or_default();
        dropped.extend(self.asm.take_all().into_iter().map(|c| c.into_parts().0));
        match err {
            Error::UpstreamEvent(body) if passthrough => write_raw_data(out, body),
            _ => write_raw_data(out, &err.json_body()),
        }
        out.put_slice(DONE);
        dropped
    }

    fn continue_with(&mut self, resume: bool) {
        self.continue_stream(resume);
    }

    fn give_up(&mut self, out: &mut BytesMut) {
        self.end_without_follow_up(out);
    }

    /// Emits the gated choices: allowed calls (one complete delta each, indices
    /// from 0), a neutral message when none is left, then the finish.
    /// `verdicts[i]` answers `pending()[i]`; a missing answer withholds.
    fn resolve(&mut self, verdicts: &[Release], out: &mut BytesMut) {
        self.release(verdicts, out);
    }
}

#[cfg(test)]
mod early_tests;
#[cfg(test)]
mod held_tests;
#[cfg(test)]
mod paths_tests;
#[cfg(test)]
mod tests;
