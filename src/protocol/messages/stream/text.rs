//! Text and thinking deltas read typed and borrowed: the bulk of a Messages
//! stream, passed on as they came without building a tree.
//!
//! The shape is narrow on purpose: a named `content_block_delta` whose
//! delta is a `text_delta` or a `thinking_delta`, every key one named here,
//! at most once, each value of the type the whole-tree path requires.
//! Whatever falls outside, and any event that would not simply pass (calls
//! held, a resumed or resumable stream, a block not open or renumbered),
//! goes on to the whole-tree path, which decides as before. For an event
//! that fits, that path would check the same and send its bytes unchanged;
//! this reader leads to the same.

use bytes::{BufMut, Bytes, BytesMut};
use serde::Deserialize;

use super::{Open, Place, StreamRewriter};
use crate::json::{from_object, AnyStr, Braced, Key};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockDelta<'a> {
    #[serde(borrow, rename = "type")]
    ty: Key<'a>,
    index: u64,
    #[serde(borrow)]
    delta: Braced<TextPart<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextPart<'a> {
    #[serde(borrow, rename = "type")]
    ty: Key<'a>,
    #[serde(default)]
    text: Option<AnyStr>,
    #[serde(default)]
    thinking: Option<AnyStr>,
}

impl StreamRewriter {
    /// Passes `raw` when its `data` is a text or thinking delta that goes on
    /// unchanged; false (nothing done) otherwise.
    pub(super) fn pass_text(
        &mut self,
        name: Option<&str>,
        raw: &Bytes,
        data: &[u8],
        out: &mut BytesMut,
    ) -> bool {
        if name != Some("content_block_delta")
            || self.resume.active()
            || self.resume.allowed
            || !self.batch.is_empty()
        {
            return false;
        }
        let Ok(text) = std::str::from_utf8(data) else {
            return false;
        };
        let Some(d) = from_object::<BlockDelta>(text) else {
            return false;
        };
        let fits = match d.delta.0.ty.0.as_ref() {
            "text_delta" => d.delta.0.text.is_some() && d.delta.0.thinking.is_none(),
            "thinking_delta" => d.delta.0.thinking.is_some() && d.delta.0.text.is_none(),
            _ => false,
        };
        let open = matches!(self.open, Some(Open { in_index, place: Place::Out(o) })
            if in_index == d.index && o == d.index);
        if d.ty.0 != "content_block_delta" || !fits || !open {
            return false;
        }
        out.put_slice(raw);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Options, Rewriter};

    fn rw(resume: bool) -> StreamRewriter {
        StreamRewriter::new(&Options {
            resume,
            ..crate::protocol::sync_driver::testing::options()
        })
    }

    /// A rewriter with a text block open at `index`.
    fn open_at(resume: bool, index: u64) -> StreamRewriter {
        let mut r = rw(resume);
        let start = format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}}}}\n\n\
             event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{index},\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n"
        );
        r.push(start.as_bytes());
        let mut out = BytesMut::new();
        assert!(r.process(&mut out).is_ok());
        r
    }

    const PLAIN: &str = r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi \"you\"\n"}}"#;

    fn passes(r: &mut StreamRewriter, name: Option<&str>, data: &str) -> bool {
        let mut out = BytesMut::new();
        let raw = Bytes::from(format!("event: content_block_delta\ndata: {data}\n\n"));
        let passed = r.pass_text(name, &raw, data.as_bytes(), &mut out);
        assert_eq!(passed, !out.is_empty());
        if passed {
            assert_eq!(out, raw, "as it came");
        }
        passed
    }

    const NAME: Option<&str> = Some("content_block_delta");

    #[test]
    fn a_plain_text_or_thinking_delta_passes_as_it_came() {
        let mut r = open_at(false, 0);
        assert!(passes(&mut r, NAME, PLAIN));
        let thinking = r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#;
        assert!(passes(&mut r, NAME, thinking));
    }

    #[test]
    fn anything_else_is_left_to_the_whole_tree() {
        for d in [
            // a repeated key, a key not named here, one that only folds to one
            PLAIN.replace(r#""index":0"#, r#""index":0,"index":0"#),
            PLAIN.replace(r#""text":"#, r#""text":"a","text":"#),
            PLAIN.replace(r#""index":0"#, r#""index":0,"x":1"#),
            PLAIN.replace(r#""delta":{"#, r#""Delta":{"#),
            // another type, a delta of another kind or shape
            PLAIN.replace("content_block_delta", "content_block_stop"),
            PLAIN.replace("text_delta", "input_json_delta"),
            PLAIN.replace(r#""text":"#, r#""partial_json":"#),
            PLAIN.replace(r#""text":"Hi \"you\"\n""#, r#""text":"a","thinking":"b""#),
            PLAIN.replace(r#""text":"Hi \"you\"\n""#, r#""text":{"a":1,"a":2}"#),
            PLAIN.replace(r#""index":0"#, r#""index":0.0"#),
            format!("{PLAIN} x"),
            // an object written as an array of its fields
            r#"["content_block_delta",0,{"type":"text_delta","text":"Hi"}]"#.to_string(),
            PLAIN.replace(
                r#"{"type":"text_delta","text":"Hi \"you\"\n"}"#,
                r#"["text_delta","Hi"]"#,
            ),
        ] {
            assert!(!passes(&mut open_at(false, 0), NAME, &d), "{d}");
        }
        // Unnamed (written anew with its name), or named otherwise.
        assert!(!passes(&mut open_at(false, 0), None, PLAIN));
        assert!(!passes(&mut open_at(false, 0), Some("ping"), PLAIN));
    }

    #[test]
    fn an_event_that_would_not_simply_pass_is_left_to_the_whole_tree() {
        // No block open, another block open, a resumable stream.
        assert!(!passes(&mut rw(false), NAME, PLAIN));
        assert!(!passes(&mut open_at(false, 1), NAME, PLAIN));
        assert!(!passes(&mut open_at(true, 0), NAME, PLAIN));
        // A block renumbered for the agent (a call before it was withheld).
        let mut r = open_at(false, 1);
        r.open = Some(Open {
            in_index: 1,
            place: Place::Out(0),
        });
        let one = PLAIN.replace(r#""index":0"#, r#""index":1"#);
        assert!(!passes(&mut r, NAME, &one));
        r.open = Some(Open {
            in_index: 1,
            place: Place::Out(1),
        });
        assert!(passes(&mut r, NAME, &one));
    }
}
