//! How the one event loop ([`crate::protocol::events`]) drives the Messages
//! rewriter: its decoder, whether calls wait for a gate, the event read
//! ahead, the next event.

use bytes::BytesMut;

use super::StreamRewriter;
use crate::error::Error;
use crate::protocol::events::Events;
use crate::protocol::sse::{SseDecoder, SseEvent};

impl Events for StreamRewriter {
    fn decoder(&mut self) -> &mut SseDecoder {
        &mut self.decoder
    }
    fn gating(&self) -> bool {
        !self.pending.is_empty()
    }
    fn read_ahead(&mut self, out: &mut BytesMut) -> Result<bool, Error> {
        let Some(ev) = self.lookahead.take() else {
            return Ok(false);
        };
        self.dispatch(ev, out).map(|()| true)
    }
    fn ended(&self) -> bool {
        self.ended
    }
    fn on_event(&mut self, ev: SseEvent, out: &mut BytesMut) -> Result<(), Error> {
        self.handle(ev, out)
    }
}
