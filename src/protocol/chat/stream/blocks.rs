//! How the stream's blocks are read: a clean data event where it lies in
//! the decoder's buffer (a repeated call fragment, text that passes as it
//! came), anything else taken as an event of its own; `[DONE]`; what is left
//! of a chunk for the whole-tree parse.

use bytes::{BufMut, Bytes, BytesMut};

use super::pending::PendingChoice;
use super::{finish, malformed, StreamRewriter};
use super::{has_finish, has_text, prefilter, text_chunk, Prefilter};
use crate::error::Error;
use crate::protocol::sse::{SseDecoder, SseEvent};

/// What is left of a data event once it was looked at where it lay: the
/// chunk's parse ([`StreamRewriter::slow`]), a finish read typed first.
struct Left {
    /// Data that is not JSON fails the stream.
    risky: bool,
    finish: bool,
}

impl StreamRewriter {
    /// The next block: a clean data event but `[DONE]` is looked at where
    /// it lies in `dec` ([`Self::data`] settles most) and taken only when
    /// something is left; any other block is taken and handled as an event
    /// of its own.
    pub(super) fn next(&mut self, dec: &mut SseDecoder, out: &mut BytesMut) -> Result<bool, Error> {
        let Some(block) = dec.next_ready().map_err(|e| malformed(e.why()))? else {
            return Ok(false);
        };
        let in_place = self.typed && block.clean() && block.event().is_none();
        let data = block.data().filter(|d| d.trim_ascii() != b"[DONE]");
        match data {
            Some(data) if in_place && !self.resume.active() => {
                self.usage.identify(data);
                match self.data(block.raw(), data, out)? {
                    None => block.skip(),
                    Some(left) => {
                        let ev = block.take();
                        self.rest(left, ev.raw, ev.data.unwrap_or_default(), out)?;
                    }
                }
            }
            _ => self.handle(block.take(), out)?,
        }
        self.gate_complete();
        Ok(true)
    }

    pub(super) fn handle(&mut self, ev: SseEvent, out: &mut BytesMut) -> Result<(), Error> {
        // Only lines every reader agrees on go on as they came; a block of
        // unknown lines only is dropped.
        let Some(raw) = ev.forwardable() else {
            return Ok(());
        };
        let SseEvent { event, data, .. } = ev;
        let Some(data) = data else {
            // Comments (keep-alives).
            out.put_slice(&raw);
            return Ok(());
        };
        if event.as_deref() == Some("error") {
            return Err(Error::UpstreamEvent(data));
        }
        if self.resume.active() {
            self.usage.sniff(&data);
            return self.resumed_event(raw, data, out);
        }
        self.usage.identify(&data);
        self.data_event(raw, data, out)
    }

    /// One data event, its bytes its own.
    pub(super) fn data_event(
        &mut self,
        raw: Bytes,
        data: Bytes,
        out: &mut BytesMut,
    ) -> Result<(), Error> {
        if data.trim_ascii() == b"[DONE]" {
            self.done(raw, out);
            return Ok(());
        }
        match self.data(&raw, &data, out)? {
            Some(left) => self.rest(left, raw, data, out),
            None => Ok(()),
        }
    }

    /// What is left of a data event [`Self::data`] did not settle, with its
    /// bytes now its own.
    fn rest(
        &mut self,
        Left { risky, finish }: Left,
        raw: Bytes,
        data: Bytes,
        out: &mut BytesMut,
    ) -> Result<(), Error> {
        // The typed reader names every key it takes, so a finish of calls
        // (`"tool_calls"`, which the prefilter flags) is read there too.
        if self.scans.is_none() && finish && self.typed {
            if let Some(f) = finish::read(&data) {
                if self.finish_only(&raw, &data, f, out)? {
                    return Ok(());
                }
            }
        }
        self.slow(raw, data, risky, finish, out)
    }

    /// The stream's `[DONE]`: it ends the stream, or waits behind the
    /// choices still held.
    fn done(&mut self, raw: Bytes, out: &mut BytesMut) {
        self.flush_tails(out);
        if self.asm.any() || self.text_held() || !self.early.is_empty() {
            let mut held = self.asm.held_choices();
            held.extend(self.text_held_choices());
            held.extend(self.early_choices());
            held.sort_unstable();
            held.dedup();
            let choices = held
                .into_iter()
                .map(|choice| PendingChoice {
                    choice,
                    pos: None,
                    finish: None,
                })
                .collect();
            self.start_pending(choices, None, Some(raw));
        } else {
            out.put_slice(&raw);
            self.ended = true;
        }
    }

    /// One data event but `[DONE]` (`raw` its bytes as they go on), looked
    /// at where it lies: `None` when that settled it, else what is left for
    /// [`Self::rest`]. Its usage is read unless a typed reader took it:
    /// they take `usage` only as null.
    fn data(&mut self, raw: &[u8], data: &[u8], out: &mut BytesMut) -> Result<Option<Left>, Error> {
        // Most fragments of a call repeat the chunk before but for their text.
        let mut last = std::mem::take(&mut self.last);
        let repeated = last
            .repeat(data)
            .map(|(choice, e)| self.tool_entries(0, choice, [e]));
        self.last = last;
        if let Some(r) = repeated {
            return r.map(|()| None);
        }
        let Prefilter {
            names_call,
            risky,
            beyond_text,
        } = prefilter(data);
        // With text calls gated every event is parsed: a byte search for
        // `content` would miss a key written with escapes.
        let scanned = self.scans.is_some();
        let finish = has_finish(data);
        if !risky && !scanned && !self.asm.any() && !self.any_rewritten && !finish {
            if !self.text_seen && has_text(data) {
                self.text_seen = true;
            }
            self.usage.sniff(data);
            out.put_slice(raw);
            return Ok(None);
        }
        // Text the prefilter could not pass (a non-ASCII byte, an escape):
        // read typed, it goes on as it came, as the whole-tree path sends it.
        if !scanned && !finish && !beyond_text && self.typed {
            if let Some(t) = text_chunk::read(data) {
                for (choice, role) in &t.roles {
                    self.note_role(*choice, role);
                }
                self.text_seen |= t.text;
                out.put_slice(raw);
                return Ok(None);
            }
        }
        // Data that is not JSON fails the stream only if it could name a call
        // (a non-ASCII byte alone sends an event to the parse, not to an error).
        // With text calls gated, text that cannot be read is not let through either.
        Ok(Some(Left {
            risky: names_call || scanned,
            finish,
        }))
    }
}
