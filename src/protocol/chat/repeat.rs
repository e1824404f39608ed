//! A tool-call chunk that repeats the last one byte for byte but for the text
//! of its one `arguments` string (and of its `obfuscation` string, OpenAI's
//! padding, which changes in every chunk): most fragments of a streamed
//! call, read with a few comparisons and one string instead of a parse.
//!
//! Sound because the rest is the same bytes as a chunk [`super::delta`] read:
//! if what lies between the unchanged pieces is exactly one JSON string each
//! time (its quotes are the unchanged pieces' own), every reader sees the
//! same object with only those strings' values changed, and the whole-tree
//! path would push the same entry with those arguments (the padding is
//! dropped with the chunk). Anything else goes on to [`super::delta`]
//! (which accepts it or not as it would have).

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
    /// The `obfuscation` string's content, when it comes after the
    /// arguments (quotes excluded).
    padding: Option<(usize, usize)>,
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
    pub fn remember(
        &mut self,
        data: &[u8],
        span: (usize, usize),
        padding: Option<(usize, usize)>,
        choice: Option<u32>,
        e: &Delta,
    ) {
        self.bytes.clear();
        self.bytes.extend_from_slice(data);
        (self.start, self.end) = span;
        self.padding = padding.filter(|&(s, _)| s > span.1);
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
        let (end, padding) = match self.padding {
            None => (self.same_but_arguments(data)?, None),
            Some(p) => self.same_but_arguments_and_padding(data, p)?,
        };
        // The quotes are the unchanged pieces' own: the slice must be one
        // whole JSON string, nothing before or after it.
        let quoted = std::str::from_utf8(&data[self.start - 1..end + 1]).ok()?;
        let arguments = crate::json::string_literal(quoted)?;
        self.bytes.truncate(self.start);
        self.bytes.extend_from_slice(&data[self.start..]);
        self.end = end;
        self.padding = padding;
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

    /// Where the arguments end in `data` when it is the last chunk but for
    /// them.
    fn same_but_arguments(&self, data: &[u8]) -> Option<usize> {
        let tail = self.bytes.len() - self.end;
        let end = data.len().checked_sub(tail)?;
        (end >= self.start
            && data[..self.start] == self.bytes[..self.start]
            && data[end..] == self.bytes[self.end..])
            .then_some(end)
    }

    /// Where the arguments end in `data`, and where its padding lies, when
    /// it is the last chunk but for both strings (the padding one JSON
    /// string; the arguments are checked by the caller).
    fn same_but_arguments_and_padding(
        &self,
        data: &[u8],
        (pad_start, pad_end): (usize, usize),
    ) -> Option<(usize, Option<(usize, usize)>)> {
        // Unchanged: up to the arguments, from their closing quote to the
        // padding's opening one, and from the padding's closing quote on.
        let (head, between, tail) = (
            &self.bytes[..self.start],
            &self.bytes[self.end..pad_start],
            &self.bytes[pad_end..],
        );
        let rest = data.len().checked_sub(tail.len())?;
        if rest < head.len() + between.len() || !data.starts_with(head) || !data.ends_with(tail) {
            return None;
        }
        // The arguments end at the first quote not escaped.
        let end = self.start + string_end(&data[self.start..rest])?;
        let pad = end + between.len();
        if pad > rest || data[end..pad] != *between {
            return None;
        }
        let quoted = std::str::from_utf8(&data[pad - 1..rest + 1]).ok()?;
        delta::string(quoted)?;
        Some((end, Some((pad, rest))))
    }
}

/// The length of a JSON string's content at the start of `b`: up to its
/// first quote not escaped by a backslash.
fn string_end(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    loop {
        let rest = b.get(i..)?;
        let j = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[j] == b'"' {
            return Some(i + j);
        }
        // A backslash and the byte it escapes.
        i += j + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last(data: &[u8]) -> Last {
        let r = delta::read(data, |_, _| false).unwrap();
        let mut l = Last::default();
        l.remember(
            data,
            r.span.unwrap(),
            r.obfuscation,
            r.choices[0].0,
            &r.choices[0].1[0],
        );
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

    /// OpenAI's shape: the padding after the arguments, changing every time.
    const O: &str = r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"lo"}}]},"finish_reason":null}],"usage":null,"obfuscation":"gjAvBX"}"#;

    fn openai(args: &str, padding: &str) -> String {
        O.replace(r#""{\"lo""#, args)
            .replace(r#""gjAvBX""#, padding)
    }

    #[test]
    fn the_padding_may_differ_too() {
        let mut l = last(O.as_bytes());
        for (args, padding, want) in [
            (r#""cation\": \"Par""#, r#""6l""#, "cation\": \"Par"),
            (r#""is\\""#, r#""""#, "is\\"),
            (r#""""#, r#""Hdw\u0041xyz""#, ""),
            (r#""\"}""#, r#""S""#, "\"}"),
        ] {
            let b = openai(args, padding);
            let (choice, d) = l.repeat(b.as_bytes()).unwrap_or_else(|| panic!("{b}"));
            assert_eq!((choice, d.arguments.as_ref()), (Some(0), want), "{b}");
        }
    }

    #[test]
    fn padding_that_is_not_one_string_is_not_a_repeat() {
        for (args, padding) in [
            // the padding smuggles a key, or is not a string
            (
                r#""a""#,
                r#""x","usage":{"total_tokens":1},"obfuscation":"y""#,
            ),
            (r#""a""#, r#""x\""#),
            (r#""a""#, "\"a\nb\""),
            (r#""a""#, "null"),
            // the arguments smuggle a key beside them
            (r#""a","name":"other""#, r#""x""#),
            (r#""a\""#, r#""x""#),
        ] {
            let mut l = last(O.as_bytes());
            let b = openai(args, padding);
            assert!(l.repeat(b.as_bytes()).is_none(), "{b}");
        }
        // Anything else changed.
        for changed in [
            O.replace("\"c\"", "\"d\""),
            O.replace("null}],", "\"stop\"}],"),
        ] {
            let mut l = last(O.as_bytes());
            assert!(l.repeat(openai_after(&changed).as_bytes()).is_none());
        }
    }

    /// `o` with other arguments and padding than [`O`]'s.
    fn openai_after(o: &str) -> String {
        o.replace(r#""{\"lo""#, r#""next""#)
            .replace(r#""gjAvBX""#, r#""pad""#)
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
