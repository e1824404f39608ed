//! One choice of a parsed chat chunk: its tool-call deltas go to the
//! assembler (or are counted as late once the choice finished), and its
//! finish either starts a gate (calls are held) or is recorded, and repeated
//! the same way if the upstream says it again.

use std::time::Instant;

use serde_json::Value;

use super::{malformed, Final, PendingChoice, StreamRewriter};
use crate::error::Error;
use crate::protocol::chat::chunk::set_finish;
use crate::protocol::chat::keys;
use crate::protocol::map_guard;

impl StreamRewriter {
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
        let idx = match c.get("index") {
            None | Some(Value::Null) => u32::try_from(pos).ok(),
            Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
            Some(_) => None,
        }
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
                                self.asm.push_tool(idx, p, e)?;
                            }
                            self.last_call_delta = Some(Instant::now());
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
                        self.last_call_delta = Some(Instant::now());
                    }
                }
            }
            if !self.text_seen {
                self.text_seen = d
                    .get("content")
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty());
            }
        }
        let Some(finish) = c.get("finish_reason").and_then(Value::as_str) else {
            return Ok(());
        };
        if self.asm.holds(idx) {
            gated.push(PendingChoice {
                choice: idx,
                pos: Some(pos),
                finish: Some(finish.to_string()),
            });
            *changed = true;
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
}
