//! Calls written as text in a whole body's content (`[gate]
//! text_tool_calls`): read after the structured calls of their choice, and
//! the content written back without the blocks of withheld ones.

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::Value;

use super::{Body, Choice, Slot};
use crate::json::{self, Sink};
use crate::protocol::text_calls;

/// A content with calls written as text: before its first marker, and the
/// rest read into pieces.
pub(super) struct TextBody {
    pub(super) before: String,
    pub(super) pieces: Vec<text_calls::Piece>,
    /// Content that came in parts: the rewritten text takes the place of
    /// the first text part, the other text parts go, the rest stay.
    pub(super) parts: Option<Vec<Value>>,
}

impl Body<'_> {
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
            let raw = ch.message.as_ref().and_then(|m| m.present("content"));
            let Some((content, parts)) = raw.and_then(content_text) else {
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
                parts,
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

/// A message's content as text: a string, or the text parts of a list
/// joined in order (with the list).
fn content_text(raw: &RawValue) -> Option<(Cow<'_, str>, Option<Vec<Value>>)> {
    if !raw.get().trim_start().starts_with('[') {
        return json::string(raw).map(|s| (s, None));
    }
    let mut parts: Vec<Value> = serde_json::from_str(raw.get()).ok()?;
    let text: String = parts
        .iter_mut()
        .filter_map(text_calls::part_text)
        .map(|t| t.as_str())
        .collect();
    Some((Cow::Owned(text), Some(parts)))
}

/// The parts a choice's content came in, when it was rewritten.
pub(super) fn parts<'a>(ch: &'a Choice<'_>) -> Option<&'a [Value]> {
    ch.text.as_ref()?.parts.as_deref()
}

/// Writes a rewritten content: a string, or the parts it came in with the
/// text in the first text part and no other.
pub(super) fn write_content(out: &mut impl Sink, parts: Option<&[Value]>, text: &str) {
    let Some(parts) = parts else {
        return json::write_string(out, text);
    };
    let mut parts = parts.to_vec();
    let mut first = true;
    parts.retain_mut(|p| match text_calls::part_text(p) {
        Some(t) if first => {
            first = false;
            *t = text.to_string();
            true
        }
        Some(_) => false,
        None => true,
    });
    out.text(&Value::Array(parts).to_string());
}
