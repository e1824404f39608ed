//! The streaming rewriter for `:streamGenerateContent?alt=sse`: each event
//! is a whole `GenerateContentResponse`; one without calls passes as it
//! came, one with calls is held whole until they are decided, then sent as
//! it came or written again without the withheld calls. A stream that ends
//! before any candidate finished was cut: it fails closed.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::response::{self, Site};
use crate::call::{Call, Release};
use crate::error::Error;
use crate::json;
use crate::protocol::events::{self, Events};
use crate::protocol::sse::{SseDecoder, SseEvent};
use crate::protocol::usage::Usage;
use crate::protocol::{malformed, write_raw_data, Options, Rewriter, Step, Totals, Update};

/// An event held while its calls are decided.
struct Held {
    /// The event as it may go on when every call is released.
    raw: Bytes,
    data: Bytes,
    sites: Vec<Site>,
    /// How many calls each candidate had in the event.
    per_candidate: Vec<usize>,
}

pub struct StreamRewriter {
    decoder: SseDecoder,
    held: Option<Held>,
    pending: Vec<Call>,
    hosted: Vec<Call>,
    call_read: bool,
    ended: bool,
    finished: bool,
    events: u64,
    usage: Usage,
    max_call: usize,
    neutral: Arc<str>,
}

impl StreamRewriter {
    pub fn new(o: &Options) -> StreamRewriter {
        StreamRewriter {
            decoder: SseDecoder::new(o.max_event_bytes),
            held: None,
            pending: Vec::new(),
            hosted: Vec::new(),
            call_read: false,
            ended: false,
            finished: false,
            events: 0,
            usage: Usage::default(),
            max_call: o.max_call_bytes,
            neutral: o.neutral_message.clone(),
        }
    }
}

impl Events for StreamRewriter {
    fn decoder(&mut self) -> &mut SseDecoder {
        &mut self.decoder
    }
    fn gating(&self) -> bool {
        self.held.is_some()
    }
    fn ended(&self) -> bool {
        self.ended
    }
    fn on_event(&mut self, ev: SseEvent, out: &mut BytesMut) -> Result<(), Error> {
        let Some(data) = ev.data.clone() else {
            // Comments and empty blocks carry no call.
            if let Some(b) = ev.forwardable() {
                out.extend_from_slice(&b);
            }
            return Ok(());
        };
        if ev.event.is_some() {
            // Google's events are unnamed: a named one is read by some
            // clients and skipped by others.
            return Err(malformed("a Gemini event has a name"));
        }
        let tree =
            json::strict_value(&data).map_err(|_| malformed("an event is not unambiguous JSON"))?;
        let read = response::read(&tree, &data, self.max_call, self.events)?;
        self.events += 1;
        self.finished |= read.finished;
        merge(&mut self.usage, read.usage);
        self.hosted.extend(read.hosted);
        let raw = ev.forwardable().unwrap_or_default();
        if read.calls.is_empty() {
            out.extend_from_slice(&raw);
            return Ok(());
        }
        let (calls, sites): (Vec<Call>, Vec<Site>) = read.calls.into_iter().unzip();
        let n = sites.iter().map(|s| s.candidate + 1).max().unwrap_or(0);
        let mut per_candidate = vec![0; n];
        for s in &sites {
            per_candidate[s.candidate] += 1;
        }
        self.call_read = true;
        self.pending = calls;
        self.held = Some(Held {
            raw,
            data,
            sites,
            per_candidate,
        });
        Ok(())
    }
}

/// A later event's usage over an earlier one's: Google reports running
/// totals, and names the model and response on each event.
fn merge(into: &mut Usage, new: Usage) {
    if new.any() {
        into.input = new.input;
        into.output = new.output;
    }
    into.model = new.model.or(into.model.take());
    into.id = new.id.or(into.id.take());
    for (c, r) in new.finish {
        into.finished(c, &r);
    }
}

impl Rewriter for StreamRewriter {
    fn push(&mut self, bytes: &[u8]) {
        self.decoder.push(bytes);
    }

    fn process(&mut self, out: &mut BytesMut) -> Result<Step, Error> {
        events::process(self, out)
    }

    fn end(&mut self, out: &mut BytesMut) -> Result<Step, Error> {
        if let Some(step) = events::finish(self, out)? {
            return Ok(step);
        }
        if !self.finished && !self.ended {
            return Err(malformed("stream ended before a candidate finished"));
        }
        Ok(Step::NeedMore)
    }

    fn pending(&self) -> &[Call] {
        &self.pending
    }

    fn resolve(&mut self, verdicts: &[Release], out: &mut BytesMut) {
        let Some(held) = self.held.take() else {
            return;
        };
        self.pending.clear();
        let drop: Vec<Site> = (held.sites.iter().enumerate())
            .filter(|(i, _)| !Release::at(verdicts, *i).allowed())
            .map(|(_, s)| *s)
            .collect();
        if drop.is_empty() {
            out.extend_from_slice(&held.raw);
            return;
        }
        let per = &held.per_candidate;
        let calls_of = |c: usize| per.get(c).copied().unwrap_or(0);
        let text = std::str::from_utf8(&held.data).unwrap_or("{}");
        let mut s = String::with_capacity(text.len());
        if response::write_without(text, &drop, &calls_of, &self.neutral, &mut s).is_err() {
            s = super::complete::EMPTY.to_string();
        }
        write_raw_data(out, s.as_bytes());
    }

    fn fail(&mut self, err: &Error, passthrough: bool, out: &mut BytesMut) -> Vec<Call> {
        self.ended = true;
        self.decoder.clear();
        self.held = None;
        let dropped = std::mem::take(&mut self.pending);
        match err {
            Error::UpstreamEvent(body) if passthrough => write_raw_data(out, body),
            _ => write_raw_data(out, &super::error_body(err)),
        }
        dropped
    }

    fn poll(&mut self) -> Option<Update> {
        if std::mem::take(&mut self.call_read) {
            return Some(Update::CallRead);
        }
        if !self.hosted.is_empty() {
            return Some(Update::Hosted(std::mem::take(&mut self.hosted)));
        }
        None
    }

    fn totals(&mut self) -> Totals {
        Totals {
            usage: std::mem::take(&mut self.usage),
            late_deltas: 0,
        }
    }

    fn held_bytes(&self) -> usize {
        self.held.as_ref().map_or(0, |h| h.raw.len() + h.data.len())
    }
}
