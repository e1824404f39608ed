//! The Messages streaming rewriter: text passes at once, `tool_use` blocks are held.
//!
//! Content blocks come one after another, each from `content_block_start`
//! through its deltas to `content_block_stop`. A call block (see
//! [`super::classify`]) is held over that whole span, its `input_json_delta`
//! fragments joined; calls that follow one another are gated together when
//! the next event is not another call (a `ping` in between passes). An
//! allowed call's events go out as they came; a withheld one's are dropped,
//! and every later block's `index` is renumbered so the agent's indices stay
//! contiguous from 0. When calls were withheld and none was released, a text
//! block with the neutral message closes the content and a `tool_use` stop
//! reason becomes `end_turn`. Text and thinking blocks are never held;
//! provider-run calls (`server_tool_use`, `mcp_tool_use`) pass and are
//! reported for the audit trail.
//!
//! Every event is parsed. An event with no `event:` line is written anew with
//! one (the SDKs dispatch on the name, other readers on the data's `type`, so
//! both must agree). Fails closed: an `error` event, an `event:` name that is
//! not the data's type, a repeated key or one that only folds to a known key,
//! a block that starts while another is open or with an index that does not
//! increase, a delta or stop for a block that is not open, a `message_start`
//! that already holds content, a call whose start `input` says other than its
//! deltas, and a stream that ends before its message does. The stream
//! then ends with an `error` event.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value};

use super::call_of;
use crate::call::{Call, Release};
use crate::error::Error;
use crate::protocol::events;
use crate::protocol::sse::{SseDecoder, SseEvent};
use crate::protocol::{map_guard, Options, Rewriter, Step};
use crate::protocol::{Totals, Update};

/// The keys toolgate reads at the top of an event.
const TOP: [&str; 6] = [
    "type",
    "index",
    "content_block",
    "delta",
    "message",
    "error",
];

/// The event types of the Messages stream.
const EVENTS: [&str; 8] = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
];

mod delta;
mod driven;
mod emit;
mod hold;
mod resume;
mod text;

use crate::protocol::malformed;
use crate::protocol::write_named_event as write_event;

/// One parsed event.
struct Event {
    raw: Bytes,
    data: Bytes,
    obj: Map<String, Value>,
    ty: String,
    /// It came with an `event:` line naming its type.
    named: bool,
}

/// A held event; `slot` is the call it belongs to (`None`: an event of no
/// block, held only to keep the order).
struct Held {
    ev: Event,
    slot: Option<usize>,
}

/// A call block of the current batch.
struct Slot {
    in_index: u64,
    block: Map<String, Value>,
    /// What `block` costs the budget (none once its input is dropped).
    block_bytes: usize,
    /// The `partial_json` fragments, joined.
    json: String,
    bytes: usize,
    oversized: bool,
}

/// The block open now, by its upstream index, and where its events go.
#[derive(Clone, Copy)]
struct Open {
    in_index: u64,
    place: Place,
}

#[derive(Clone, Copy)]
enum Place {
    /// Passing, at this index for the agent.
    Out(u64),
    /// Held: the call at this position of the batch.
    Held(usize),
}

pub struct StreamRewriter {
    decoder: SseDecoder,
    neutral: std::sync::Arc<str>,
    max_call: usize,
    max_held: usize,
    began: bool,
    stopped: bool,
    ended: bool,
    last_in: Option<u64>,
    out_next: u64,
    open: Option<Open>,
    batch: Vec<Slot>,
    queue: Vec<Held>,
    held_bytes: usize,
    pending: Vec<Call>,
    /// The event that closed the batch; handled after the verdicts.
    lookahead: Option<Event>,
    released: usize,
    withheld: usize,
    turn_closed: bool,
    hosted: Vec<Call>,
    /// A call event was read since the driver last polled (`Update::CallRead`).
    call_delta: bool,
    resume: resume::ResumeState,
    /// Token usage seen in the events, for the metrics.
    usage: crate::protocol::usage::Usage,
    /// Text and call deltas are read typed ([`text`], [`delta`]); off only
    /// to compare with the whole-tree path.
    typed: bool,
    /// The message's id, until reported (`Update::Answered`).
    answered: Option<String>,
    /// The message's id, for the calls withheld from it.
    message_id: String,
    /// `(tool_use id, "tool_use")` of calls just withheld, until reported:
    /// a thread's next request answers them.
    withheld_ids: Vec<(String, String)>,
}

impl StreamRewriter {
    pub fn new(o: &Options) -> StreamRewriter {
        StreamRewriter {
            usage: Default::default(),
            decoder: SseDecoder::new(o.max_event_bytes),
            neutral: o.neutral_message.clone(),
            max_call: o.max_call_bytes,
            max_held: o.max_held_bytes,
            began: false,
            stopped: false,
            ended: false,
            last_in: None,
            out_next: 0,
            open: None,
            batch: Vec::new(),
            queue: Vec::new(),
            held_bytes: 0,
            pending: Vec::new(),
            lookahead: None,
            released: 0,
            withheld: 0,
            turn_closed: false,
            hosted: Vec::new(),
            call_delta: false,
            resume: resume::ResumeState::new(o.resume, &o.neutral_result),
            typed: true,
            answered: None,
            message_id: String::new(),
            withheld_ids: Vec::new(),
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
        self.usage.sniff(&data);
        // Not part of the Messages stream, but sent by some compatible
        // servers: an empty event, and a chat-style `[DONE]`. They carry
        // nothing and are dropped; `[DONE]` while a call is held ends the
        // stream too early.
        match data.trim_ascii() {
            b"" => return Ok(()),
            b"[DONE]" if self.batch.is_empty() && self.open.is_none() => return Ok(()),
            b"[DONE]" => return Err(malformed("stream ended before its tool calls finished")),
            _ => {}
        }
        if self.typed {
            let name = ev.event.as_deref();
            if self.pass_text(name, &raw, &data, out) {
                return Ok(());
            }
            if let Some(held) = self.hold_fragment(name, &raw, &data) {
                return held;
            }
        }
        let obj = match crate::json::strict_value(&data) {
            Ok(Value::Object(o)) => o,
            _ => return Err(malformed("event data is not a JSON object")),
        };
        map_guard(&obj, &TOP)?;
        let ty = obj
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("event has no type"))?
            .to_string();
        if ev.event.as_deref().is_some_and(|name| name != ty) {
            return Err(malformed("event name differs from its type"));
        }
        if crate::fold::impersonates(&ty, &EVENTS) {
            return Err(malformed(
                "an event type differs from a known one only by case",
            ));
        }
        if ty == "error" {
            return Err(Error::UpstreamEvent(data));
        }
        let named = ev.event.is_some();
        let ev = Event {
            raw,
            data,
            obj,
            ty,
            named,
        };
        if !self.resume.active() {
            return self.dispatch(ev, out);
        }
        match self.resumed_event(ev) {
            Some(ev) => self.dispatch(ev, out),
            None => Ok(()),
        }
    }

    fn dispatch(&mut self, ev: Event, out: &mut BytesMut) -> Result<(), Error> {
        let batch_complete = !self.batch.is_empty() && self.open.is_none();
        if batch_complete && ev.ty != "ping" && !self.starts_call(&ev)? {
            self.lookahead = Some(ev);
            self.start_gate()?;
            return Ok(());
        }
        match ev.ty.as_str() {
            // Kept in order behind held calls (allow-all stays byte-identical).
            "ping" if !self.batch.is_empty() => self.keep(Held { ev, slot: None })?,
            "ping" => self.emit(&ev, None, out),
            "message_start" => {
                if self.began {
                    return Err(malformed("a second message_start"));
                }
                let Some(Value::Object(msg)) = ev.obj.get("message") else {
                    return Err(malformed("message_start has no message"));
                };
                map_guard(msg, &["content", "stop_reason", "type", "role"])?;
                match msg.get("content") {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(a)) if a.is_empty() => {}
                    Some(_) => return Err(malformed("message_start already holds content")),
                }
                self.began = true;
                if let Some(Value::String(id)) = msg.get("id") {
                    self.message_id = id.clone();
                    self.answered = Some(id.clone());
                }
                self.started(msg);
                self.emit(&ev, None, out);
            }
            "content_block_start" => self.block_start(ev, out)?,
            "content_block_delta" | "content_block_stop" => self.block_event(ev, out)?,
            "message_delta" | "message_stop" => {
                if self.open.is_some() {
                    return Err(malformed("the message ended while a block was open"));
                }
                if !self.began || self.stopped {
                    return Err(malformed("a message event outside a message"));
                }
                if self.try_resume(&ev) {
                    self.stopped |= ev.ty == "message_stop";
                    return Ok(());
                }
                let end_turn = self.close_turn(out);
                if ev.ty == "message_stop" {
                    self.stopped = true;
                    self.emit(&ev, None, out);
                } else {
                    self.emit_delta(&ev, end_turn, out)?;
                }
            }
            _ => {
                // An event type toolgate does not know: kept in order.
                if !self.batch.is_empty() {
                    return self.keep(Held { ev, slot: None });
                }
                self.emit(&ev, None, out);
            }
        }
        Ok(())
    }

    /// Builds the pending calls from the complete blocks.
    fn start_gate(&mut self) -> Result<(), Error> {
        let mut calls = Vec::with_capacity(self.batch.len());
        for s in &self.batch {
            let start = s.block.get("input");
            let start_empty = match start {
                None | Some(Value::Null) => true,
                Some(Value::Object(m)) => m.is_empty(),
                Some(_) => false,
            };
            let input = match (s.json.is_empty(), start_empty) {
                (true, true) => "{}".to_string(),
                (true, false) => start.map(Value::to_string).unwrap_or_default(),
                (false, true) => s.json.clone(),
                // Both: readers keep the fragments; they must say the same.
                (false, false) => {
                    let same = crate::json::strict_value(s.json.as_bytes())
                        .is_ok_and(|v| Some(&v) == start);
                    if !same {
                        return Err(malformed(
                            "a call carries other input in its start than in its deltas",
                        ));
                    }
                    s.json.clone()
                }
            };
            let mut call = call_of(&s.block, input, self.max_call)?;
            if s.oversized {
                call.oversized = true;
                call.arguments = String::new();
            }
            calls.push(call);
        }
        self.pending = calls;
        Ok(())
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
        let calls: usize = self
            .batch
            .iter()
            .map(|s| s.json.len() + if s.oversized { 0 } else { s.block_bytes })
            .sum();
        let pending: usize = self.pending.iter().map(|c| c.arguments.len()).sum();
        self.held_bytes + calls + pending
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
        // Complete calls with nothing after them: the stream may have been
        // cut inside the message, so they are dropped, not released.
        if !self.batch.is_empty() || self.open.is_some() {
            return Err(malformed("stream ended before its tool calls finished"));
        }
        if self.began && !self.stopped && !self.ended {
            return Err(malformed("stream ended before the message completed"));
        }
        Ok(Step::NeedMore)
    }

    fn pending(&self) -> &[Call] {
        &self.pending
    }

    fn resolve(&mut self, verdicts: &[Release], out: &mut BytesMut) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let batch = std::mem::take(&mut self.batch);
        let mut places = Vec::with_capacity(batch.len());
        for (i, slot) in batch.iter().enumerate() {
            if Release::at(verdicts, i).allowed() && !slot.oversized {
                places.push(Some(self.out_next));
                self.out_next += 1;
                self.released += 1;
            } else {
                places.push(None);
                self.withheld += 1;
                if let Some(call) = pending.get(i) {
                    self.withheld_ids.push((call.id.clone(), "tool_use".into()));
                }
                if let (true, Some(call)) = (self.resume.allowed && !slot.oversized, pending.get(i))
                {
                    self.resume
                        .withheld(&slot.block, call, Release::at(verdicts, i));
                }
            }
        }
        for h in std::mem::take(&mut self.queue) {
            match h.slot {
                Some(i) => {
                    if let Some(o) = places[i] {
                        let index = batch[i].in_index;
                        self.emit(&h.ev, (o != index).then_some(o), out);
                    }
                }
                None => self.emit(&h.ev, None, out),
            }
        }
        self.held_bytes = 0;
    }

    fn fail(&mut self, err: &Error, passthrough: bool, out: &mut BytesMut) -> Vec<Call> {
        self.ended = true;
        self.decoder.clear();
        self.lookahead = None;
        self.queue.clear();
        let mut dropped = std::mem::take(&mut self.pending);
        for s in std::mem::take(&mut self.batch).iter().skip(dropped.len()) {
            let mut call = call_of(&s.block, String::new(), self.max_call).unwrap_or_default();
            call.arguments = String::new();
            dropped.push(call);
        }
        let body = match err {
            Error::UpstreamEvent(body) if passthrough => body.clone(),
            _ => super::error_body(err),
        };
        write_event(out, "error", &body);
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
        if !self.withheld_ids.is_empty() && !self.message_id.is_empty() {
            return Some(Update::Withheld(crate::protocol::Withheld {
                response_id: self.message_id.clone(),
                calls: std::mem::take(&mut self.withheld_ids),
            }));
        }
        self.take_ready().map(Update::Resumption)
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
