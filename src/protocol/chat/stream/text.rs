//! Calls written as text in a streamed choice (`[gate] text_tool_calls`):
//! each choice's `content` goes through its [`TextScan`]; from an opening
//! marker on it is held, and the choice is gated when it finishes.

use bytes::BytesMut;
use serde_json::{json, Map, Value};

use super::{malformed, PendingChoice, StreamRewriter, TextCalls};
use crate::call::{Call, Release};
use crate::error::Error;
use crate::protocol::text_calls::{self, TextScan};

impl StreamRewriter {
    /// Passes a delta's `content` through its choice's scan: what may go
    /// out stays in the delta, the rest is held. After the choice finished
    /// (`late`), held call text is dropped, like late tool-call deltas.
    pub(super) fn scan_text(
        &mut self,
        idx: u32,
        d: &mut Map<String, Value>,
        late: bool,
        changed: &mut bool,
    ) -> Result<(), Error> {
        let Some(scans) = self.scans.as_mut() else {
            return Ok(());
        };
        if !matches!(d.get("content"), Some(Value::String(_) | Value::Array(_))) {
            return Ok(());
        }
        let scan = scans.entry(idx).or_default();
        match d.get_mut("content") {
            Some(Value::String(text)) => {
                let now = scan.push(text);
                // Compared as text: a released tail and a new one held back
                // can leave the length as it was.
                if now != *text {
                    *changed = true;
                    match now.is_empty() {
                        true => d.remove("content"),
                        false => d.insert("content".into(), Value::String(now)),
                    };
                }
            }
            // Content in parts: each text part goes through the same scan,
            // in order, and keeps what may go out of it.
            Some(Value::Array(parts)) => {
                let before = parts.len();
                parts.retain_mut(|p| match text_calls::part_text(p) {
                    Some(text) => {
                        let now = scan.push(text);
                        if now != *text {
                            *changed = true;
                            *text = now;
                        }
                        !text.is_empty()
                    }
                    None => true,
                });
                if parts.is_empty() && before > 0 {
                    d.remove("content");
                }
            }
            _ => return Ok(()),
        }
        if late && scan.take_held().is_some() {
            self.late_deltas += 1;
        }
        if self.text_held_bytes() > self.max_held {
            return Err(malformed("held text is over the limit"));
        }
        Ok(())
    }

    /// At a choice's finish, text held back only because it could have
    /// begun a marker goes out in the finishing delta.
    pub(super) fn finish_text(&mut self, idx: u32, c: &mut Map<String, Value>, changed: &mut bool) {
        let Some(tail) = self.take_tail(idx) else {
            return;
        };
        let delta = c
            .entry("delta")
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(d) = delta else {
            return;
        };
        match d.get_mut("content") {
            Some(Value::String(text)) => text.push_str(&tail),
            Some(Value::Array(parts)) => parts.push(json!({ "type": "text", "text": tail })),
            _ => {
                d.insert("content".into(), Value::String(tail));
            }
        }
        *changed = true;
    }

    fn take_tail(&mut self, idx: u32) -> Option<String> {
        let tail = self.scans.as_mut()?.get_mut(&idx)?.take_tail();
        (!tail.is_empty()).then_some(tail)
    }

    /// At `[DONE]`: every choice's held-back tail goes out as text.
    pub(super) fn flush_tails(&mut self, out: &mut BytesMut) {
        let choices: Vec<u32> = match &self.scans {
            Some(s) => s.keys().copied().collect(),
            None => return,
        };
        for idx in choices {
            if let Some(tail) = self.take_tail(idx) {
                self.template
                    .write_chunk(out, idx, &json!({ "content": tail }), &Value::Null);
            }
        }
    }

    /// The held call text of the gated choices, read into pieces; their
    /// calls are appended to `calls`.
    pub(super) fn take_text_calls(
        &mut self,
        choices: &[PendingChoice],
        calls: &mut Vec<Call>,
    ) -> Vec<TextCalls> {
        let mut texts = Vec::new();
        for pc in choices {
            let held = self
                .scans
                .as_mut()
                .and_then(|s| s.get_mut(&pc.choice))
                .and_then(TextScan::take_held);
            if let Some(held) = held {
                let pieces = text_calls::split(&held);
                let first = calls.len();
                calls.extend(text_calls::calls(&pieces, pc.choice));
                texts.push((pc.choice, pieces, first));
            }
        }
        texts
    }

    /// Writes a gated choice's text back without the blocks of withheld
    /// calls; whether it had calls written as text, and how many were kept.
    pub(super) fn write_text_calls(
        &mut self,
        texts: &[TextCalls],
        choice: u32,
        verdicts: &[Release],
        out: &mut BytesMut,
    ) -> (bool, usize) {
        let Some((_, pieces, first)) = texts.iter().find(|(c, _, _)| *c == choice) else {
            return (false, 0);
        };
        let (text, kept) =
            text_calls::rebuild(pieces, |i| Release::at(verdicts, first + i).allowed());
        if !text.is_empty() {
            self.text_seen = true;
            self.template
                .write_chunk(out, choice, &json!({ "content": text }), &Value::Null);
        }
        (true, kept)
    }

    /// Whether `idx` holds call text.
    pub(super) fn text_holds(&self, idx: u32) -> bool {
        self.scans
            .as_ref()
            .and_then(|s| s.get(&idx))
            .is_some_and(TextScan::holds_call)
    }

    /// Whether any choice holds call text.
    pub(super) fn text_held(&self) -> bool {
        !self.text_held_choices().is_empty()
    }

    /// The choices holding call text.
    pub(super) fn text_held_choices(&self) -> Vec<u32> {
        self.scans
            .iter()
            .flat_map(|m| m.iter())
            .filter(|(_, s)| s.holds_call())
            .map(|(c, _)| *c)
            .collect()
    }

    /// The text held by every choice.
    pub(super) fn text_held_bytes(&self) -> usize {
        self.scans
            .iter()
            .flat_map(|m| m.iter())
            .map(|(_, s)| s.held_len())
            .sum()
    }
}

#[cfg(test)]
mod tests;
