//! Provider-run calls (hosted tools the upstream already ran): audited beside
//! the stream, and the stream ends only once their records are written.

use std::task::Context as TaskContext;

use super::GatedBody;
use crate::call::Call;
use crate::proxy::release;

impl GatedBody {
    /// Audits provider-run calls the rewriter has seen (they already ran;
    /// the record is written beside the stream, not before it, and before
    /// the stream's end).
    pub(super) fn audit_hosted(&mut self, hosted: Vec<Call>) {
        let (state, gates, ctx) = (self.state.clone(), self.gates.clone(), self.ctx.clone());
        let before = self.hosted.take();
        self.hosted = Some(Box::pin(async move {
            if let Some(b) = before {
                b.await;
            }
            release::hosted(&state, &gates, &ctx, &hosted).await;
        }));
    }

    /// Drives the provider-run audit records; true once none is left.
    pub(super) fn poll_hosted(&mut self, cx: &mut TaskContext<'_>) -> bool {
        if let Some(h) = &mut self.hosted {
            if h.as_mut().poll(cx).is_pending() {
                return false;
            }
            self.hosted = None;
        }
        true
    }
}
