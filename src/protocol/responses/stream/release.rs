//! The Responses stream rewriter's verdicts applied to a held batch.

use bytes::BytesMut;

use super::{Decided, StreamRewriter};
use crate::call::Release;
use crate::protocol::responses::fingerprint;

impl StreamRewriter {
    /// Applies the verdicts on the pending batch: an allowed call's events
    /// go out as they came, a withheld one's are replaced at the same
    /// `output_index` by a neutral message (once, even for a call that kept
    /// no events), and events of other items held behind them go out in
    /// order. A batch that resumes answers its calls upstream instead.
    pub(super) fn apply(&mut self, verdicts: &[Release], out: &mut BytesMut) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let batch = std::mem::take(&mut self.batch);
        if self.resumes(&batch, verdicts) {
            self.begin_resume(&batch, &pending, verdicts);
            for h in std::mem::take(&mut self.queue) {
                if h.slot.is_none() {
                    self.release(&h, out);
                }
            }
            self.held_bytes = 0;
            return;
        }
        let allowed: Vec<bool> = (0..batch.len())
            .map(|i| Release::at(verdicts, i).allowed() && !batch[i].oversized)
            .collect();
        let mut message_ids = Vec::with_capacity(batch.len());
        for ((slot, call), ok) in batch.iter().zip(&pending).zip(&allowed) {
            if *ok {
                let fp = fingerprint(&slot.item_id, &slot.item_type, call);
                self.decide(slot, Decided::Released(fp), true);
                message_ids.push(String::new());
            } else {
                self.decide(slot, Decided::Withheld, true);
                self.withheld
                    .push((call.id.clone(), slot.item_type.clone()));
                message_ids.push(self.ids.message_id(&slot.item_id));
            }
        }
        let queue = std::mem::take(&mut self.queue);
        let mut replaced = vec![false; batch.len()];
        for h in &queue {
            match h.slot {
                Some(i) if allowed[i] => self.release(h, out),
                Some(i) => {
                    if !replaced[i] {
                        replaced[i] = true;
                        self.replacement(batch[i].output_index, &message_ids[i], out);
                    }
                }
                None => self.release(h, out),
            }
        }
        // An oversized call kept no events: its replacement still goes out.
        for (i, slot) in batch.iter().enumerate() {
            if !allowed[i] && !replaced[i] {
                self.replacement(slot.output_index, &message_ids[i], out);
            }
        }
        self.held_bytes = 0;
    }
}
