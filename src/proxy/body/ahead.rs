//! Reading upstream while held calls are decided: what upstream still sends
//! (usually the finish, `[DONE]`, a usage chunk) is taken into the rewriter
//! so the upstream response can end and its connection go back to the pool,
//! instead of being held for as long as a person takes to answer. At most
//! [`AHEAD_MAX`] bytes are taken per gate, charged to the shared budget;
//! upstream waits for the rest. And the time a gate took is not counted
//! against upstream's timeouts; upstream's end, read here or by `read`,
//! leads to the drain through [`after_upstream`].

use std::task::{Context as TaskContext, Poll};

use http_body::Body;

use super::{GatedBody, Phase};
use crate::protocol::Rewriter;
use crate::upstream::encoding::ContentDecoder;

/// Upstream bytes read ahead while one gate decides.
pub(super) const AHEAD_MAX: usize = 64 * 1024;

impl GatedBody {
    /// Time spent deciding (a person answering) is not upstream's: its idle
    /// timer starts again, its total deadline moves on by as much.
    pub(super) fn gated_for(&mut self, took: std::time::Duration) {
        self.timeouts.extend(took);
    }

    /// Reads what upstream has while the gate decides (see the module doc).
    /// Its end makes the phase after the gate the drain; a fault is kept
    /// for after the gate.
    pub(super) fn read_ahead(&mut self, cx: &mut TaskContext<'_>) {
        let Phase::Gating { then, ahead, .. } = &mut self.phase else {
            return;
        };
        while matches!(**then, Phase::Reading) && *ahead < AHEAD_MAX {
            let frame = match self.stirred.poll(&mut self.upstream, cx) {
                Poll::Pending => return,
                Poll::Ready(None) => None,
                Poll::Ready(Some(Ok(f))) => Some(f),
                Poll::Ready(Some(Err(e))) => {
                    **then = Phase::Broken(e);
                    return;
                }
            };
            if let Some(f) = frame {
                self.timeouts.frame(self.now.get());
                if let Ok(data) = f.into_data() {
                    match self.dec.decode(&data) {
                        Ok(bytes) => {
                            *ahead += bytes.len();
                            self.rw.push(&bytes);
                            // Charged to the shared budget with what the
                            // rewriter holds; a full budget stops the reading.
                            if self.held.hold(self.rw.held_bytes() + *ahead).is_err() {
                                *ahead = AHEAD_MAX;
                            }
                        }
                        Err(e) => {
                            **then = Phase::Broken(e);
                            return;
                        }
                    }
                }
                if !self.upstream.is_end_stream() {
                    continue;
                }
            }
            **then = after_upstream(&mut self.dec, &mut *self.rw);
        }
    }
}

/// What follows upstream's end: what the decoder kept goes to the rewriter,
/// then the drain (or, when the decoder cannot finish, the fault).
pub(super) fn after_upstream(dec: &mut ContentDecoder, rw: &mut dyn Rewriter) -> Phase {
    match dec.finish() {
        Ok(rest) => {
            rw.push(&rest);
            Phase::Draining { ending: false }
        }
        Err(e) => Phase::Broken(e),
    }
}
