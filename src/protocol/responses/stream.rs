//! The Responses streaming rewriter: text passes at once, call items are held.
//!
//! Events are keyed by `output_index` and `item_id`. A call item (see
//! [`super::classify`]) is held from `response.output_item.added` through its
//! deltas to `response.output_item.done`; calls that follow one another are
//! gated together when the next event is not another call. An allowed call's
//! events go out as they came; a withheld one's are replaced at the same
//! `output_index` by a complete assistant message (added, part added, text
//! delta, text done, part done, item done), so indices stay contiguous.
//! `sequence_number`s stay strictly increasing (renumbered only where the
//! replacement made that necessary). Events carrying the whole response
//! (`response.completed`, …) get the same `output`: withheld calls replaced,
//! a reasoning item that led only to withheld calls dropped, and any call the
//! stream did not release replaced too.
//!
//! One reading for every client: the call that is gated is the item of
//! `response.output_item.done`, and every other place a client may read the
//! call from must carry the same call (item id, type, name with its
//! namespace, call id, arguments): the item as added and its deltas
//! ([`hold`]), and each call item of a response's `output` ([`emit`]),
//! compared there with the decided call's [`super::fingerprint`].
//!
//! Fails closed: an event whose JSON repeats a key, whose `event:` name is
//! not its `type`, that names a call already decided, a call item without
//! an id, one whose reading differs anywhere from the gated one, a call that
//! a response's `output` shows twice or that the stream never showed, a
//! response that ends while a call is open, or a stream that ends before the
//! response does. The stream then ends with an `error` event (and
//! `response.failed` when the response began).
//!
//! Every byte a stream keeps is charged ([`Rewriter::held_bytes`]): held
//! events, the calls being gated, the response snapshot kept for a failure
//! ending, the event that closed a batch, and what it remembers of each
//! decided call (its id, place and fingerprint, never its arguments).

use std::collections::{HashMap, HashSet};

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Map, Value};

use super::Ids;
use crate::call::{Call, Release};
use crate::error::Error;
use crate::protocol::events::{self, Events};
use crate::protocol::sse::{SseDecoder, SseEvent};
use crate::protocol::{map_guard, Options, Rewriter, Step, Withheld};
use crate::protocol::{Totals, Update};

mod delta;
mod emit;
mod envelope;
use envelope::{Ahead, Snapshot};
mod hold;
use hold::Slot;
mod release;
mod resume;
mod text;

use crate::protocol::malformed;
use crate::protocol::write_named_event as write_event;

/// The keys toolgate reads at the top of an event and in a call item.
const TOP: [&str; 10] = [
    "type",
    "item",
    "output_index",
    "item_id",
    "sequence_number",
    "response",
    "delta",
    "arguments",
    "input",
    "content_index",
];

const TERMINAL: [&str; 3] = [
    "response.completed",
    "response.incomplete",
    "response.failed",
];

/// One held event.
#[derive(Debug)]
struct Held {
    raw: Bytes,
    ty: String,
    data: Bytes,
    seq: Option<u64>,
    /// The call (position in the batch) it belongs to; `None` for an event of
    /// another item held only to keep the order.
    slot: Option<usize>,
}

/// What the stream remembers of a decided call item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decided {
    /// Released: the fingerprint every later reading must match.
    Released([u8; 32]),
    /// Withheld: replaced by a neutral message wherever it shows again.
    Withheld,
}

/// What one decided call costs the budget: its id plus this.
const DECIDED_COST: usize = 96;

pub struct StreamRewriter {
    decoder: SseDecoder,
    neutral: std::sync::Arc<str>,
    /// Neutral messages say their text as a `refusal` part (structured output).
    refusal: bool,
    ids: Ids,
    max_call: usize,
    max_held: usize,
    queue: Vec<Held>,
    batch: Vec<Slot>,
    held_bytes: usize,
    pending: Vec<Call>,
    /// The event that closed the batch; handled after the verdicts.
    lookahead: Option<Ahead>,
    decided: HashMap<String, Decided>,
    /// The `output_index` of every decided call the client was shown.
    decided_at: HashSet<u64>,
    /// Bytes kept for the stream's life (decided calls, the snapshot).
    kept: usize,
    withheld: Vec<(String, String)>,
    response_id: String,
    /// The response's id, once read, to report ([`Update::Answered`]).
    answered: Option<String>,
    /// The response as `response.created` announced it, for a failure ending.
    snapshot: Option<Snapshot>,
    uses_seq: bool,
    last_seq: Option<u64>,
    began: bool,
    terminal: bool,
    ended: bool,
    /// A call event was read since the driver last polled (`Update::CallRead`).
    call_delta: bool,
    /// Provider-run items seen, not yet reported.
    hosted: Vec<Call>,
    resume: resume::ResumeState,
    /// Token usage seen in the events, for the metrics.
    usage: crate::protocol::usage::Usage,
    /// Text and call deltas are read typed ([`text`], [`delta`]); off only
    /// to compare with the whole-tree path.
    typed: bool,
}

impl StreamRewriter {
    pub fn new(o: &Options) -> StreamRewriter {
        StreamRewriter {
            usage: Default::default(),
            decoder: SseDecoder::new(o.max_event_bytes),
            neutral: o.neutral_message.clone(),
            refusal: o.refusal,
            ids: Ids::new(&o.id_key),
            max_call: o.max_call_bytes,
            max_held: o.max_held_bytes,
            queue: Vec::new(),
            batch: Vec::new(),
            held_bytes: 0,
            pending: Vec::new(),
            lookahead: None,
            decided: HashMap::new(),
            decided_at: HashSet::new(),
            kept: 0,
            withheld: Vec::new(),
            response_id: String::new(),
            answered: None,
            snapshot: None,
            uses_seq: false,
            last_seq: None,
            began: false,
            terminal: false,
            ended: false,
            call_delta: false,
            hosted: Vec::new(),
            resume: resume::ResumeState::new(o.resume, &o.neutral_result),
            typed: true,
        }
    }

    /// Every event read the whole-tree way (the typed text reader off): for
    /// tests that compare the two.
    #[doc(hidden)]
    pub fn whole_tree_only(mut self) -> Self {
        self.typed = false;
        self
    }

    fn handle(&mut self, ev: SseEvent, out: &mut BytesMut) -> Result<(), Error> {
        let Some(raw) = ev.forwardable() else {
            return Ok(());
        };
        let Some(data) = ev.data else {
            // Comments (keep-alives) carry nothing to hold.
            out.put_slice(&raw);
            return Ok(());
        };
        if data.trim_ascii() == b"[DONE]" {
            if !self.batch.is_empty() {
                return Err(malformed("stream ended before its tool calls finished"));
            }
            out.put_slice(&raw);
            return Ok(());
        }
        // Checked once for every reader below; data that is not UTF-8 is no
        // JSON object either.
        let Ok(text) = std::str::from_utf8(&data) else {
            return Err(malformed("event data is not a JSON object"));
        };
        if self.typed {
            let name = ev.event.as_deref();
            if self.pass_text(name, &raw, text, out) {
                return Ok(());
            }
            if let Some(held) = self.hold_delta(name, &raw, &data, text) {
                return held;
            }
            if let Some(passed) = self.pass_envelope(name, &raw, &data, text, out) {
                return passed;
            }
        }
        // The typed readers above take no usage (text and call deltas) or
        // count it themselves (envelopes).
        self.usage.sniff(&data);
        let obj = match crate::json::strict_str(text) {
            Ok(Value::Object(o)) => o,
            _ => return Err(malformed("event data is not a JSON object")),
        };
        map_guard(&obj, &TOP)?;
        let ty = obj
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("event has no type"))?;
        if ev.event.as_deref().is_some_and(|name| name != ty) {
            return Err(malformed("event name differs from its type"));
        }
        if ty == "error" {
            return Err(Error::UpstreamEvent(data));
        }
        self.began = true;
        if self.resume.active() {
            return match self.continued_event((raw, data, obj))? {
                Some((raw, data, obj)) => self.dispatch(raw, data, obj, out),
                None => Ok(()),
            };
        }
        self.dispatch(raw, data, obj, out)
    }

    fn dispatch(
        &mut self,
        raw: Bytes,
        data: Bytes,
        obj: Map<String, Value>,
        out: &mut BytesMut,
    ) -> Result<(), Error> {
        let (raw, data, obj) = match self.resume.active() {
            false => (raw, data, obj),
            true => match self.waiting_event((raw, data, obj)) {
                Some(ev) => ev,
                None => return Ok(()),
            },
        };
        let ty = obj.get("type").and_then(Value::as_str).unwrap_or("");
        let seq = match obj.get("sequence_number") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or_else(|| malformed("sequence_number is not an integer"))?,
            ),
        };
        self.uses_seq |= seq.is_some();
        if let Some(slot) = self.owner(&obj, ty)? {
            return self.hold(slot, raw, data, &obj, seq);
        }
        if !self.batch.is_empty() {
            if self.batch.iter().all(|s| s.done.is_some()) {
                self.lookahead = Some(Ahead::Tree(raw, data, obj));
                self.start_gate()?;
                return Ok(());
            }
            if TERMINAL.contains(&ty) {
                return Err(malformed("response ended before its tool calls finished"));
            }
            // A whole response while a call is open is never sent by a
            // provider, and its `output` would go out as it came.
            if obj.contains_key("response") {
                return Err(malformed("a response snapshot came while a call was open"));
            }
            // Another item's event while a call is open: held to keep the order.
            let held = Held {
                raw,
                ty: ty.to_string(),
                data,
                seq,
                slot: None,
            };
            return self.keep(held);
        }
        self.pass(raw, data, obj, seq, out)
    }

    /// Builds the pending calls from the complete items.
    fn start_gate(&mut self) -> Result<(), Error> {
        let mut calls = Vec::with_capacity(self.batch.len());
        for s in &self.batch {
            let done = s
                .done
                .as_ref()
                .ok_or_else(|| malformed("call item not done"))?;
            let mut call = done.call.clone();
            if s.oversized {
                call.oversized = true;
                call.arguments = String::new();
            }
            calls.push(call);
        }
        self.pending = calls;
        Ok(())
    }

    /// Remembers a decided call item; `shown` when the client sees
    /// something at its place (the call, or the message replacing it).
    fn decide(&mut self, slot: &Slot, d: Decided, shown: bool) {
        self.kept += slot.item_id.len() + DECIDED_COST;
        self.decided.insert(slot.item_id.clone(), d);
        if shown {
            self.decided_at.insert(slot.output_index);
        }
    }
}

impl Events for StreamRewriter {
    fn decoder(&mut self) -> &mut SseDecoder {
        &mut self.decoder
    }
    fn gating(&self) -> bool {
        !self.pending.is_empty()
    }
    fn read_ahead(&mut self, out: &mut BytesMut) -> Result<bool, Error> {
        let Some(ahead) = self.lookahead.take() else {
            return Ok(false);
        };
        self.ahead(ahead, out).map(|()| true)
    }
    fn ended(&self) -> bool {
        self.ended
    }
    fn on_event(&mut self, ev: SseEvent, out: &mut BytesMut) -> Result<(), Error> {
        self.handle(ev, out)
    }
}

impl Rewriter for StreamRewriter {
    fn totals(&mut self) -> Totals {
        Totals {
            usage: std::mem::take(&mut self.usage),
            late_deltas: 0,
        }
    }

    fn held_bytes(&self) -> usize {
        let ahead = self.lookahead.as_ref().map_or(0, Ahead::bytes);
        let pending: usize = self.pending.iter().map(|c| c.arguments.len()).sum();
        let calls: usize = self.batch.iter().map(Slot::kept_bytes).sum();
        self.held_bytes + self.kept + ahead + pending + calls + self.resume.bytes()
    }

    fn push(&mut self, bytes: &[u8]) {
        if !self.ended {
            self.decoder.push(bytes);
        }
    }

    fn process(&mut self, out: &mut BytesMut) -> Result<Step, Error> {
        events::process(self, out)
    }

    fn end(&mut self, out: &mut BytesMut) -> Result<Step, Error> {
        if let Some(step) = events::finish(self, out)? {
            return Ok(step);
        }
        if !self.batch.is_empty() {
            // Complete calls are released only once the response went on:
            // a stream cut after them may have been cut inside the answer.
            if self.terminal && self.batch.iter().all(|s| s.done.is_some()) {
                self.start_gate()?;
                return Ok(Step::Gate);
            }
            return Err(malformed("stream ended before its tool calls finished"));
        }
        if self.began && !self.terminal && !self.ended {
            return Err(malformed("stream ended before the response completed"));
        }
        Ok(Step::NeedMore)
    }

    fn pending(&self) -> &[Call] {
        &self.pending
    }

    fn resolve(&mut self, verdicts: &[Release], out: &mut BytesMut) {
        self.apply(verdicts, out);
    }

    fn fail(&mut self, err: &Error, passthrough: bool, out: &mut BytesMut) -> Vec<Call> {
        self.ended = true;
        self.decoder.clear();
        self.lookahead = None;
        self.queue.clear();
        let mut dropped = std::mem::take(&mut self.pending);
        let batch = std::mem::take(&mut self.batch);
        for s in batch.iter().skip(dropped.len()) {
            let mut call = match &s.done {
                Some(d) => d.call.clone(),
                None => s.opened.clone(),
            };
            call.arguments = String::new();
            dropped.push(call);
        }
        for (c, s) in dropped.iter().zip(&batch) {
            self.withheld.push((c.id.clone(), s.item_type.clone()));
        }
        let (code, message) = err.public_message();
        let mut e = match err {
            Error::UpstreamEvent(body) if passthrough => {
                serde_json::from_slice::<Value>(body).unwrap_or_else(|_| json!({}))
            }
            _ => json!({"type": "error", "code": code, "message": message, "param": null}),
        };
        // The failed response says what the error event said.
        let failure = json!({"code": e.get("code").cloned().unwrap_or(json!(code)),
            "message": e.get("message").cloned().unwrap_or(json!(message))});
        if let Value::Object(m) = &mut e {
            m.insert("type".into(), json!("error"));
            if let Some(n) = self.fresh_number() {
                m.insert("sequence_number".into(), json!(n));
            }
        }
        write_event(out, "error", e.to_string().as_bytes());
        let snapshot = self.snapshot.take().and_then(Snapshot::into_map);
        if let (Some(mut resp), false) = (snapshot, self.terminal) {
            resp.insert("status".into(), json!("failed"));
            resp.insert("error".into(), failure);
            resp.insert("output".into(), json!([]));
            let mut v = json!({"type": "response.failed", "response": resp});
            if let Some(n) = self.fresh_number() {
                v["sequence_number"] = json!(n);
            }
            write_event(out, "response.failed", v.to_string().as_bytes());
            self.terminal = true;
        }
        dropped
    }

    fn poll(&mut self) -> Option<Update> {
        if std::mem::take(&mut self.call_delta) {
            return Some(Update::CallRead);
        }
        if !self.hosted.is_empty() {
            return Some(Update::Hosted(std::mem::take(&mut self.hosted)));
        }
        if let Some(id) = self.answered.take() {
            return Some(Update::Answered(id));
        }
        if !self.withheld.is_empty() && !self.response_id.is_empty() {
            return Some(Update::Withheld(Withheld {
                response_id: self.response_id.clone(),
                calls: std::mem::take(&mut self.withheld),
            }));
        }
        if let Some(r) = self.take_ready() {
            return Some(Update::Resumption(r));
        }
        self.resume_renamed()
            .map(|(first, then)| Update::Renamed { first, then })
    }

    fn continue_with(&mut self, resume: bool) {
        self.continue_stream(resume);
    }

    fn give_up(&mut self, out: &mut BytesMut) {
        self.end_without_follow_up(out);
    }
}

#[cfg(test)]
mod tests;
