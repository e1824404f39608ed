//! The one event loop of the stream rewriters that read their stream event
//! by event (Responses, Messages): while calls wait for their verdicts
//! nothing is read; then what was read ahead goes first; then the SSE
//! decoder's next event. A codec implements [`Events`] and calls
//! [`process`] and [`finish`] from its `Rewriter`. Chat's rewriter reads
//! most events where they lie in the decoder's buffer and keeps its own
//! loop for that (`chat::stream`).

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
    fn read_ahead(&mut self, out: &mut BytesMut) -> Result<bool, Error>;
    /// The stream has ended (failed, or given up): what comes is dropped.
    fn ended(&self) -> bool;
    fn on_event(&mut self, ev: SseEvent, out: &mut BytesMut) -> Result<(), Error>;
}

/// Reads every event there is, until calls wait for a gate or more input
/// is needed.
pub(crate) fn process<E: Events>(c: &mut E, out: &mut BytesMut) -> Result<Step, Error> {
    loop {
        if c.gating() {
            return Ok(Step::Gate);
        }
        if c.read_ahead(out)? {
            continue;
        }
        if c.ended() {
            c.decoder().clear();
            return Ok(Step::NeedMore);
        }
        match c.decoder().next_event() {
            Ok(Some(ev)) => c.on_event(ev, out)?,
            Ok(None) => return Ok(Step::NeedMore),
            Err(e) => return Err(malformed(e.why())),
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
