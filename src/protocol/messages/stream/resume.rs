//! `resume` in the Messages stream: the blocks that pass are rebuilt for
//! the follow-up's assistant turn; when the message's calls were all
//! withheld for resume, its end (`message_delta`, `message_stop`) is not
//! sent and the rest of its stream is read for usage only. The follow-up's
//! stream then continues the message the agent is receiving: its
//! `message_start` is not sent, its blocks are numbered on, and its
//! `message_delta` carries the usage of both.

use bytes::{Bytes, BytesMut};
use serde_json::{json, Map, Value};

use super::{Event, StreamRewriter};
use crate::call::{Call, Release};
use crate::protocol::messages::follow::{replayable, turn};
use crate::protocol::{add_usage, Resumption};

#[derive(Debug, PartialEq)]
enum Phase {
    /// The rest of the upstream stream whose calls were withheld.
    Waiting,
    /// The follow-up's stream.
    Continuing,
}

#[derive(Default)]
pub(super) struct ResumeState {
    pub(super) allowed: bool,
    result: std::sync::Arc<str>,
    /// The blocks sent of this message, as the model wrote them; `None`
    /// once one cannot be sent back (then the message is not continued).
    blocks: Option<Vec<Value>>,
    /// Its withheld calls, as `tool_use` blocks; `all` while each may be resumed.
    calls: Vec<Value>,
    denied: Vec<String>,
    all: bool,
    phase: Option<Phase>,
    /// The usage in this upstream message's `message_start`.
    start_usage: Option<Value>,
    /// Usage the agent was not sent yet.
    carried: Option<Value>,
    /// The `message_delta` that was not sent, for an ending without follow-up.
    held_delta: Option<Map<String, Value>>,
    ready: Option<Resumption>,
}

impl ResumeState {
    pub(super) fn new(allowed: bool, result: &std::sync::Arc<str>) -> ResumeState {
        ResumeState {
            allowed,
            result: result.clone(),
            blocks: Some(Vec::new()),
            all: true,
            ..ResumeState::default()
        }
    }

    pub(super) fn active(&self) -> bool {
        self.phase.is_some()
    }

    /// A block that passes begins.
    pub(super) fn block(&mut self, block: &Map<String, Value>) {
        let ty = block.get("type").and_then(Value::as_str).unwrap_or("");
        match (&mut self.blocks, replayable(ty)) {
            (Some(b), true) => b.push(Value::Object(block.clone())),
            _ => self.blocks = None,
        }
    }

    /// A delta of the block that passes.
    pub(super) fn delta(&mut self, ev: &Event) {
        let Some(Value::Object(b)) = self.blocks.as_mut().and_then(|b| b.last_mut()) else {
            return;
        };
        let Some(Value::Object(d)) = ev.obj.get("delta") else {
            return;
        };
        let (key, append) = match d.get("type").and_then(Value::as_str) {
            Some("text_delta") => ("text", true),
            Some("thinking_delta") => ("thinking", true),
            Some("signature_delta") => ("signature", false),
            _ => return,
        };
        let Some(piece) = d.get(key).and_then(Value::as_str) else {
            return;
        };
        match (b.get_mut(key), append) {
            (Some(Value::String(s)), true) => s.push_str(piece),
            _ => {
                b.insert(key.into(), json!(piece));
            }
        }
    }

    /// A withheld call of this message.
    pub(super) fn withheld(&mut self, block: &Map<String, Value>, call: &Call, r: Release) {
        let input = serde_json::from_str::<Value>(&call.arguments).ok();
        let plain = block.get("type").and_then(Value::as_str) == Some("tool_use");
        match (r, input, plain) {
            (Release::Resume { deny }, Some(input), true) => {
                if deny {
                    self.denied.push(call.name.clone());
                }
                let b =
                    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input});
                self.calls.push(b);
            }
            _ => self.all = false,
        }
    }
}

fn usage_of(obj: &Map<String, Value>) -> Option<&Value> {
    obj.get("usage").filter(|u| u.is_object())
}

/// `over`'s fields in place of `base`'s.
fn overlay(base: Option<Value>, over: Option<&Value>) -> Option<Value> {
    let Some(Value::Object(o)) = over else {
        return base;
    };
    let mut b = match base {
        Some(Value::Object(b)) => b,
        _ => Map::new(),
    };
    for (k, v) in o.iter().filter(|(_, v)| !v.is_null()) {
        b.insert(k.clone(), v.clone());
    }
    Some(Value::Object(b))
}

impl StreamRewriter {
    /// A `message_start`: its usage is kept while resume is possible.
    pub(super) fn started(&mut self, msg: &Map<String, Value>) {
        if self.resume.allowed {
            self.resume.start_usage = usage_of(msg).cloned();
        }
    }

    /// At the message's end: when its calls were all withheld for resume and
    /// everything it sent can be sent back, the end is held and the
    /// follow-up readied. Whether it was.
    pub(super) fn try_resume(&mut self, ev: &Event) -> bool {
        let r = &mut self.resume;
        let due = r.allowed && self.withheld > 0 && self.released == 0 && r.all;
        let Some(blocks) = r.blocks.as_ref().filter(|_| due && !r.calls.is_empty()) else {
            return false;
        };
        let delta = (ev.ty == "message_delta").then(|| ev.obj.clone());
        let usage = overlay(r.start_usage.take(), delta.as_ref().and_then(usage_of));
        if let Some(u) = usage {
            add_usage(r.carried.get_or_insert(Value::Null), &u);
        }
        r.ready = Some(Resumption {
            turn: turn(blocks.clone(), std::mem::take(&mut r.calls), &r.result),
            denied: std::mem::take(&mut r.denied),
            ..Resumption::default()
        });
        r.held_delta = delta;
        r.phase = Some(Phase::Waiting);
        true
    }

    /// An event while resuming; `Some` when it was taken care of here.
    pub(super) fn resumed_event(&mut self, ev: Event) -> Option<Event> {
        match self.resume.phase {
            Some(Phase::Waiting) => {
                self.stopped |= ev.ty == "message_stop";
                None
            }
            Some(Phase::Continuing) if ev.ty == "message_start" => {
                if let Some(Value::Object(m)) = ev.obj.get("message") {
                    self.resume.start_usage = usage_of(m).cloned();
                }
                None
            }
            Some(Phase::Continuing) if ev.ty == "message_delta" => {
                let mut obj = ev.obj;
                let own = overlay(self.resume.start_usage.take(), usage_of(&obj));
                if let Some(mut u) = own {
                    if let Some(c) = self.resume.carried.take() {
                        add_usage(&mut u, &c);
                    }
                    obj.insert("usage".into(), u);
                }
                Some(event_of(ev.ty, obj))
            }
            _ => Some(ev),
        }
    }

    pub(super) fn take_ready(&mut self) -> Option<Resumption> {
        self.resume.ready.take()
    }

    /// The follow-up's stream comes next: a new message, numbered on.
    pub(super) fn continue_stream(&mut self, allowed: bool) {
        let r = &mut self.resume;
        r.allowed = allowed;
        r.phase = Some(Phase::Continuing);
        r.blocks = Some(Vec::new());
        r.all = true;
        r.held_delta = None;
        self.ended = false;
        self.stopped = false;
        self.decoder.clear();
        self.last_in = None;
        self.withheld = 0;
        self.released = 0;
        self.turn_closed = false;
    }

    /// The follow-up failed: the neutral block, the held end with
    /// `end_turn`, `message_stop`.
    pub(super) fn end_without_follow_up(&mut self, out: &mut BytesMut) {
        self.resume.phase = None;
        self.close_turn(out);
        let mut delta = self
            .resume
            .held_delta
            .take()
            .unwrap_or_else(|| Map::from_iter([("type".to_string(), json!("message_delta"))]));
        delta.insert(
            "delta".into(),
            json!({"stop_reason": "end_turn", "stop_sequence": null}),
        );
        if let Some(c) = self.resume.carried.take() {
            delta.insert("usage".into(), c);
        }
        let _ = self.emit_delta(&event_of("message_delta".into(), delta), false, out);
        let stop = Map::from_iter([("type".to_string(), json!("message_stop"))]);
        self.emit(&event_of("message_stop".into(), stop), None, out);
        self.stopped = true;
        self.ended = true;
    }
}

/// An event written anew from `obj`.
fn event_of(ty: String, obj: Map<String, Value>) -> Event {
    let data = serde_json::to_vec(&obj).unwrap_or_default();
    Event {
        raw: Bytes::new(),
        data: data.into(),
        obj,
        ty,
        named: false,
    }
}
