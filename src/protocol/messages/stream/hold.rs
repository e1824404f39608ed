//! Which block an event belongs to, and holding calls: a call block opens a
//! slot at `content_block_start`, its events are kept in order, its input
//! fragments joined, and its size bounded; other blocks get their place.

use bytes::BytesMut;
use serde_json::{Map, Value};

use super::{malformed, Event, Held, Open, Place, Slot, StreamRewriter};
use crate::error::Error;
use crate::protocol::map_guard;
use crate::protocol::messages::{classify, hosted_call, BlockClass, BLOCK_KEYS};

impl StreamRewriter {
    /// The block index of an event.
    pub(super) fn index(ev: &Event) -> Result<u64, Error> {
        ev.obj
            .get("index")
            .and_then(Value::as_u64)
            .ok_or_else(|| malformed("a block event has no integer index"))
    }

    /// Whether `ev` starts a call block (which joins the batch).
    pub(super) fn starts_call(&self, ev: &Event) -> Result<bool, Error> {
        if ev.ty != "content_block_start" {
            return Ok(false);
        }
        Ok(classify(block_type(&ev.obj)?) == BlockClass::Call)
    }

    pub(super) fn block_start(&mut self, ev: Event, out: &mut BytesMut) -> Result<(), Error> {
        if !self.began || self.stopped {
            return Err(malformed("a block outside a message"));
        }
        if self.open.is_some() {
            return Err(malformed("a block started while another was open"));
        }
        let index = Self::index(&ev)?;
        if self.last_in.is_some_and(|l| index <= l) {
            return Err(malformed("block indices do not increase"));
        }
        self.last_in = Some(index);
        let Some(Value::Object(block)) = ev.obj.get("content_block") else {
            return Err(malformed("content_block_start has no block"));
        };
        map_guard(block, &BLOCK_KEYS)?;
        let class = classify(block_type(&ev.obj)?);
        if class == BlockClass::Call {
            super::super::call_block_id(block)?;
            let slot = Slot {
                in_index: index,
                // Charged while held: about twice its text as a tree.
                block_bytes: 2 * ev.data.len(),
                block: block.clone(),
                json: String::new(),
                bytes: 0,
                oversized: false,
            };
            self.batch.push(slot);
            let i = self.batch.len() - 1;
            self.open = Some(Open {
                in_index: index,
                place: Place::Held(i),
            });
            return self.hold(i, ev);
        }
        if class == BlockClass::Hosted {
            self.hosted.push(hosted_call(block));
        }
        if self.resume.allowed {
            self.resume.block(block);
        }
        let o = self.out_next;
        self.out_next += 1;
        self.open = Some(Open {
            in_index: index,
            place: Place::Out(o),
        });
        self.emit(&ev, (o != index).then_some(o), out);
        Ok(())
    }

    pub(super) fn block_event(&mut self, ev: Event, out: &mut BytesMut) -> Result<(), Error> {
        let index = Self::index(&ev)?;
        let Some(open) = self.open.filter(|o| o.in_index == index) else {
            return Err(malformed("an event names a block that is not open"));
        };
        let stop = ev.ty == "content_block_stop";
        if stop {
            self.open = None;
        }
        match open.place {
            Place::Held(i) => {
                if !stop {
                    self.fragment(i, &ev)?;
                }
                self.hold(i, ev)
            }
            Place::Out(o) => {
                if self.resume.allowed {
                    self.resume.delta(&ev);
                }
                self.emit(&ev, (o != index).then_some(o), out);
                Ok(())
            }
        }
    }

    /// Joins a call's `input_json_delta` fragment.
    pub(super) fn fragment(&mut self, i: usize, ev: &Event) -> Result<(), Error> {
        let Some(Value::Object(delta)) = ev.obj.get("delta") else {
            return Err(malformed("a block delta has no delta"));
        };
        map_guard(delta, &["type", "partial_json"])?;
        if delta.get("type").and_then(Value::as_str) != Some("input_json_delta") {
            return Err(malformed("a call block got a delta that is not input"));
        }
        let part = delta
            .get("partial_json")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("partial_json is not a string"))?;
        let slot = &mut self.batch[i];
        if !slot.oversized {
            slot.json.push_str(part);
        }
        self.call_delta = true;
        Ok(())
    }

    pub(super) fn hold(&mut self, i: usize, ev: Event) -> Result<(), Error> {
        self.call_delta = true;
        let size = ev.raw.len() + ev.data.len();
        let slot = &mut self.batch[i];
        slot.bytes += size;
        if slot.oversized {
            return Ok(());
        }
        if slot.json.len() > self.max_call
            || slot.bytes > 2 * self.max_call + 64 * 1024
            || self.held_bytes + size > self.max_held
        {
            // Too large to hold: rejected without keeping its events or
            // its input.
            slot.oversized = true;
            slot.json = String::new();
            slot.block.remove("input");
            let freed: usize = self
                .queue
                .iter()
                .filter(|h| h.slot == Some(i))
                .map(|h| h.ev.raw.len() + h.ev.data.len())
                .sum();
            self.queue.retain(|h| h.slot != Some(i));
            self.held_bytes -= freed;
            return Ok(());
        }
        self.keep(Held { ev, slot: Some(i) })
    }

    pub(super) fn keep(&mut self, mut h: Held) -> Result<(), Error> {
        // Copied out: a slice of the decoder's buffer would keep all of it
        // (a large event read with this one) alive while held.
        h.ev.raw = bytes::Bytes::copy_from_slice(&h.ev.raw);
        h.ev.data = bytes::Bytes::copy_from_slice(&h.ev.data);
        self.held_bytes += h.ev.raw.len() + h.ev.data.len();
        if self.held_bytes > self.max_held.saturating_mul(2) {
            return Err(malformed("held events over limits.max_held_args_bytes"));
        }
        self.queue.push(h);
        Ok(())
    }
}

/// The type of an event's `content_block`.
pub(super) fn block_type(obj: &Map<String, Value>) -> Result<&str, Error> {
    obj.get("content_block")
        .and_then(|b| b.get("type"))
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("a content block has no type"))
}
