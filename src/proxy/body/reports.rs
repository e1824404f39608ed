//! What the rewriter reports besides the bytes it writes
//! ([`crate::protocol::Report`]), acted on at once: the time of the last
//! call event, withheld calls of a stored response remembered, provider-run
//! calls audited, a follow-up started, a renamed response remembered.

use super::GatedBody;
use crate::protocol::Report;

impl GatedBody {
    /// Takes every report the rewriter has, in order. Called after each
    /// step of the rewriter, before anything that step wrote goes out (so a
    /// request continuing from a stored response finds its record).
    pub(super) fn reports(&mut self) {
        while let Some(r) = self.rw.poll() {
            match r {
                Report::CallRead => self.last_call_delta = Some(std::time::Instant::now()),
                Report::Withheld(w) => self.state.remember_withheld(w),
                Report::Hosted(calls) => self.audit_hosted(calls),
                Report::Resumption(r) => self.start_follow_up(r),
                Report::Renamed { first, then } => self.state.remember_renamed(first, then),
            }
        }
    }
}
