//! Which held call an event belongs to, and holding it: a call item opens a
//! slot at `response.output_item.added`, its events are kept in order, and
//! its size bounded. Every reading of the call is checked against the one
//! that is gated (the item of `response.output_item.done`): the item as it
//! was added (type, ids, name, namespace), the text its first event and its
//! deltas build, its `.done` text, and the shell commands streamed for it.
//! An event of a call item that is not open, or that names a call already
//! decided, fails the stream.

use bytes::Bytes;
use serde_json::{Map, Value};

use super::{malformed, Held, StreamRewriter};
use crate::call::Call;
use crate::error::Error;
use crate::protocol::map_guard;
use crate::protocol::responses::follow::call_item;
use crate::protocol::responses::{call_of, class_of, ItemClass, ITEM_KEYS};

/// A call item of the current batch.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) output_index: u64,
    pub(super) item_id: String,
    pub(super) item_type: String,
    /// The call as `response.output_item.added` showed it.
    pub(super) opened: Call,
    /// The text a reader of the added item and its deltas builds (function
    /// arguments, custom tool input).
    pub(super) text: String,
    /// A shell call's commands as their events built them.
    pub(super) commands: Vec<String>,
    /// The call of `response.output_item.done`, once it came.
    pub(super) done: Option<Done>,
    pub(super) bytes: usize,
    pub(super) oversized: bool,
}

impl Slot {
    /// What the slot itself keeps (its events are counted as held).
    pub(super) fn kept_bytes(&self) -> usize {
        let done = self.done.as_ref().map_or(0, |d| {
            d.call.arguments.len() + d.item.as_ref().map_or(0, |_| 2 * d.call.arguments.len())
        });
        let commands: usize = self.commands.iter().map(String::len).sum();
        self.item_id.len() + self.opened.arguments.len() + self.text.len() + commands + done
    }
}

/// A call item read whole: the call that is gated.
#[derive(Debug)]
pub(super) struct Done {
    pub(super) call: Call,
    /// The item a follow-up sends back (`resume`): function calls only.
    pub(super) item: Option<Value>,
}

/// Item ids longer than this fail the stream: they are remembered for the
/// stream's life.
const MAX_ITEM_ID: usize = 512;

/// The text field of a call item type, and the types of the events that
/// stream it (delta, done).
fn text_events(item_type: &str) -> Option<(&'static str, &'static str, &'static str)> {
    match item_type {
        "function_call" => Some((
            "arguments",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
        )),
        "custom_tool_call" => Some((
            "input",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.done",
        )),
        _ => None,
    }
}

/// Event types that only a call item the client runs has: one that names
/// no open call fails the stream (a lenient reader would add it to a call
/// it already ran or is about to run).
fn is_call_event(ty: &str) -> bool {
    let t = crate::fold::fold(ty);
    [
        "function_call",
        "custom_tool_call",
        "computer_call",
        "shell_call_command",
        "apply_patch_call",
        "tool_search_call",
    ]
    .iter()
    .any(|k| t.contains(k))
}

fn text_of<'a>(item: &'a Map<String, Value>, key: &str) -> Result<&'a str, Error> {
    match item.get(key) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(malformed("call text is not a string")),
    }
}

fn command_index(obj: &Map<String, Value>) -> Result<usize, Error> {
    obj.get("command_index")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
        .ok_or_else(|| malformed("a shell command event has no command_index"))
}

impl Slot {
    /// A call delta's text: only the delta type of the slot's item type.
    pub(super) fn add_delta(&mut self, ty: &str, delta: &str) -> Result<(), Error> {
        match text_events(&self.item_type) {
            Some((_, d, _)) if d == ty => {}
            _ => return Err(malformed("a call delta of another item type")),
        }
        if !self.oversized {
            self.text.push_str(delta);
        }
        Ok(())
    }

    /// The item of `response.output_item.done` read against what was
    /// streamed of it; the call that is gated.
    fn finish(&self, v: &Value, max_call: usize) -> Result<Call, Error> {
        let Value::Object(item) = v else {
            return Err(malformed("output_item.done has no item"));
        };
        let t = item.get("type").and_then(Value::as_str).unwrap_or("");
        let id = item.get("id").and_then(Value::as_str).unwrap_or("");
        if t != self.item_type || id != self.item_id {
            return Err(malformed("a call item changed between added and done"));
        }
        let call = call_of(v, max_call)?;
        let o = &self.opened;
        if (&call.kind, &call.name, &call.id, call.name_too_long)
            != (&o.kind, &o.name, &o.id, o.name_too_long)
        {
            return Err(malformed("a call item changed between added and done"));
        }
        if self.oversized || call.oversized {
            return Ok(call);
        }
        match text_events(t) {
            Some((key, _, _)) => {
                if text_of(item, key)? != self.text {
                    return Err(malformed("a call's deltas differ from its final text"));
                }
            }
            // No text streamed: the item as added had no action yet, or
            // the same one.
            None => {
                if !matches!(o.arguments.as_str(), "" | "null") && o.arguments != call.arguments {
                    return Err(malformed("a call item changed between added and done"));
                }
            }
        }
        if !self.commands.is_empty() {
            let listed: Vec<&str> = v
                .get("action")
                .and_then(|a| a.get("commands"))
                .and_then(Value::as_array)
                .map(|c| c.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if listed != self.commands {
                return Err(malformed(
                    "a shell call's commands differ from its final item",
                ));
            }
        }
        Ok(call)
    }
}

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
                i.get("type")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("output item has no type"))?;
                item.map(class_of)
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
        let named = item_id.or(own_id);
        let by_id = named.and_then(|id| self.batch.iter().position(|s| s.item_id == id));
        let by_index = oi.and_then(|o| self.batch.iter().position(|s| s.output_index == o));
        let names_decided = named.is_some_and(|id| self.decided.contains_key(id))
            || oi.is_some_and(|o| self.decided_at.contains(&o));
        if ty == "response.output_item.added" {
            if by_id.is_some() || by_index.is_some() || names_decided {
                return Err(malformed("an output item was added twice"));
            }
            if item_class != Some(ItemClass::Call) {
                self.hosted.extend(item.and_then(super::super::hosted_call));
                return Ok(None);
            }
            let (Some(oi), Some(item @ Value::Object(i))) = (oi, item) else {
                return Err(malformed("a call item has no output_index"));
            };
            if self.terminal {
                return Err(malformed("a call item came after the response ended"));
            }
            let id = own_id.ok_or_else(|| malformed("a call item has no id"))?;
            if id.len() > MAX_ITEM_ID {
                return Err(malformed("a call item's id is too long"));
            }
            let t = i.get("type").and_then(Value::as_str).unwrap_or("");
            let opened = call_of(item, self.max_call)?;
            let text = match text_events(t) {
                Some((key, _, _)) => text_of(i, key)?.to_string(),
                None => String::new(),
            };
            let oversized = opened.oversized || text.len() > self.max_call;
            let bytes = opened.arguments.len() + text.len();
            self.batch.push(Slot {
                output_index: oi,
                item_id: id.to_string(),
                item_type: t.to_string(),
                opened,
                text: if oversized { String::new() } else { text },
                commands: Vec::new(),
                done: None,
                bytes,
                oversized,
            });
            self.call_delta = true;
            return Ok(Some(self.batch.len() - 1));
        }
        match (by_id, by_index) {
            (Some(a), Some(b)) if a != b => Err(malformed("an event names two different items")),
            (Some(a), _) => Ok(Some(a)),
            (None, Some(a)) => match named {
                // The place of one call and the id of another item.
                Some(_) => Err(malformed("an event names two different items")),
                None => Ok(Some(a)),
            },
            (None, None) => {
                let is_call = item_class == Some(ItemClass::Call);
                if names_decided || is_call || is_call_event(ty) {
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
        let max_call = self.max_call;
        let slot = &mut self.batch[i];
        if slot.done.is_some() {
            return Err(malformed("an event came after its call item was done"));
        }
        let ty = obj.get("type").and_then(Value::as_str).unwrap_or("");
        let text = text_events(&slot.item_type);
        match ty {
            "response.output_item.added" => {}
            "response.output_item.done" => {
                // `owner` checked the item's keys.
                let item = obj.get("item").unwrap_or(&Value::Null);
                let call = slot.finish(item, max_call)?;
                // What a follow-up sends back of it; kept only when it may
                // be needed and is within bounds.
                let item = match (slot.item_type.as_str(), slot.oversized || call.oversized) {
                    ("function_call", false) => call_item(item),
                    _ => None,
                };
                slot.bytes += call.arguments.len();
                slot.oversized |= call.oversized;
                slot.done = Some(Done { call, item });
            }
            t if text.is_some_and(|(_, d, _)| d == t) => {
                let d = obj
                    .get("delta")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("a call delta is not a string"))?;
                slot.add_delta(t, d)?;
            }
            t if text.is_some_and(|(_, _, d)| d == t) => {
                // The whole text once more.
                let key = text.map_or("arguments", |(k, _, _)| k);
                let v = text_of(obj, key)?;
                if !slot.oversized && v != slot.text {
                    return Err(malformed("a call's deltas differ from its final text"));
                }
            }
            "response.shell_call_command.added"
            | "response.shell_call_command.delta"
            | "response.shell_call_command.done"
                if slot.item_type == "shell_call" =>
            {
                shell_command(slot, ty, obj)?;
            }
            _ => return Err(malformed("an event of another kind names a call item")),
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
            slot.text = String::new();
            slot.commands = Vec::new();
            if let Some(d) = &mut slot.done {
                d.item = None;
                d.call.arguments = String::new();
            }
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

    pub(super) fn keep(&mut self, mut h: Held) -> Result<(), Error> {
        // Copied out: a slice of the decoder's buffer would keep all of it
        // (a large event read with this one) alive while held.
        h.raw = Bytes::copy_from_slice(&h.raw);
        h.data = Bytes::copy_from_slice(&h.data);
        self.held_bytes += h.raw.len() + h.data.len();
        if self.held_bytes + self.kept > self.max_held.saturating_mul(2) {
            return Err(malformed("held events over limits.max_held_args_bytes"));
        }
        self.queue.push(h);
        Ok(())
    }
}

/// A shell call's commands as streamed: each added at the next index,
/// grown by its deltas, and done with the text they built.
fn shell_command(slot: &mut Slot, ty: &str, obj: &Map<String, Value>) -> Result<(), Error> {
    let at = command_index(obj)?;
    let field = |k: &str| {
        obj.get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("a shell command event has no text"))
    };
    if slot.oversized {
        return Ok(());
    }
    match ty {
        "response.shell_call_command.added" if at == slot.commands.len() => {
            slot.commands.push(field("command")?.to_string());
        }
        "response.shell_call_command.delta" if at < slot.commands.len() => {
            slot.commands[at].push_str(field("delta")?);
        }
        "response.shell_call_command.done"
            if at < slot.commands.len() && slot.commands[at] == field("command")? => {}
        _ => {
            return Err(malformed(
                "a shell call's commands differ from its final item",
            ))
        }
    }
    Ok(())
}
