//! What the Responses stream rewriter writes: events passed on (renumbered,
//! their response's `output` rewritten), held events released, and the
//! message that replaces a withheld call.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Map, Value};

use std::collections::HashSet;

use super::{malformed, Decided, Held, Snapshot, StreamRewriter, TERMINAL};
use crate::error::Error;
use crate::json::{write_obj, Obj};
use crate::protocol::map_guard;
use crate::protocol::responses::{
    call_of, class_of, dropped_reasoning, fingerprint, neutral_item, neutral_part, ItemClass,
    ITEM_KEYS,
};

/// The keys toolgate reads in a response; one that only folds to one of
/// them fails the event.
const RESPONSE_KEYS: [&str; 2] = ["id", "output"];
use crate::protocol::write_named_event as write_event;

impl StreamRewriter {
    /// An event of no held call: renumbered if needed, its response rewritten.
    pub(super) fn pass(
        &mut self,
        raw: Bytes,
        data: Bytes,
        obj: Map<String, Value>,
        seq: Option<u64>,
        out: &mut BytesMut,
    ) -> Result<(), Error> {
        let ty = obj.get("type").and_then(Value::as_str).unwrap_or("");
        let mut output = None;
        match obj.get("response") {
            None | Some(Value::Null) => {}
            Some(Value::Object(resp)) => {
                // `Output` beside `output`: a case-blind reader may take either.
                map_guard(resp, &RESPONSE_KEYS)?;
                let id = resp.get("id").and_then(Value::as_str);
                self.note_response(id, 3 * data.len(), || Snapshot::Tree(resp.clone()));
                match resp.get("output") {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(items)) => output = self.final_output(items)?,
                    Some(_) => return Err(malformed("a response's output is not an array")),
                }
            }
            Some(_) => return Err(malformed("an event's response is not an object")),
        }
        self.emit(&raw, &data, ty, seq, output, out)
    }

    /// The response's id and first snapshot (`size` bytes kept, charged),
    /// from the first event that has them.
    pub(super) fn note_response(
        &mut self,
        id: Option<&str>,
        size: usize,
        snapshot: impl FnOnce() -> Snapshot,
    ) {
        if let Some(id) = id {
            if self.response_id.is_empty() {
                self.response_id = id.to_string();
                self.answered = Some(id.to_string());
                self.kept += id.len();
            }
        }
        if self.snapshot.is_none() {
            self.snapshot = Some(snapshot());
            self.kept += size;
        }
    }

    /// Sends an event of no held call: as it came, unless it needs another
    /// number or its response another `output`.
    pub(super) fn emit(
        &mut self,
        raw: &Bytes,
        data: &[u8],
        ty: &str,
        seq: Option<u64>,
        output: Option<String>,
        out: &mut BytesMut,
    ) -> Result<(), Error> {
        if TERMINAL.contains(&ty) {
            self.terminal = true;
        }
        let n = self.number(seq);
        if output.is_none() && n == seq {
            out.put_slice(raw);
            return Ok(());
        }
        let text = std::str::from_utf8(data).map_err(|_| malformed("event is not UTF-8"))?;
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
        write_event(out, ty, body.as_bytes());
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
    pub(super) fn fresh_number(&mut self) -> Option<u64> {
        if !self.uses_seq {
            return None;
        }
        let n = self.last_seq.map_or(0, |l| l + 1);
        self.last_seq = Some(n);
        Some(n)
    }

    /// A response's `output` as the client may see it; `None` when unchanged.
    /// Each call item must be one the stream decided, shown once: a
    /// released one exactly as it was gated (else the response fails), a
    /// withheld one replaced by its neutral message. A call item without
    /// an id, shown twice, or never shown by the stream fails the response.
    pub(super) fn final_output(&mut self, items: &[Value]) -> Result<Option<String>, Error> {
        let mut changed = false;
        let mut new: Vec<Value> = Vec::with_capacity(items.len());
        let mut classes = Vec::with_capacity(items.len());
        let mut seen: HashSet<&str> = HashSet::new();
        for item in items {
            let Value::Object(m) = item else {
                return Err(malformed("an output item is not an object"));
            };
            map_guard(m, &ITEM_KEYS)?;
            let class = class_of(item);
            if class != ItemClass::Call {
                classes.push((class, false));
                new.push(item.clone());
                continue;
            }
            let id = match m.get("id") {
                Some(Value::String(id)) if !id.is_empty() => id.as_str(),
                _ => return Err(malformed("a call item has no id")),
            };
            if !seen.insert(id) {
                return Err(malformed("a response's output shows a call twice"));
            }
            let t = item.get("type").and_then(Value::as_str).unwrap_or("");
            let withheld = match self.decided.get(id) {
                Some(Decided::Released(fp)) => {
                    let call = call_of(item, self.max_call)?;
                    if fingerprint(id, t, &call) != *fp {
                        return Err(malformed("a response's output differs from its stream"));
                    }
                    false
                }
                Some(Decided::Withheld) => true,
                None => {
                    return Err(malformed(
                        "a response's output shows a call its stream did not",
                    ))
                }
            };
            classes.push((ItemClass::Call, withheld));
            match withheld {
                true => {
                    changed = true;
                    new.push(neutral_item(
                        &self.ids.message_id(id),
                        &self.neutral,
                        self.refusal,
                    ));
                }
                false => new.push(item.clone()),
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
    pub(super) fn release(&mut self, h: &Held, out: &mut BytesMut) {
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
    pub(super) fn replacement(&mut self, oi: u64, id: &str, out: &mut BytesMut) {
        let (text, r) = (self.neutral.clone(), self.refusal);
        let added = json!({"id": id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"});
        let at = |mut v: Value| {
            v["item_id"] = json!(id);
            v["output_index"] = json!(oi);
            v["content_index"] = json!(0);
            v
        };
        // A refusal part has its own delta and done events.
        let (delta, done) = match r {
            true => (
                ("response.refusal.delta", at(json!({"delta": text}))),
                ("response.refusal.done", at(json!({"refusal": text}))),
            ),
            false => (
                (
                    "response.output_text.delta",
                    at(json!({"delta": text, "logprobs": []})),
                ),
                (
                    "response.output_text.done",
                    at(json!({"text": text, "logprobs": []})),
                ),
            ),
        };
        let events = [
            (
                "response.output_item.added",
                json!({"output_index": oi, "item": added}),
            ),
            (
                "response.content_part.added",
                at(json!({"part": neutral_part("", r)})),
            ),
            delta,
            done,
            (
                "response.content_part.done",
                at(json!({"part": neutral_part(&text, r)})),
            ),
            (
                "response.output_item.done",
                json!({"output_index": oi, "item": neutral_item(id, &text, r)}),
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
