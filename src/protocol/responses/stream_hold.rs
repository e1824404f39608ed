//! Which held call an event belongs to, and holding it: a call item opens a
//! slot at `response.output_item.added`, its events are kept in order, its
//! deltas checked against its final text, and its size bounded.

use bytes::Bytes;
use serde_json::{Map, Value};

use super::{malformed, Held, Slot, StreamRewriter};
use crate::error::Error;
use crate::protocol::map_guard;
use crate::protocol::responses::{classify, ItemClass, ITEM_KEYS};

impl StreamRewriter {
    /// The batch slot an event belongs to; a call item being added opens one.
    pub(super) fn owner(
        &mut self,
        obj: &Map<String, Value>,
        ty: &str,
    ) -> Result<Option<usize>, Error> {
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
                // Any item, not only a call: a key a case-blind reader would
                // take for a call's makes another item look like one.
                map_guard(i, &ITEM_KEYS)?;
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
            map_guard(i, &ITEM_KEYS)?;
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
            self.call_delta = true;
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

    pub(super) fn hold(
        &mut self,
        i: usize,
        raw: Bytes,
        data: Bytes,
        obj: &Map<String, Value>,
        seq: Option<u64>,
    ) -> Result<(), Error> {
        let slot = &mut self.batch[i];
        if slot.done.is_some() {
            return Err(malformed("an event came after its call item was done"));
        }
        let ty = obj.get("type").and_then(Value::as_str).unwrap_or("");
        if ty == "response.output_item.done" {
            let Some(Value::Object(item)) = obj.get("item") else {
                return Err(malformed("output_item.done has no item"));
            };
            map_guard(item, &ITEM_KEYS)?;
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
        let ty = ty.to_string();
        self.keep_call_event(i, raw, data, ty, seq)
    }

    /// Keeps an event of the call in slot `i` (its text already taken),
    /// within the bounds of one call and of all that is held.
    pub(super) fn keep_call_event(
        &mut self,
        i: usize,
        raw: Bytes,
        data: Bytes,
        ty: String,
        seq: Option<u64>,
    ) -> Result<(), Error> {
        let (max_call, max_held) = (self.max_call, self.max_held);
        let held_bytes = self.held_bytes;
        let slot = &mut self.batch[i];
        self.call_delta = true;
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
        self.keep(Held {
            raw,
            ty,
            data,
            seq,
            slot: Some(i),
        })
    }

    pub(super) fn keep(&mut self, h: Held) -> Result<(), Error> {
        self.held_bytes += h.raw.len() + h.data.len();
        if self.held_bytes > self.max_held.saturating_mul(2) {
            return Err(malformed("held events over limits.max_held_args_bytes"));
        }
        self.queue.push(h);
        Ok(())
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
