//! Calls written as text in a whole body's content (`[gate]
//! text_tool_calls`): read after the structured calls of their choice, and
//! the content written back without the blocks of withheld ones.

use super::{Choice, Completion, Slot};
use crate::protocol::json;
use crate::protocol::text_calls;

/// A content with calls written as text: before its first marker, and the
/// rest read into pieces.
pub(super) struct TextBody {
    pub(super) before: String,
    pub(super) pieces: Vec<text_calls::Piece>,
}

impl Completion<'_> {
    /// Reads the calls written as text in each choice's content; they
    /// follow the choice's structured calls.
    pub fn read_text_calls(&mut self) {
        let Some(choices) = self.choices.as_mut() else {
            return;
        };
        let mut old = std::mem::take(&mut self.calls).into_iter();
        let mut all = Vec::with_capacity(old.len());
        for ch in choices.iter_mut() {
            all.extend(old.by_ref().take(ch.slots.len()));
            let content = ch
                .message
                .as_ref()
                .and_then(|m| m.present("content"))
                .and_then(json::string);
            let Some(content) = content else {
                continue;
            };
            let Some(at) = text_calls::find_marker(&content) else {
                continue;
            };
            let pieces = text_calls::split(&content[at..]);
            let calls = text_calls::calls(&pieces, ch.index);
            ch.slots.extend(calls.iter().map(|_| Slot::Text));
            all.extend(calls);
            ch.text = Some(TextBody {
                before: content[..at].to_string(),
                pieces,
            });
        }
        self.ids = all.iter().map(|c| c.id.clone()).collect();
        self.calls = all;
    }
}

/// A choice's content without the blocks of its withheld text calls
/// (`verdicts` answer its slots), and how many of those calls were kept;
/// `None` when it has none.
pub(super) fn content(ch: &Choice, verdicts: &[bool]) -> (Option<String>, usize) {
    let Some(t) = &ch.text else {
        return (None, 0);
    };
    let allowed: Vec<bool> = ch
        .slots
        .iter()
        .zip(verdicts)
        .filter(|(s, _)| matches!(s, Slot::Text))
        .map(|(_, &a)| a)
        .collect();
    let (rest, kept) = text_calls::rebuild(&t.pieces, |i| allowed.get(i).copied().unwrap_or(false));
    (Some(format!("{}{rest}", t.before)), kept)
}
