//! One choice of a parsed chat chunk: its tool-call deltas go to the
//! assembler (or are counted as late once the choice finished), and its
//! finish either starts a gate (calls are held) or is recorded, and repeated
//! the same way if the upstream says it again. Its `reasoning_details`
//! entries that name an id are held until its calls are decided. Also the
//! chunks that close a choice: the neutral text, the finish it was sent.

use serde_json::Value;

use super::finish::Finish;
use super::{malformed, Final, Held, PendingChoice, StreamRewriter};
use crate::error::Error;
use crate::protocol::chat::chunk::{choice_index, set_finish};
use crate::protocol::chat::keys;
use crate::protocol::map_guard;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::json;

/// The length of `v` as JSON text.
pub(super) fn json_len(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

impl StreamRewriter {
    /// Writes the chunk that says the neutral text for a choice left without
    /// calls: as `content` after a paragraph break when text went before, or
    /// as `refusal` when the request asked for structured output.
    pub(super) fn write_neutral(&mut self, out: &mut BytesMut, choice: u32) {
        let delta = match (self.refusal, self.text_seen) {
            (true, _) => json!({ "refusal": self.neutral }),
            (false, true) => json!({ "content": format!("\n\n{}", self.neutral) }),
            (false, false) => json!({ "content": self.neutral }),
        };
        self.template.write_chunk(out, choice, &delta, &Value::Null);
    }

    /// A chunk that only finishes one choice, read typed ([`finish`]):
    /// what [`Self::choice`] does with its tree when that is to hold the
    /// chunk behind the choice's calls or to let it go on, both as it came.
    /// `Ok(false)` when the chunk must change (a finish said otherwise
    /// before, reasoning held for the choice): nothing is done, and it goes
    /// the whole-tree way.
    pub(super) fn finish_only(
        &mut self,
        raw: &Bytes,
        data: &Bytes,
        f: Finish,
        out: &mut BytesMut,
    ) -> Result<bool, Error> {
        // The only choice: its position is 0.
        let idx = f.index.unwrap_or(0);
        self.usage.finished(idx, &f.reason);
        let holds = self.asm.holds(idx) || self.text_holds(idx) || self.early_of(idx).is_some();
        if !holds {
            let reasoning = self.held_reasoning.iter().any(|(c, _, _)| *c == idx);
            let differs = self
                .finals
                .get(&idx)
                .is_some_and(|fin| fin.sent != f.reason);
            if reasoning || differs {
                return Ok(false);
            }
        }
        self.last.clear();
        self.text_seen |= f.text;
        if !holds {
            if !self.finals.contains_key(&idx) {
                self.mark_final(idx, &f.reason);
            }
            if let Some(role) = &f.role {
                self.note_role(idx, role);
            }
            out.put_slice(raw);
            return Ok(true);
        }
        self.template.remember_raw(f.template)?;
        let choice = PendingChoice {
            choice: idx,
            pos: Some(0),
            finish: Some(f.reason.into_owned()),
        };
        let held = Held::Raw {
            event: raw.clone(),
            data: data.clone(),
        };
        self.start_pending(vec![choice], Some(held), None);
        Ok(true)
    }

    pub(super) fn mark_final(&mut self, choice: u32, sent: &str) {
        let sent = sent.to_string();
        self.finals.insert(choice, Final { sent });
    }

    pub(super) fn choice(
        &mut self,
        pos: usize,
        ch: &mut Value,
        changed: &mut bool,
        gated: &mut Vec<PendingChoice>,
    ) -> Result<(), Error> {
        let Value::Object(c) = ch else {
            return Err(malformed("choice is not an object"));
        };
        map_guard(c, &keys::CHOICE)?;
        let idx = choice_index(c.get("index"), pos)
            .ok_or_else(|| malformed("choice index is not a small integer"))?;
        for key in ["delta", "message"] {
            let Some(Value::Object(d)) = c.get_mut(key) else {
                continue;
            };
            map_guard(d, &keys::MESSAGE)?;
            let late = self.finals.contains_key(&idx);
            if let Some(tc) = d.remove("tool_calls") {
                match tc {
                    Value::Null => {
                        d.insert("tool_calls".into(), Value::Null);
                    }
                    Value::Array(entries) => {
                        *changed = true;
                        if late {
                            self.late_deltas += 1;
                        } else {
                            for (p, e) in entries.into_iter().enumerate() {
                                if !self.after_early(idx, super::early::Entry::of_tree(&e))? {
                                    self.asm.push_tool(idx, p, e)?;
                                }
                            }
                            self.call_delta = true;
                        }
                    }
                    _ => return Err(malformed("tool_calls is not an array")),
                }
            }
            if let Some(fc) = d.remove("function_call") {
                if fc.is_null() {
                    d.insert("function_call".into(), Value::Null);
                } else {
                    *changed = true;
                    if late {
                        self.late_deltas += 1;
                    } else {
                        self.asm.push_legacy(idx, fc)?;
                        self.call_delta = true;
                    }
                }
            }
            if !late {
                self.hold_reasoning(idx, d, changed)?;
            }
            self.scan_text(idx, d, late, changed)?;
            if !self.text_seen {
                self.text_seen = match d.get("content") {
                    Some(Value::String(s)) => !s.is_empty(),
                    Some(Value::Array(parts)) => !parts.is_empty(),
                    _ => false,
                };
            }
        }
        let Some(finish) = c
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return Ok(());
        };
        self.usage.finished(idx, &finish);
        self.finish_text(idx, c, changed);
        let holds = self.asm.holds(idx) || self.text_holds(idx) || self.early_of(idx).is_some();
        if !holds {
            // No calls to decide: what was held goes out with this finish.
            self.release_reasoning(idx, c, changed);
        }
        if holds {
            // The chunk is held, not changed: it goes on as it came unless
            // the gate changes its finish.
            gated.push(PendingChoice {
                choice: idx,
                pos: Some(pos),
                finish: Some(finish.to_string()),
            });
        } else if let Some(fin) = self.finals.get(&idx) {
            // Once a choice's finish is sent, later finishes repeat it.
            if fin.sent != finish {
                set_finish(c, &fin.sent);
                *changed = true;
            }
        } else {
            let sent = finish.to_string();
            self.finals.insert(idx, Final { sent });
        }
        Ok(())
    }

    /// The reasoning entries held for `choice`, without those naming one of
    /// `withheld` (call ids).
    pub(super) fn take_reasoning(&mut self, choice: u32, withheld: &[&str]) -> Vec<Value> {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held_reasoning)
            .into_iter()
            .partition(|(c, _, _)| *c == choice);
        self.held_reasoning = rest;
        let gone: usize = mine.iter().map(|(_, _, len)| len).sum();
        self.held_reasoning_bytes = self.held_reasoning_bytes.saturating_sub(gone);
        mine.into_iter()
            .map(|(_, v, _)| v)
            .filter(|v| {
                let id = v.get("id").and_then(Value::as_str).unwrap_or("");
                !withheld.contains(&id)
            })
            .collect()
    }

    /// Takes the `reasoning_details` entries of a delta that name an id:
    /// they may name a call not yet decided.
    fn hold_reasoning(
        &mut self,
        idx: u32,
        d: &mut serde_json::Map<String, Value>,
        changed: &mut bool,
    ) -> Result<(), Error> {
        let Some(Value::Array(items)) = d.get_mut("reasoning_details") else {
            return Ok(());
        };
        let named = |v: &Value| {
            v.get("id")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        };
        if !items.iter().any(named) {
            return Ok(());
        }
        let (held, kept): (Vec<Value>, Vec<Value>) =
            std::mem::take(items).into_iter().partition(named);
        *items = kept;
        if items.is_empty() {
            d.remove("reasoning_details");
        }
        let sized: Vec<(u32, Value, usize)> = held
            .into_iter()
            .map(|v| {
                let len = json_len(&v);
                (idx, v, len)
            })
            .collect();
        self.held_reasoning_bytes += sized.iter().map(|(_, _, len)| len).sum::<usize>();
        if self.held_reasoning_bytes > self.max_held {
            return Err(malformed("held reasoning is over the limit"));
        }
        self.held_reasoning.extend(sized);
        *changed = true;
        Ok(())
    }

    /// Puts the entries held for a choice that ends without calls back into
    /// its finishing chunk's delta, ahead of any it carries.
    fn release_reasoning(
        &mut self,
        idx: u32,
        c: &mut serde_json::Map<String, Value>,
        changed: &mut bool,
    ) {
        let held = self.take_reasoning(idx, &[]);
        if held.is_empty() {
            return;
        }
        let delta = c
            .entry("delta")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Value::Object(d) = delta {
            let mut items = held;
            if let Some(Value::Array(rest)) = d.remove("reasoning_details") {
                items.extend(rest);
            }
            d.insert("reasoning_details".into(), Value::Array(items));
            *changed = true;
        }
    }
}
