//! What the Messages stream rewriter writes: events passed on (renumbered
//! where calls were withheld, named where they came without a name), and the
//! neutral text block that ends a turn whose calls were all withheld.

use bytes::{BufMut, BytesMut};
use serde_json::{json, Value};

use super::{malformed, Event, StreamRewriter};
use crate::error::Error;
use crate::json::{write_obj, Obj};
use crate::protocol::map_guard;
use crate::protocol::write_named_event as write_event;

impl StreamRewriter {
    /// Before the message's end: when calls were withheld and none was
    /// released, the neutral text block; whether the stop reason becomes
    /// `end_turn`.
    pub(super) fn close_turn(&mut self, out: &mut BytesMut) -> bool {
        if self.turn_closed || self.withheld == 0 || self.released > 0 {
            return self.turn_closed;
        }
        self.turn_closed = true;
        let i = self.out_next;
        self.out_next += 1;
        let events = [
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": self.neutral}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": i}),
            ),
        ];
        for (ty, v) in events {
            write_event(out, ty, v.to_string().as_bytes());
        }
        true
    }

    /// Sends an event: as it came, or written anew with a new `index` (or
    /// with its `event:` line when it had none).
    pub(super) fn emit(&self, ev: &Event, index: Option<u64>, out: &mut BytesMut) {
        if index.is_none() && ev.named {
            out.put_slice(&ev.raw);
            return;
        }
        let text = String::from_utf8_lossy(&ev.data);
        let Some(index) = index else {
            write_event(out, &ev.ty, text.as_bytes());
            return;
        };
        let top: Obj = match serde_json::from_str(&text) {
            Ok(o) => o,
            Err(_) => return,
        };
        let mut body = String::with_capacity(text.len());
        write_obj(&mut body, &top, |k, _| {
            (k == "index").then(|| index.to_string())
        });
        write_event(out, &ev.ty, body.as_bytes());
    }

    /// Sends `message_delta`, its stop reason `end_turn` when `end_turn` and
    /// the model stopped for tool use.
    pub(super) fn emit_delta(
        &self,
        ev: &Event,
        end_turn: bool,
        out: &mut BytesMut,
    ) -> Result<(), Error> {
        let Some(Value::Object(delta)) = ev.obj.get("delta") else {
            return Err(malformed("message_delta has no delta"));
        };
        map_guard(delta, &["stop_reason"])?;
        let tool_use = delta.get("stop_reason").and_then(Value::as_str) == Some("tool_use");
        if !(end_turn && tool_use) {
            self.emit(ev, None, out);
            return Ok(());
        }
        let text = String::from_utf8_lossy(&ev.data);
        let top: Obj = serde_json::from_str(&text).map_err(|_| malformed("event is not JSON"))?;
        let mut body = String::with_capacity(text.len());
        write_obj(&mut body, &top, |k, v| {
            if k != "delta" {
                return None;
            }
            let d = Obj::of(v)?;
            let mut r = String::new();
            write_obj(&mut r, &d, |k, _| {
                (k == "stop_reason").then(|| "\"end_turn\"".to_string())
            });
            Some(r)
        });
        write_event(out, &ev.ty, body.as_bytes());
        Ok(())
    }
}
