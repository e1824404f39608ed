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
//! Fails closed: an event whose JSON repeats a key, whose `event:` name is
//! not its `type`, that names a call already decided, a call whose deltas
//! differ from its final arguments, a response that ends while a call is
//! open, or a stream that ends before the response does. The stream then
//! ends with an `error` event (and `response.failed` when the response began).

use std::collections::HashMap;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Map, Value};

use super::{
    call_id, call_of, classify, dropped_reasoning, neutral_item, neutral_part, Ids, ItemClass,
};
use crate::call::{Call, Release};
use crate::error::Error;
use crate::protocol::json::{write_obj, Obj};
use crate::protocol::sse::{SseDecoder, SseEvent};
use crate::protocol::{map_guard, Options, Rewriter, Step, Withheld};

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
const ITEM: [&str; 8] = [
    "type",
    "id",
    "call_id",
    "name",
    "arguments",
    "input",
    "action",
    "operation",
];

const TERMINAL: [&str; 3] = [
    "response.completed",
    "response.incomplete",
    "response.failed",
];

fn malformed(why: &'static str) -> Error {
    Error::UpstreamUnreadable(why)
}

/// One held event.
#[derive(Debug)]
struct Held {
    raw: Bytes,
    ty: String,
    data: Vec<u8>,
    seq: Option<u64>,
    /// The call (position in the batch) it belongs to; `None` for an event of
    /// another item held only to keep the order.
    slot: Option<usize>,
}

/// A call item of the current batch.
#[derive(Debug)]
struct Slot {
    output_index: u64,
    item_id: String,
    item_type: String,
    /// The text of its deltas, joined.
    deltas: String,
    deltas_seen: bool,
    /// The complete item from `response.output_item.done`.
    done: Option<Value>,
    bytes: usize,
    oversized: bool,
}

#[derive(Debug)]
enum Decided {
    Released { arguments: String },
    Withheld { message: Value },
}

pub struct StreamRewriter {
    decoder: SseDecoder,
    neutral: String,
    ids: Ids,
    max_call: usize,
    max_held: usize,
    queue: Vec<Held>,
    batch: Vec<Slot>,
    held_bytes: usize,
    pending: Vec<Call>,
    /// The event that closed the batch; handled after the verdicts.
    lookahead: Option<(Bytes, Vec<u8>, Map<String, Value>)>,
    decided: HashMap<String, Decided>,
    withheld: Vec<(String, String)>,
    response_id: String,
    /// The response as `response.created` announced it, for a failure ending.
    snapshot: Option<Value>,
    uses_seq: bool,
    last_seq: Option<u64>,
    began: bool,
    terminal: bool,
    ended: bool,
    last_call_delta: Option<Instant>,
}

impl StreamRewriter {
    pub fn new(o: &Options) -> StreamRewriter {
        StreamRewriter {
            decoder: SseDecoder::new(o.max_event_bytes),
            neutral: o.neutral_message.clone(),
            ids: Ids::new(&o.id_key),
            max_call: o.max_call_bytes,
            max_held: o.max_held_bytes,
            queue: Vec::new(),
            batch: Vec::new(),
            held_bytes: 0,
            pending: Vec::new(),
            lookahead: None,
            decided: HashMap::new(),
            withheld: Vec::new(),
            response_id: String::new(),
            snapshot: None,
            uses_seq: false,
            last_seq: None,
            began: false,
            terminal: false,
            ended: false,
            last_call_delta: None,
        }
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
        let obj = match crate::protocol::json::strict_value(&data) {
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
            return Err(Error::UpstreamEvent(Bytes::from(data)));
        }
        self.began = true;
        self.dispatch(raw, data, obj, out)
    }

    fn dispatch(
        &mut self,
        raw: Bytes,
        data: Vec<u8>,
        obj: Map<String, Value>,
        out: &mut BytesMut,
    ) -> Result<(), Error> {
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
                self.lookahead = Some((raw, data, obj));
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

    /// The batch slot an event belongs to; a call item being added opens one.
    fn owner(&mut self, obj: &Map<String, Value>, ty: &str) -> Result<Option<usize>, Error> {
        let oi = match obj.get("output_index") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or_else(|| malformed("output_index is not an integer"))?,
            ),
        };
        let item = obj.get("item");
        let item_class = match item {
            None | Some(Value::Null) => None,
            Some(Value::Object(i)) => {
                let t = i
                    .get("type")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("output item has no type"))?;
                Some((classify(t), t))
            }
            Some(_) => return Err(malformed("output item is not an object")),
        };
        let item_id = match obj.get("item_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => return Err(malformed("item_id is not a string")),
        };
        let own_id = item
            .and_then(|i| i.get("id"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let by_id = item_id.or(own_id).and_then(|id| {
            self.batch
                .iter()
                .position(|s| !s.item_id.is_empty() && s.item_id == id)
        });
        let by_index = oi.and_then(|o| self.batch.iter().position(|s| s.output_index == o));
        if ty == "response.output_item.added" {
            if by_id.is_some() || by_index.is_some() {
                return Err(malformed("an output item was added twice"));
            }
            let Some((ItemClass::Call, t)) = item_class else {
                return Ok(None);
            };
            let (Some(oi), Some(Value::Object(i))) = (oi, item) else {
                return Err(malformed("a call item has no output_index"));
            };
            map_guard(i, &ITEM)?;
            if self.terminal {
                return Err(malformed("a call item came after the response ended"));
            }
            let id = own_id.unwrap_or("").to_string();
            if self.decided.contains_key(&id) {
                return Err(malformed("an output item was added twice"));
            }
            self.batch.push(Slot {
                output_index: oi,
                item_id: id,
                item_type: t.to_string(),
                deltas: String::new(),
                deltas_seen: false,
                done: None,
                bytes: 0,
                oversized: false,
            });
            self.last_call_delta = Some(Instant::now());
            return Ok(Some(self.batch.len() - 1));
        }
        match (by_id, by_index) {
            (Some(a), Some(b)) if a != b => Err(malformed("an event names two different items")),
            (Some(a), _) | (None, Some(a)) => Ok(Some(a)),
            (None, None) => {
                let names_decided = item_id
                    .or(own_id)
                    .is_some_and(|id| self.decided.contains_key(id));
                let is_call = matches!(item_class, Some((ItemClass::Call, _)));
                if names_decided || is_call {
                    return Err(malformed("an event names a call that is not open"));
                }
                Ok(None)
            }
        }
    }

    fn hold(
        &mut self,
        i: usize,
        raw: Bytes,
        data: Vec<u8>,
        obj: &Map<String, Value>,
        seq: Option<u64>,
    ) -> Result<(), Error> {
        let (max_call, max_held) = (self.max_call, self.max_held);
        let held_bytes = self.held_bytes;
        let slot = &mut self.batch[i];
        if slot.done.is_some() {
            return Err(malformed("an event came after its call item was done"));
        }
        let ty = obj.get("type").and_then(Value::as_str).unwrap_or("");
        if ty == "response.output_item.done" {
            let Some(Value::Object(item)) = obj.get("item") else {
                return Err(malformed("output_item.done has no item"));
            };
            map_guard(item, &ITEM)?;
            let t = item.get("type").and_then(Value::as_str).unwrap_or("");
            let id = item.get("id").and_then(Value::as_str).unwrap_or("");
            if t != slot.item_type || (!slot.item_id.is_empty() && id != slot.item_id) {
                return Err(malformed("a call item changed between added and done"));
            }
            let item = Value::Object(item.clone());
            if !slot.oversized {
                check_deltas(slot, &item)?;
            }
            slot.done = Some(item);
        } else if ty.ends_with(".delta") {
            if let Some(d) = obj.get("delta") {
                let d = d
                    .as_str()
                    .ok_or_else(|| malformed("a call delta is not a string"))?;
                slot.deltas_seen = true;
                if !slot.oversized {
                    slot.deltas.push_str(d);
                }
            }
        } else if ty.ends_with(".done") {
            // `…arguments.done` / `…input.done`: the whole text once more.
            for key in ["arguments", "input"] {
                if let Some(v) = obj.get(key) {
                    let v = v
                        .as_str()
                        .ok_or_else(|| malformed("call text is not a string"))?;
                    if slot.deltas_seen && !slot.oversized && v != slot.deltas {
                        return Err(malformed("a call's deltas differ from its final text"));
                    }
                }
            }
        }
        self.last_call_delta = Some(Instant::now());
        slot.bytes += raw.len();
        if slot.oversized {
            return Ok(());
        }
        if slot.bytes > 2 * max_call + 64 * 1024 || held_bytes + raw.len() > max_held {
            // Too large to hold: rejected without keeping its events.
            slot.oversized = true;
            slot.deltas = String::new();
            let freed: usize = self
                .queue
                .iter()
                .filter(|h| h.slot == Some(i))
                .map(|h| h.raw.len() + h.data.len())
                .sum();
            self.queue.retain(|h| h.slot != Some(i));
            self.held_bytes -= freed;
            return Ok(());
        }
        let ty = ty.to_string();
        self.keep(Held {
            raw,
            ty,
            data,
            seq,
            slot: Some(i),
        })
    }

    fn keep(&mut self, h: Held) -> Result<(), Error> {
        self.held_bytes += h.raw.len() + h.data.len();
        if self.held_bytes > self.max_held.saturating_mul(2) {
            return Err(malformed("held events over limits.max_held_args_bytes"));
        }
        self.queue.push(h);
        Ok(())
    }

    /// Builds the pending calls from the complete items.
    fn start_gate(&mut self) -> Result<(), Error> {
        let mut calls = Vec::with_capacity(self.batch.len());
        for s in &self.batch {
            let item = s
                .done
                .as_ref()
                .ok_or_else(|| malformed("call item not done"))?;
            let mut call = call_of(item, self.max_call)?;
            if s.oversized {
                call.oversized = true;
                call.arguments = String::new();
            }
            calls.push(call);
        }
        self.pending = calls;
        Ok(())
    }

    /// An event of no held call: renumbered if needed, its response rewritten.
    fn pass(
        &mut self,
        raw: Bytes,
        data: Vec<u8>,
        obj: Map<String, Value>,
        seq: Option<u64>,
        out: &mut BytesMut,
    ) -> Result<(), Error> {
        let ty = obj
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut output = None;
        if let Some(Value::Object(resp)) = obj.get("response") {
            if let Some(id) = resp.get("id").and_then(Value::as_str) {
                if self.response_id.is_empty() {
                    self.response_id = id.to_string();
                }
            }
            if self.snapshot.is_none() {
                self.snapshot = Some(Value::Object(resp.clone()));
            }
            if let Some(Value::Array(items)) = resp.get("output") {
                output = self.final_output(items)?;
            }
        }
        if TERMINAL.contains(&ty.as_str()) {
            self.terminal = true;
        }
        let n = self.number(seq);
        if output.is_none() && n == seq {
            out.put_slice(&raw);
            return Ok(());
        }
        let text = std::str::from_utf8(&data).map_err(|_| malformed("event is not UTF-8"))?;
        let top: Obj = serde_json::from_str(text).map_err(|_| malformed("event is not JSON"))?;
        let mut body = String::with_capacity(text.len());
        write_obj(&mut body, &top, |k, v| match k {
            "sequence_number" if n != seq => n.map(|n| n.to_string()),
            "response" => output.as_ref().and_then(|o| {
                let resp = Obj::of(v)?;
                let mut r = String::new();
                write_obj(&mut r, &resp, |k, _| (k == "output").then(|| o.clone()));
                Some(r)
            }),
            _ => None,
        });
        write_event(out, &ty, body.as_bytes());
        Ok(())
    }

    /// The next sequence number for an event that had `seq`: as it was unless
    /// that would not be above the last one sent.
    fn number(&mut self, seq: Option<u64>) -> Option<u64> {
        let s = seq?;
        let n = match self.last_seq {
            Some(l) if s <= l => l + 1,
            _ => s,
        };
        self.last_seq = Some(n);
        Some(n)
    }

    /// A number for a new event, when the stream numbers its events.
    fn fresh_number(&mut self) -> Option<u64> {
        if !self.uses_seq {
            return None;
        }
        let n = self.last_seq.map_or(0, |l| l + 1);
        self.last_seq = Some(n);
        Some(n)
    }

    /// A response's `output` as the client may see it; `None` when unchanged.
    fn final_output(&mut self, items: &[Value]) -> Result<Option<String>, Error> {
        let mut changed = false;
        let mut new: Vec<Value> = Vec::with_capacity(items.len());
        let mut classes = Vec::with_capacity(items.len());
        for item in items {
            let t = item.get("type").and_then(Value::as_str).unwrap_or("");
            let class = classify(t);
            if class != ItemClass::Call {
                classes.push((class, false));
                new.push(item.clone());
                continue;
            }
            let id = item.get("id").and_then(Value::as_str).unwrap_or("");
            let replaced = match self.decided.get(id) {
                Some(Decided::Released { arguments }) => {
                    let same =
                        call_of(item, self.max_call).is_ok_and(|c| &c.arguments == arguments);
                    (!same).then(|| neutral_item(&self.ids.message_id(id), &self.neutral))
                }
                Some(Decided::Withheld { message }) => Some(message.clone()),
                None => Some(neutral_item(&self.ids.message_id(id), &self.neutral)),
            };
            if replaced.is_some() && !matches!(self.decided.get(id), Some(Decided::Withheld { .. }))
            {
                // A call the stream never released: withheld here too.
                self.withheld
                    .push((call_id(item)?.to_string(), t.to_string()));
                self.decided.insert(
                    id.to_string(),
                    Decided::Withheld {
                        message: neutral_item(&self.ids.message_id(id), &self.neutral),
                    },
                );
            }
            classes.push((ItemClass::Call, replaced.is_some()));
            match replaced {
                Some(m) => {
                    changed = true;
                    new.push(m);
                }
                None => new.push(item.clone()),
            }
        }
        let drop = dropped_reasoning(&classes);
        if drop.iter().any(|d| *d) {
            changed = true;
            new = new
                .into_iter()
                .zip(drop)
                .filter(|(_, d)| !d)
                .map(|(v, _)| v)
                .collect();
        }
        Ok(changed.then(|| Value::Array(new).to_string()))
    }

    /// Sends a held event, renumbered if needed.
    fn release(&mut self, h: &Held, out: &mut BytesMut) {
        let n = self.number(h.seq);
        if n == h.seq {
            out.put_slice(&h.raw);
            return;
        }
        let text = String::from_utf8_lossy(&h.data);
        let Ok(top) = serde_json::from_str::<Obj>(&text) else {
            out.put_slice(&h.raw);
            return;
        };
        let mut body = String::with_capacity(text.len());
        write_obj(&mut body, &top, |k, _| {
            (k == "sequence_number")
                .then(|| n.map(|n| n.to_string()))
                .flatten()
        });
        write_event(out, &h.ty, body.as_bytes());
    }

    /// The six events of a complete assistant message at `oi`.
    fn replacement(&mut self, oi: u64, id: &str, out: &mut BytesMut) {
        let text = self.neutral.clone();
        let added = json!({"id": id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"});
        let part = neutral_part("");
        let events = [
            (
                "response.output_item.added",
                json!({"output_index": oi, "item": added}),
            ),
            (
                "response.content_part.added",
                json!({"item_id": id, "output_index": oi, "content_index": 0, "part": part}),
            ),
            (
                "response.output_text.delta",
                json!({"item_id": id, "output_index": oi, "content_index": 0, "delta": text, "logprobs": []}),
            ),
            (
                "response.output_text.done",
                json!({"item_id": id, "output_index": oi, "content_index": 0, "text": text, "logprobs": []}),
            ),
            (
                "response.content_part.done",
                json!({"item_id": id, "output_index": oi, "content_index": 0, "part": neutral_part(&text)}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": oi, "item": neutral_item(id, &text)}),
            ),
        ];
        for (ty, mut v) in events {
            v["type"] = json!(ty);
            if let Some(n) = self.fresh_number() {
                v["sequence_number"] = json!(n);
            }
            write_event(out, ty, v.to_string().as_bytes());
        }
    }
}

/// A call's deltas, and its `.done` text, must be the text its final item carries.
fn check_deltas(slot: &Slot, item: &Value) -> Result<(), Error> {
    if !slot.deltas_seen {
        return Ok(());
    }
    let key = match slot.item_type.as_str() {
        "function_call" => "arguments",
        "custom_tool_call" => "input",
        _ => return Ok(()),
    };
    let text = item.get(key).and_then(Value::as_str).unwrap_or("");
    if text != slot.deltas {
        return Err(malformed("a call's deltas differ from its final text"));
    }
    Ok(())
}

/// Appends `event: <ty>` and `data: <data>`.
fn write_event(out: &mut BytesMut, ty: &str, data: &[u8]) {
    out.put_slice(b"event: ");
    out.put_slice(ty.as_bytes());
    out.put_slice(b"\ndata: ");
    out.put_slice(data);
    out.put_slice(b"\n\n");
}

impl Rewriter for StreamRewriter {
    fn push(&mut self, bytes: &[u8]) {
        if !self.ended {
            self.decoder.push(bytes);
        }
    }

    fn process(&mut self, out: &mut BytesMut) -> Result<Step, Error> {
        loop {
            if !self.pending.is_empty() {
                return Ok(Step::Gate);
            }
            if let Some((raw, data, obj)) = self.lookahead.take() {
                self.dispatch(raw, data, obj, out)?;
                continue;
            }
            if self.ended {
                self.decoder.clear();
                return Ok(Step::NeedMore);
            }
            match self.decoder.next_event() {
                Ok(Some(ev)) => self.handle(ev, out)?,
                Ok(None) => return Ok(Step::NeedMore),
                Err(_) => return Err(malformed("event larger than limits.max_event_bytes")),
            }
        }
    }

    fn end(&mut self, out: &mut BytesMut) -> Result<Step, Error> {
        if !self.pending.is_empty() {
            return Ok(Step::Gate);
        }
        if let Some((raw, data, obj)) = self.lookahead.take() {
            self.dispatch(raw, data, obj, out)?;
            if !self.pending.is_empty() {
                return Ok(Step::Gate);
            }
        }
        if !self.ended {
            if let Some(ev) = self.decoder.finish() {
                self.handle(ev, out)?;
                if !self.pending.is_empty() {
                    return Ok(Step::Gate);
                }
            }
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
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let batch = std::mem::take(&mut self.batch);
        let allowed: Vec<bool> = (0..batch.len())
            .map(|i| Release::at(verdicts, i).allowed() && !batch[i].oversized)
            .collect();
        let mut message_ids = Vec::with_capacity(batch.len());
        for ((slot, call), ok) in batch.iter().zip(&pending).zip(&allowed) {
            let key = slot.item_id.clone();
            if *ok {
                let arguments = call.arguments.clone();
                self.decided.insert(key, Decided::Released { arguments });
                message_ids.push(String::new());
            } else {
                let id = self.ids.message_id(&slot.item_id);
                let message = neutral_item(&id, &self.neutral);
                self.decided.insert(key, Decided::Withheld { message });
                self.withheld
                    .push((call.id.clone(), slot.item_type.clone()));
                message_ids.push(id);
            }
        }
        let queue = std::mem::take(&mut self.queue);
        let mut replaced = vec![false; batch.len()];
        for h in &queue {
            match h.slot {
                Some(i) if allowed[i] => self.release(h, out),
                Some(i) => {
                    if !replaced[i] {
                        replaced[i] = true;
                        self.replacement(batch[i].output_index, &message_ids[i], out);
                    }
                }
                None => self.release(h, out),
            }
        }
        // An oversized call kept no events: its replacement still goes out.
        for (i, slot) in batch.iter().enumerate() {
            if !allowed[i] && !replaced[i] {
                self.replacement(slot.output_index, &message_ids[i], out);
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
        let batch = std::mem::take(&mut self.batch);
        for s in batch.iter().skip(dropped.len()) {
            let item = s
                .done
                .clone()
                .unwrap_or_else(|| json!({"type": s.item_type, "id": s.item_id}));
            let mut call = call_of(&item, self.max_call).unwrap_or_default();
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
        if let Value::Object(m) = &mut e {
            m.insert("type".into(), json!("error"));
            if let Some(n) = self.fresh_number() {
                m.insert("sequence_number".into(), json!(n));
            }
        }
        write_event(out, "error", e.to_string().as_bytes());
        if let (Some(Value::Object(mut resp)), false) = (self.snapshot.take(), self.terminal) {
            resp.insert("status".into(), json!("failed"));
            resp.insert("error".into(), json!({"code": code, "message": message}));
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

    fn last_call_delta(&self) -> Option<Instant> {
        self.last_call_delta
    }

    fn take_withheld(&mut self) -> Option<Withheld> {
        if self.withheld.is_empty() || self.response_id.is_empty() {
            return None;
        }
        Some(Withheld {
            response_id: self.response_id.clone(),
            calls: std::mem::take(&mut self.withheld),
        })
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
