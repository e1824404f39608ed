//! Judges asked ahead: a chat call whose arguments are complete while its
//! turn still streams has the sensors its decision will need asked at once
//! ([`crate::gate::Gates::foresee`]), beside the stream, so the decision at
//! the turn's finish waits only for what is left of the judge's answer.

use std::task::Context as TaskContext;

use super::GatedBody;

impl GatedBody {
    /// Starts asking ahead for the calls the rewriter reports complete
    /// (none unless `Options::foresee`).
    pub(super) fn foresee(&mut self) {
        for call in self.rw.foresee() {
            let (gates, ctx) = (self.gates.clone(), self.ctx.clone());
            self.foresight
                .push(Box::pin(async move { gates.foresee(&call, &ctx).await }));
        }
    }

    /// Drives the questions asked ahead (on every poll: a decision waiting
    /// on one of them is woken through this body's task).
    pub(super) fn poll_foresight(&mut self, cx: &mut TaskContext<'_>) {
        if self.foresight.is_empty() {
            return;
        }
        self.foresight
            .retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if self.foresight.is_empty() {
            self.foresight = Vec::new();
        }
    }
}
