//! `resume` in the chat stream: when a choice's calls are all withheld for
//! resume, the rest of its upstream stream is read for its usage only and
//! not sent; the follow-up's stream is then read as the continuation of the
//! response the agent is receiving (the first response's `id` and `created`,
//! no second `role`, its text after a paragraph break, usage summed).

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Map, Value};

use super::StreamRewriter;
use crate::call::{Call, Release};
use crate::error::Error;
use crate::protocol::chat::chunk::is_empty_chunk;
use crate::protocol::chat::{follow, write_event, Site, DONE};
use crate::protocol::{add_usage, Resumption};

#[derive(Debug, PartialEq)]
enum Phase {
    /// The rest of the upstream stream whose calls were withheld.
    Waiting,
    /// The follow-up's stream; `join` until its first text went out.
    Continuing { join: bool },
}

#[derive(Debug, Default)]
pub(super) struct ResumeState {
    /// A choice whose calls are all withheld for resume may be continued.
    pub(super) allowed: bool,
    result: std::sync::Arc<str>,
    phase: Option<Phase>,
    choice: u32,
    /// Usage of responses the agent was not sent, until it can be added.
    carried: Option<Value>,
    /// Boxed: few streams resume, and every stream holds the field.
    ready: Option<Box<Resumption>>,
}

impl ResumeState {
    pub(super) fn new(allowed: bool, result: &std::sync::Arc<str>) -> ResumeState {
        ResumeState {
            allowed,
            result: result.clone(),
            ..ResumeState::default()
        }
    }

    /// Whether upstream events take the resume path.
    pub(super) fn active(&self) -> bool {
        self.phase.is_some()
    }

    fn carry(&mut self, usage: Option<Value>) {
        if let Some(u) = usage.filter(|u| !u.is_null()) {
            add_usage(self.carried.get_or_insert(Value::Null), &u);
        }
    }
}

fn object_of(data: &[u8]) -> Option<Map<String, Value>> {
    match crate::json::strict_value(data) {
        Ok(Value::Object(o)) => Some(o),
        _ => None,
    }
}

impl StreamRewriter {
    /// In `resolve`, for the only choice, none of whose calls is released:
    /// when they are all withheld for resume, it is continued. Whether it is.
    pub(super) fn resumes(
        &mut self,
        choice: u32,
        calls: &[Call],
        sites: &[Site],
        verdicts: &[Release],
        chunk: &mut Option<Map<String, Value>>,
        out: &mut BytesMut,
    ) -> bool {
        let resumable = (0..calls.len()).all(|i| Release::at(verdicts, i).resumable());
        if !self.resume.allowed || calls.is_empty() || !resumable {
            return false;
        }
        let denied = (calls.iter().zip(0..))
            .filter(|(_, i)| Release::at(verdicts, *i) == (Release::Resume { deny: true }))
            .map(|(c, _)| c.name.clone())
            .collect();
        let pairs: Vec<(&Call, &Site)> = calls.iter().zip(sites).collect();
        self.begin_resume(choice, &pairs, denied, chunk.take(), out);
        true
    }

    /// The choice's calls are all withheld for resume: nothing of its end
    /// goes out (a held chunk's own text does), the turn is kept for the
    /// follow-up. Returns false when the choice must end as `drop` says.
    fn begin_resume(
        &mut self,
        choice: u32,
        calls: &[(&Call, &Site)],
        denied: Vec<String>,
        chunk: Option<Map<String, Value>>,
        out: &mut BytesMut,
    ) {
        let r = &mut self.resume;
        if let Some(mut obj) = chunk {
            r.carry(obj.remove("usage"));
            if let Some(Value::Array(choices)) = obj.get_mut("choices") {
                for c in choices.iter_mut().filter_map(Value::as_object_mut) {
                    c.insert("finish_reason".into(), Value::Null);
                    c.remove("native_finish_reason");
                }
            }
            if !is_empty_chunk(&obj) {
                write_event(out, &Value::Object(obj));
            }
        }
        r.ready = Some(Box::new(Resumption {
            turn: follow::turn(calls, None, &r.result),
            denied,
            ..Resumption::default()
        }));
        r.phase = Some(Phase::Waiting);
        r.choice = choice;
    }

    /// An upstream data event while resuming.
    pub(super) fn resumed_event(
        &mut self,
        raw: Bytes,
        data: Bytes,
        out: &mut BytesMut,
    ) -> Result<(), Error> {
        let done = data.trim_ascii() == b"[DONE]";
        let join = match self.resume.phase {
            Some(Phase::Waiting) => {
                if done {
                    self.ended = true;
                } else if let Some(mut obj) = object_of(&data) {
                    self.resume.carry(obj.remove("usage"));
                }
                return Ok(());
            }
            Some(Phase::Continuing { join }) => join,
            None => return self.data_event(raw, data, out),
        };
        let obj = match object_of(&data) {
            Some(obj) if !done => obj,
            _ => return self.data_event(raw, data, out),
        };
        let (obj, joined) = self.continued(obj, join);
        if joined {
            self.resume.phase = Some(Phase::Continuing { join: false });
        }
        let data = serde_json::to_vec(&Value::Object(obj))
            .map_err(|_| Error::UpstreamUnreadable("event data is not a JSON object"))?;
        let mut raw = BytesMut::with_capacity(data.len() + 8);
        raw.put_slice(b"data: ");
        raw.put_slice(&data);
        raw.put_slice(b"\n\n");
        self.data_event(raw.freeze(), Bytes::from(data), out)
    }

    /// A follow-up chunk as part of the agent's response; whether its text
    /// took the paragraph break.
    fn continued(&mut self, mut obj: Map<String, Value>, join: bool) -> (Map<String, Value>, bool) {
        for key in ["id", "created"] {
            if let (Some(v), true) = (self.template.field(key), obj.contains_key(key)) {
                obj.insert(key.into(), v.clone());
            }
        }
        let mut joined = false;
        if let Some(Value::Array(choices)) = obj.get_mut("choices") {
            for c in choices.iter_mut().filter_map(Value::as_object_mut) {
                let Some(Value::Object(d)) = c.get_mut("delta") else {
                    continue;
                };
                d.remove("role");
                if let Some(Value::String(t)) = d.get_mut("content") {
                    if join && !joined && !t.is_empty() {
                        t.insert_str(0, "\n\n");
                        joined = true;
                    }
                }
            }
        }
        if let Some(u) = obj.get_mut("usage").filter(|u| !u.is_null()) {
            if let Some(c) = self.resume.carried.take() {
                add_usage(u, &c);
            }
        }
        (obj, joined)
    }

    pub(super) fn take_ready(&mut self) -> Option<Resumption> {
        self.resume.ready.take().map(|r| *r)
    }

    pub(super) fn continue_stream(&mut self, allowed: bool) {
        self.resume.allowed = allowed;
        self.resume.phase = Some(Phase::Continuing {
            join: self.text_seen,
        });
        self.ended = false;
        self.decoder.clear();
        self.last.clear();
    }

    /// The follow-up failed: the choice ends with the neutral text, as
    /// `drop` ends it.
    pub(super) fn end_without_follow_up(&mut self, out: &mut BytesMut) {
        let choice = self.resume.choice;
        self.write_neutral(out, choice);
        self.template.write_finish(out, choice, "stop");
        if let Some(u) = self.resume.carried.take() {
            let mut usage = self.template.chunk(choice, json!({}), Value::Null);
            usage["choices"] = json!([]);
            usage["usage"] = u;
            write_event(out, &usage);
        }
        out.put_slice(DONE);
        self.resume.phase = None;
        self.ended = true;
        self.mark_final(choice, "stop");
    }
}
