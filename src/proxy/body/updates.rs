//! What the rewriter reports besides the bytes it writes
//! ([`crate::protocol::Update`]), acted on at once: the time of the last
//! call event, withheld calls of a stored response remembered, provider-run
//! calls audited, a follow-up started, a renamed response remembered, a
//! thread's answer remembered with its facts.

use super::GatedBody;
use crate::protocol::Update;

impl GatedBody {
    /// Remembers this request's turn under answer `id`, with the calls
    /// decided so far.
    pub(super) fn remember_history(&self, id: &str) {
        if let Some(h) = &self.history {
            let decided = self
                .ctx
                .decided
                .lock()
                .map(|d| d.clone())
                .unwrap_or_default();
            (self.state).remember_history(id, h, &decided, self.ctx.read_in_answer());
        }
    }

    /// Takes every update the rewriter has, in order. Called after each
    /// step of the rewriter, before anything that step wrote goes out (so a
    /// request continuing from a stored response finds its record).
    pub(super) fn updates(&mut self) {
        while let Some(r) = self.rw.poll() {
            match r {
                Update::CallRead => self.last_call_delta = Some(self.now.get().into_std()),
                Update::Withheld(w) => self.state.remember_withheld(w),
                Update::Hosted(calls) => {
                    // Before any later call of the answer is decided.
                    self.ctx.provider_ran(&calls);
                    self.audit_hosted(calls)
                }
                Update::Resumption(r) => self.start_follow_up(r),
                Update::Renamed { first, then } => self.state.remember_renamed(first, then),
                Update::Answered(id) => {
                    if let Some(facts) = &self.thread {
                        self.state.remember_thread(id.clone(), facts.clone());
                    }
                    // Remembered now (a follow-up may come as soon as the
                    // answer ends), and again with its calls at the end.
                    self.remember_history(&id);
                    self.answer = Some(id);
                }
            }
        }
    }
}
