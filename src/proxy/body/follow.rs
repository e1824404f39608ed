//! A follow-up (`rewrite = "resume"`) seen from the gated body: started once
//! the calls just decided were all withheld for it, driven while the rest of
//! the upstream stream is read, and its answer read next.

use std::task::{Context as TaskContext, Poll};

use super::{GatedBody, Next, Phase};
use crate::protocol::Resumption;
use crate::proxy::resume;

impl GatedBody {
    /// Starts the follow-up the rewriter asked for: the calls just decided
    /// were all withheld for `resume` (the rest of this upstream stream is
    /// read meanwhile). A response that may not be continued gives up.
    pub(super) fn start_follow_up(&mut self, r: Resumption) {
        match self.follow.take() {
            Some(f) => {
                let (state, ctx) = (self.state.clone(), self.ctx.clone());
                self.sending = Some(resume::send(state, ctx, *f, r));
            }
            None => {
                self.rw.give_up(&mut self.out);
                self.updates();
            }
        }
    }

    /// Drives the follow-up under way; its answer is kept until upstream ends.
    pub(super) fn poll_follow(&mut self, cx: &mut TaskContext<'_>) {
        let Some(s) = &mut self.sending else {
            return;
        };
        if let Poll::Ready((f, sent)) = s.as_mut().poll(cx) {
            self.sending = None;
            self.follow = Some(Box::new(f));
            self.sent = Some(Box::new(sent));
        }
    }

    /// Upstream ended: the follow-up's answer becomes the body read next,
    /// or, when it failed, the response ends as `drop` ends it.
    pub(super) fn resume(&mut self) -> Next {
        match self.sent.take().map(|s| *s) {
            None => Next::Wait,
            Some(Ok(sent)) => {
                self.upstream = sent.body;
                self.stirred.stir();
                self.dec = sent.decoder;
                self.timeouts.restart(sent.deadline);
                self.ctx = sent.ctx;
                let more = self.follow.as_ref().is_some_and(|f| f.left());
                self.rw.continue_with(more);
                self.phase = Phase::Reading;
                Next::Continue
            }
            Some(Err(e)) => {
                self.state.metrics.upstream_fault(&e);
                self.rw.give_up(&mut self.out);
                self.updates();
                self.phase = Phase::Done;
                Next::Continue
            }
        }
    }
}
