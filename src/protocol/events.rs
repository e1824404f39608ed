//! The one event loop of the stream rewriters: while calls wait for their
//! verdicts nothing is read; then what was read ahead goes first; then the
//! SSE decoder's next block. A codec implements [`Events`] and calls
//! [`process`] and [`finish`] from its `Rewriter`. A block is read as an
//! event of its own unless the codec reads it where it lies in the
//! decoder's buffer (chat does, for most data events: [`Events::read_next`]).

use bytes::BytesMut;

use super::malformed;
use super::sse::{SseDecoder, SseEvent};
use super::Step;
use crate::error::Error;

/// What the event loop needs of a codec.
pub(crate) trait Events {
    fn decoder(&mut self) -> &mut SseDecoder;
    /// Calls are held complete and wait for their verdicts.
    fn gating(&self) -> bool;
    /// Handles what was read ahead of the last gate, if anything was;
    /// whether there was.
    fn read_ahead(&mut self, _out: &mut BytesMut) -> Result<bool, Error> {
        Ok(false)
    }
    /// The stream has ended (failed, or given up): what comes is dropped.
    fn ended(&self) -> bool;
    fn on_event(&mut self, ev: SseEvent, out: &mut BytesMut) -> Result<(), Error>;
    /// Reads the next complete block of `dec` (the codec's decoder, lent
    /// out while [`process`] runs); false when there is none.
    fn read_next(&mut self, dec: &mut SseDecoder, out: &mut BytesMut) -> Result<bool, Error> {
        match dec.next_event() {
            Ok(Some(ev)) => self.on_event(ev, out).map(|()| true),
            Ok(None) => Ok(false),
            Err(e) => Err(malformed(e.why())),
        }
    }
}

/// Reads every event there is, until calls wait for a gate or more input
/// is needed.
pub(crate) fn process<E: Events>(c: &mut E, out: &mut BytesMut) -> Result<Step, Error> {
    // The decoder is lent out while its blocks are read, so a codec may read
    // a block where it lies while it writes to itself; nothing a codec does
    // while handling a block asks its own decoder.
    let mut dec = std::mem::take(c.decoder());
    let step = run(c, &mut dec, out);
    *c.decoder() = dec;
    step
}

fn run<E: Events>(c: &mut E, dec: &mut SseDecoder, out: &mut BytesMut) -> Result<Step, Error> {
    loop {
        if c.gating() {
            return Ok(Step::Gate);
        }
        if c.read_ahead(out)? {
            continue;
        }
        if c.ended() {
            dec.clear();
            return Ok(Step::NeedMore);
        }
        if !c.read_next(dec, out)? {
            return Ok(Step::NeedMore);
        }
    }
}

/// At the end of input: what was pending, read ahead or left in the
/// decoder. `Some(Step::Gate)` when that leaves calls waiting for a gate;
/// `None` when the codec's own end checks come next.
pub(crate) fn finish<E: Events>(c: &mut E, out: &mut BytesMut) -> Result<Option<Step>, Error> {
    if c.gating() {
        return Ok(Some(Step::Gate));
    }
    if c.read_ahead(out)? && c.gating() {
        return Ok(Some(Step::Gate));
    }
    if !c.ended() {
        if let Some(ev) = c.decoder().finish().map_err(|e| malformed(e.why()))? {
            c.on_event(ev, out)?;
            if c.gating() {
                return Ok(Some(Step::Gate));
            }
        }
    }
    Ok(None)
}
