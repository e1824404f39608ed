//! A tool-call chunk that repeats the last one byte for byte but for the text
//! of its one `arguments` string: most fragments of a streamed call, read
//! with two comparisons and one string instead of a parse.
//!
//! Sound because the rest is the same bytes as a chunk [`super::delta`] read:
//! if what lies between the two unchanged ends is exactly one JSON string
//! (its quotes are the unchanged ends' own), every reader sees the same
//! object with only that string's value changed, and the whole-tree path
//! would push the same entry with those arguments. Anything else goes on to
//! [`super::delta`] (which accepts it or not as it would have).

use std::borrow::Cow;

use super::assemble::Delta;
use super::delta;

/// The last chunk read with one choice holding one entry, and that entry.
#[derive(Debug, Default)]
pub struct Last {
    bytes: Vec<u8>,
    /// The arguments string's content: `bytes[start..end]` (quotes excluded).
    start: usize,
    end: usize,
    /// The choice's index as given, and its position's (0).
    choice: Option<u32>,
    index: Option<u64>,
    id: Option<String>,
    kind: Option<String>,
    name: Option<String>,
}

impl Last {
    /// Remembers a chunk [`super::delta`] read, with its one choice and entry
    /// and where that entry's arguments string is (`span`, quotes excluded).
    pub fn remember(&mut self, data: &[u8], span: (usize, usize), choice: Option<u32>, e: &Delta) {
        self.bytes.clear();
        self.bytes.extend_from_slice(data);
        (self.start, self.end) = span;
        self.choice = choice;
        self.index = e.index;
        self.id = e.id.as_deref().map(str::to_string);
        self.kind = e.kind.as_deref().map(str::to_string);
        self.name = e.name.as_deref().map(str::to_string);
    }

    /// Forgets the last chunk (after a fault, or to test without it).
    pub fn clear(&mut self) {
        self.bytes.clear();
    }

    /// When `data` repeats the last chunk but for its arguments string: the
    /// choice's index as given and the entry, with `data`'s arguments. The
    /// last chunk becomes `data`.
    pub fn repeat<'s>(&'s mut self, data: &'s [u8]) -> Option<(Option<u32>, Delta<'s>)> {
        if self.bytes.is_empty() {
            return None;
        }
        let tail = self.bytes.len() - self.end;
        let end = data.len().checked_sub(tail)?;
        if end < self.start
            || data[..self.start] != self.bytes[..self.start]
            || data[end..] != self.bytes[self.end..]
        {
            return None;
        }
        // The quotes are the unchanged ends' own: the slice must be one
        // whole JSON string, nothing before or after it.
        let quoted = std::str::from_utf8(&data[self.start - 1..end + 1]).ok()?;
        let arguments = delta::string(quoted)?;
        self.bytes.truncate(self.start);
        self.bytes.extend_from_slice(&data[self.start..]);
        self.end = end;
        let delta = Delta {
            index: self.index,
            id: self.id.as_deref().map(Cow::Borrowed),
            kind: self.kind.as_deref().map(Cow::Borrowed),
            name: self.name.as_deref().map(Cow::Borrowed),
            arguments,
            extra: serde_json::Map::new(),
        };
        Some((self.choice, delta))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last(data: &[u8]) -> Last {
        let r = delta::read(data).unwrap();
        let mut l = Last::default();
        l.remember(data, r.span.unwrap(), r.choices[0].0, &r.choices[0].1[0]);
        l
    }

    const A: &str = r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"lo"}}]},"finish_reason":null}]}"#;

    #[test]
    fn only_the_arguments_may_differ() {
        let mut l = last(A.as_bytes());
        let b = A.replace(r#""{\"lo""#, r#""cation\": \"Paris, \u00e9\"""#);
        let (choice, d) = l.repeat(b.as_bytes()).unwrap();
        assert_eq!(choice, Some(0));
        assert_eq!(
            (d.index, d.arguments.as_ref()),
            (Some(0), "cation\": \"Paris, é\"")
        );
        // The last chunk is now `b`: a shorter fragment after it.
        let c = A.replace(r#""{\"lo""#, r#""}""#);
        assert_eq!(l.repeat(c.as_bytes()).unwrap().1.arguments, "}");
        let e = A.replace(r#""{\"lo""#, r#""""#);
        assert_eq!(l.repeat(e.as_bytes()).unwrap().1.arguments, "");
    }

    #[test]
    fn anything_else_is_not_a_repeat() {
        for other in [
            // the string ends early: the rest would be structure
            r#""a","arguments":"b""#,
            r#""a"},"x":{"y":"b""#,
            // not a valid string
            "\"a\nb\"",
            r#""a\qb""#,
            r#""\ud800""#,
            r#""a\""#,
        ] {
            let mut l = last(A.as_bytes());
            let b = A.replace(r#""{\"lo""#, other);
            assert!(l.repeat(b.as_bytes()).is_none(), "{other}");
        }
        for changed in [
            A.replace("\"c\"", "\"d\""),
            A.replace("null}]}", "\"stop\"}]}"),
            A.replace(r#""index":0,"f"#, r#""index":1,"f"#),
            format!("{A} "),
            A[1..].to_string(),
        ] {
            let mut l = last(A.as_bytes());
            assert!(l.repeat(changed.as_bytes()).is_none(), "{changed}");
        }
        let mut l = last(A.as_bytes());
        l.clear();
        assert!(l.repeat(A.as_bytes()).is_none());
    }
}
