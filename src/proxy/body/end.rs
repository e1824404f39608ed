//! When a gated body ends or the agent leaves: the work still under way
//! (a gate deciding, dropped calls audited) finishes on its own, and what the
//! stream reported (token usage, late tool deltas) is counted.

use super::{Chore, GatedBody, Phase};

impl Drop for GatedBody {
    fn drop(&mut self) {
        // The agent went away while calls were being decided or dropped
        // calls audited: that work still finishes, so the trail is whole;
        // calls waiting for a person end now (nobody is left to receive them).
        self.ctx.left.leave();
        let left: Option<Chore> = match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Gating { decide, .. } => Some(Box::pin(async move {
                decide.await;
            })),
            Phase::Failing(chore) => Some(chore),
            _ => None,
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            for chore in left.into_iter().chain(self.hosted.take()) {
                rt.spawn(chore);
            }
        }
        if let Some(id) = self.answer.take() {
            self.remember_history(&id);
        }
        let totals = self.rw.totals();
        totals.usage.count(&self.state.metrics);
        if let Some(x) = &self.ctx.exchange {
            let u = &totals.usage;
            x.used((u.model.as_deref(), u.id.as_deref()), u.input, u.output);
            x.finished(u.finish_reasons());
        }
        let late = totals.late_deltas;
        if late > 0 {
            self.state.metrics.late_tool_deltas.inc_by(late);
            tracing::warn!(request_id = %self.ctx.request_id, late, "tool-call deltas after their finish were stripped");
        }
    }
}
