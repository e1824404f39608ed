//! `resume` in the Responses stream: a batch of calls, all withheld for
//! resume, that the response's end follows directly (no call released
//! before) is not replaced; the end is held and the rest read for usage
//! only. The follow-up's stream then continues the response the agent is
//! receiving: its `response.created` / `in_progress` are not sent, its
//! items are numbered on from the withheld calls' place, its end carries
//! the first response's id, the items the agent saw before and the usage
//! of both. A later request that continues from the first id is sent on
//! from the follow-up's (`Update::Renamed`).

use bytes::{Bytes, BytesMut};
use serde_json::{json, Map, Value};

use super::{Decided, Slot, StreamRewriter, TERMINAL};
use crate::call::{Call, Release};
use crate::error::Error;
use crate::protocol::responses::follow::turn;
use crate::protocol::write_named_event as write_event;
use crate::protocol::{add_usage, Resumption};

#[derive(Debug, PartialEq)]
enum Phase {
    Waiting,
    Continuing,
}

/// An event as `dispatch` takes it.
pub(super) type Raw = (Bytes, Bytes, Map<String, Value>);

#[derive(Default)]
pub(super) struct ResumeState {
    pub(super) allowed: bool,
    result: std::sync::Arc<str>,
    phase: Option<Phase>,
    /// Where the withheld calls were: the continuation's items go there on.
    offset: u64,
    /// `(output_index, message id, call id)` of each withheld call, for an
    /// ending without follow-up.
    places: Vec<(u64, String, String)>,
    /// Calls decided before the current upstream response.
    decided_before: usize,
    /// The response's end, not sent.
    held_end: Option<Raw>,
    carried: Option<Value>,
    /// The items of the first response the agent saw.
    shown: Vec<Value>,
    /// Their size as read, for the budget.
    shown_bytes: usize,
    first_id: String,
    ready: Option<Resumption>,
    renamed: Option<(String, String)>,
}

impl ResumeState {
    pub(super) fn new(allowed: bool, result: &std::sync::Arc<str>) -> ResumeState {
        ResumeState {
            allowed,
            result: result.clone(),
            ..ResumeState::default()
        }
    }

    pub(super) fn active(&self) -> bool {
        self.phase.is_some()
    }

    /// What it keeps, for the budget: the held end and the items shown.
    pub(super) fn bytes(&self) -> usize {
        let end = self
            .held_end
            .as_ref()
            .map_or(0, |(r, d, _)| r.len() + 3 * d.len());
        end + 2 * self.shown_bytes
    }
}

fn ty_of(obj: &Map<String, Value>) -> &str {
    obj.get("type").and_then(Value::as_str).unwrap_or("")
}

impl StreamRewriter {
    /// In `resolve`: whether this batch is the response's last thing, all
    /// of it withheld for resume, nothing released or withheld before, so
    /// that the response is continued instead of ended.
    pub(super) fn resumes(&self, batch: &[Slot], verdicts: &[Release]) -> bool {
        let at_end = self
            .lookahead
            .as_ref()
            .is_some_and(|a| a.ty() == "response.completed");
        self.resume.allowed
            && at_end
            && self.decided.len() == self.resume.decided_before
            && batch.iter().enumerate().all(|(i, s)| {
                Release::at(verdicts, i).resumable()
                    && !s.oversized
                    && s.item_type == "function_call"
            })
    }

    /// The batch's calls are answered by a follow-up: nothing of them goes
    /// out now, and the end that follows is held.
    pub(super) fn begin_resume(&mut self, batch: &[Slot], calls: &[Call], verdicts: &[Release]) {
        let mut items = Vec::with_capacity(batch.len());
        let mut denied = Vec::new();
        for (i, (slot, call)) in batch.iter().zip(calls).enumerate() {
            let id = self.ids.message_id(&slot.item_id);
            // Its place goes to the follow-up's items, unless that fails.
            self.decide(slot, Decided::Withheld, false);
            self.resume
                .places
                .push((slot.output_index, id, call.id.clone()));
            if Release::at(verdicts, i) == (Release::Resume { deny: true }) {
                denied.push(call.name.clone());
            }
            if let Some(item) = slot.done.as_ref().and_then(|d| d.item.clone()) {
                items.push(item);
            }
        }
        let r = &mut self.resume;
        r.offset = batch.iter().map(|s| s.output_index).min().unwrap_or(0);
        r.first_id = self.response_id.clone();
        r.ready = Some(Resumption {
            turn: turn(Vec::new(), items, &r.result),
            denied,
            previous: Some(self.response_id.clone()).filter(|s| !s.is_empty()),
            ..Resumption::default()
        });
        r.phase = Some(Phase::Waiting);
    }

    /// An event to dispatch: while waiting for the follow-up it is not
    /// sent (the response's end is kept). Whether it was taken here.
    pub(super) fn waiting_event(&mut self, ev: Raw) -> Option<Raw> {
        if self.resume.phase != Some(Phase::Waiting) {
            return Some(ev);
        }
        let (raw, data, obj) = ev;
        if TERMINAL.contains(&ty_of(&obj)) {
            self.terminal = true;
            if let Some(Value::Object(resp)) = obj.get("response") {
                self.keep_first(resp);
            }
            self.resume.held_end = Some((raw, data, obj));
        }
        None
    }

    /// An upstream event of the follow-up, as part of the agent's response;
    /// `None` when it is not sent.
    pub(super) fn continued_event(&mut self, ev: Raw) -> Result<Option<Raw>, Error> {
        let (raw, data, mut obj) = ev;
        let ty = ty_of(&obj).to_string();
        if self.resume.phase != Some(Phase::Continuing) {
            return Ok(Some((raw, data, obj)));
        }
        if matches!(
            ty.as_str(),
            "response.created" | "response.in_progress" | "response.queued"
        ) {
            let id = obj
                .get("response")
                .and_then(|r| r.get("id"))
                .and_then(Value::as_str);
            if let Some(id) = id.filter(|id| !id.is_empty() && ty == "response.created") {
                self.response_id = id.to_string();
                self.resume.renamed = Some((self.resume.first_id.clone(), id.to_string()));
            }
            return Ok(None);
        }
        if let Some(oi) = obj.get("output_index").and_then(Value::as_u64) {
            obj.insert("output_index".into(), json!(oi + self.resume.offset));
        }
        if let Some(Value::Object(resp)) = obj.get_mut("response") {
            resp.insert("id".into(), json!(self.resume.first_id));
            let mut output = self.resume.shown.clone();
            if let Some(Value::Array(own)) = resp.get("output") {
                output.extend(own.iter().cloned());
            }
            resp.insert("output".into(), Value::Array(output));
            if let (Some(u), Some(c)) = (resp.get_mut("usage"), self.resume.carried.take()) {
                add_usage(u, &c);
            }
        }
        let data =
            serde_json::to_vec(&obj).map_err(|_| Error::UpstreamUnreadable("event is not JSON"))?;
        let mut raw = BytesMut::with_capacity(data.len() + ty.len() + 16);
        write_event(&mut raw, &ty, &data);
        Ok(Some((raw.freeze(), data.into(), obj)))
    }

    /// The first response's usage and the items the agent saw of it.
    fn keep_first(&mut self, resp: &Map<String, Value>) {
        if let Some(u) = resp.get("usage").filter(|u| u.is_object()) {
            add_usage(self.resume.carried.get_or_insert(Value::Null), u);
        }
        if let Some(Value::Array(items)) = resp.get("output") {
            let shown = items.iter().take(self.resume.offset as usize).cloned();
            self.resume.shown.extend(shown);
            self.resume.shown_bytes = self.resume.shown.iter().map(|v| v.to_string().len()).sum();
        }
    }

    pub(super) fn take_ready(&mut self) -> Option<Resumption> {
        self.resume.ready.take()
    }

    pub(super) fn resume_renamed(&mut self) -> Option<(String, String)> {
        self.resume.renamed.take()
    }

    pub(super) fn continue_stream(&mut self, allowed: bool) {
        self.resume.allowed = allowed;
        self.resume.phase = Some(Phase::Continuing);
        self.resume.places.clear();
        self.resume.held_end = None;
        self.resume.decided_before = self.decided.len();
        self.terminal = false;
        self.ended = false;
        self.decoder.clear();
    }

    /// The follow-up failed: the withheld calls are replaced where they
    /// were, and the held end goes out (its calls replaced the same way).
    pub(super) fn end_without_follow_up(&mut self, out: &mut BytesMut) {
        self.resume.phase = None;
        for (oi, id, call_id) in std::mem::take(&mut self.resume.places) {
            self.decided_at.insert(oi);
            self.replacement(oi, &id, out);
            self.withheld.push((call_id, "function_call".into()));
        }
        if let Some((raw, data, obj)) = self.resume.held_end.take() {
            let seq = obj.get("sequence_number").and_then(Value::as_u64);
            let _ = self.pass(raw, data, obj, seq, out);
        }
        self.ended = true;
    }
}
