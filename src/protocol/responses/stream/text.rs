//! Text deltas read typed and borrowed: the bulk of a Responses stream,
//! passed on as they came without building a tree.
//!
//! The shape is narrow on purpose: one of [`TEXT`]'s types, every key one
//! named here, at most once, each value of the type the whole-tree path
//! requires (`logprobs` empty). Whatever falls outside, and any event that
//! would not simply pass (calls open, a resumed stream, a sequence number
//! to renumber, an item already decided), goes on to the whole-tree path,
//! which decides as before. For an event that fits, that path would check
//! the same and send its bytes unchanged; this reader leads to the same.

use bytes::{BufMut, Bytes, BytesMut};
use serde::Deserialize;

use super::StreamRewriter;
use crate::json::{from_object, AnyStr, Key};

/// The text-only delta types: they never carry a call.
const TEXT: [&str; 4] = [
    "response.output_text.delta",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.refusal.delta",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextDelta<'a> {
    #[serde(borrow, rename = "type")]
    ty: Key<'a>,
    #[serde(default)]
    sequence_number: Option<u64>,
    #[serde(borrow, default)]
    item_id: Option<Key<'a>>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default, rename = "content_index")]
    _content_index: Option<u64>,
    #[serde(default, rename = "summary_index")]
    _summary_index: Option<u64>,
    #[serde(rename = "delta")]
    _delta: AnyStr,
    /// Only empty: entries are objects, left to the strict parse.
    #[serde(default, rename = "logprobs")]
    _logprobs: Option<[u8; 0]>,
    #[serde(default, rename = "obfuscation")]
    _obfuscation: Option<AnyStr>,
}

impl StreamRewriter {
    /// Passes `raw` when its `data` is a text delta that goes on unchanged;
    /// false (nothing done) otherwise.
    pub(super) fn pass_text(
        &mut self,
        name: Option<&str>,
        raw: &Bytes,
        text: &str,
        out: &mut BytesMut,
    ) -> bool {
        if self.resume.active() || !self.batch.is_empty() {
            return false;
        }
        let Some(d) = from_object::<TextDelta>(text) else {
            return false;
        };
        let ty = d.ty.0.as_ref();
        if !TEXT.contains(&ty) || name.is_some_and(|n| n != ty) {
            return false;
        }
        if d.item_id
            .is_some_and(|id| self.decided.contains_key(id.0.as_ref()))
            || d.output_index.is_some_and(|o| self.decided_at.contains(&o))
        {
            return false;
        }
        if let Some(s) = d.sequence_number {
            if self.last_seq.is_some_and(|l| s <= l) {
                return false;
            }
            self.last_seq = Some(s);
            self.uses_seq = true;
        }
        self.began = true;
        out.put_slice(raw);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Rewriter;

    fn rw() -> StreamRewriter {
        StreamRewriter::new(&crate::protocol::sync_driver::testing::options())
    }

    const PLAIN: &str = r#"{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi \"you\"\n","logprobs":[],"obfuscation":"Ab3"}"#;

    fn passes(r: &mut StreamRewriter, name: Option<&str>, data: &str) -> bool {
        let mut out = BytesMut::new();
        let raw = Bytes::from(format!("data: {data}\n\n"));
        let passed = r.pass_text(name, &raw, data, &mut out);
        assert_eq!(passed, !out.is_empty());
        if passed {
            assert_eq!(out, raw, "as it came");
        }
        passed
    }

    #[test]
    fn a_plain_text_delta_passes_as_it_came() {
        let mut r = rw();
        assert!(passes(&mut r, None, PLAIN));
        assert_eq!(r.last_seq, Some(4));
        let next = PLAIN.replace("\"sequence_number\":4", "\"sequence_number\":5");
        assert!(passes(&mut r, Some("response.output_text.delta"), &next));
        let summary = r#"{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"x","sequence_number":null}"#;
        assert!(passes(&mut r, None, summary));
        assert_eq!(r.last_seq, Some(5));
    }

    #[test]
    fn anything_else_is_left_to_the_whole_tree() {
        for d in [
            // a repeated key, a key not named here, one that only folds to one
            PLAIN.replace(r#""content_index":0"#, r#""delta":"x""#),
            PLAIN.replace(r#""content_index":0"#, r#""content_index":0,"x":1"#),
            PLAIN.replace(r#""item_id""#, r#""Item_Id""#),
            PLAIN.replace(r#""content_index":0"#, r#""content_index":0,"item":{}"#),
            // another type, a value of another type
            PLAIN.replace("output_text.delta", "function_call_arguments.delta"),
            PLAIN.replace("output_text.delta", "error"),
            PLAIN.replace(r#""delta":"Hi \"you\"\n""#, r#""delta":{"a":1,"a":2}"#),
            PLAIN.replace(
                r#""logprobs":[]"#,
                r#""logprobs":[{"token":"a","token":"b"}]"#,
            ),
            PLAIN.replace(r#""sequence_number":4"#, r#""sequence_number":4.0"#),
            PLAIN.replace(r#""output_index":0"#, r#""output_index":-1"#),
            PLAIN.replace(r#""item_id":"msg_1""#, r#""item_id":7"#),
            format!("{PLAIN} x"),
            // an object written as an array of its fields
            r#"["response.output_text.delta",4,"msg_1",0,0,null,"Hi",[],"Ab3"]"#.to_string(),
        ] {
            assert!(!passes(&mut rw(), None, &d), "{d}");
        }
        // An event name that is not its type.
        assert!(!passes(&mut rw(), Some("response.completed"), PLAIN));
    }

    #[test]
    fn an_event_that_would_not_simply_pass_is_left_to_the_whole_tree() {
        // A sequence number at or below the last sent is renumbered there.
        let mut r = rw();
        r.last_seq = Some(4);
        assert!(!passes(&mut r, None, PLAIN));
        // An item already decided, a call open, a resumed stream.
        let mut r = rw();
        r.decided
            .insert("msg_1".into(), super::super::Decided::Withheld);
        assert!(!passes(&mut r, None, PLAIN));
        // The place of a decided call.
        let mut r = rw();
        r.decided_at.insert(0);
        assert!(!passes(&mut r, None, PLAIN));
        let mut r = rw();
        let added = r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"c","name":"f","arguments":""}}"#;
        r.push(format!("data: {added}\n\n").as_bytes());
        let mut out = BytesMut::new();
        assert!(r.process(&mut out).is_ok());
        assert!(!r.batch.is_empty());
        assert!(!passes(&mut r, None, PLAIN));
    }
}
