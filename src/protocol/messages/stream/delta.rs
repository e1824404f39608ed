//! A held call block's `input_json_delta` fragments read typed and
//! borrowed: the bulk of a streamed call, held without building a tree.
//!
//! The shape is narrow on purpose: a named `content_block_delta` whose delta
//! is an `input_json_delta`, every key one named here, at most once, each
//! value of the type the whole-tree path requires. Its index must be that of
//! the call block open and held, and nothing may be resumed. Whatever falls
//! outside goes on to the whole-tree path, which decides as before (and
//! fails the stream where it must). For an event that fits, that path would
//! take the same fragment and hold the same bytes; this reader leads to the
//! same.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Map;

use super::{Event, Open, Place, StreamRewriter};
use crate::error::Error;
use crate::json::{from_object, Braced, Key};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockDelta<'a> {
    #[serde(borrow, rename = "type")]
    ty: Key<'a>,
    index: u64,
    #[serde(borrow)]
    delta: Braced<InputPart<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InputPart<'a> {
    #[serde(borrow, rename = "type")]
    ty: Key<'a>,
    #[serde(borrow)]
    partial_json: Key<'a>,
}

impl StreamRewriter {
    /// Holds `raw` when its `data` is a fragment of the call block open:
    /// `Some` with what holding it gave, `None` (nothing done) otherwise.
    pub(super) fn hold_fragment(
        &mut self,
        name: Option<&str>,
        raw: &Bytes,
        data: &Bytes,
    ) -> Option<Result<(), Error>> {
        // A call block must be open and held; its index is checked below.
        let (held_index, i) = match self.open {
            Some(Open {
                in_index,
                place: Place::Held(i),
            }) => (in_index, i),
            _ => return None,
        };
        if name != Some("content_block_delta") || self.resume.active() {
            return None;
        }
        let text = std::str::from_utf8(data).ok()?;
        let d = from_object::<BlockDelta>(text)?;
        if d.ty.0 != "content_block_delta"
            || d.delta.0.ty.0 != "input_json_delta"
            || d.index != held_index
        {
            return None;
        }
        let slot = &mut self.batch[i];
        if !slot.oversized {
            slot.json.push_str(&d.delta.0.partial_json.0);
        }
        self.call_delta = true;
        // The tree is never read again for a held fragment.
        let ev = Event {
            raw: raw.clone(),
            data: data.clone(),
            obj: Map::new(),
            ty: "content_block_delta".to_string(),
            named: true,
        };
        Some(self.hold(i, ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Rewriter;
    use bytes::BytesMut;

    fn rw() -> StreamRewriter {
        StreamRewriter::new(&crate::protocol::sync_driver::testing::options())
    }

    /// A rewriter holding the call block open at index 1.
    fn open() -> StreamRewriter {
        let mut r = rw();
        let start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}}\n\n\
             event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n";
        r.push(start.as_bytes());
        let mut out = BytesMut::new();
        assert!(r.process(&mut out).is_ok());
        assert_eq!(r.batch.len(), 1);
        r
    }

    const PLAIN: &str = r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\": \"a\\n"}}"#;
    const NAME: Option<&str> = Some("content_block_delta");

    fn holds(r: &mut StreamRewriter, name: Option<&str>, data: &str) -> bool {
        let raw = Bytes::from(format!("event: content_block_delta\ndata: {data}\n\n"));
        let data = Bytes::copy_from_slice(data.as_bytes());
        let queued = r.queue.len();
        match r.hold_fragment(name, &raw, &data) {
            Some(res) => {
                assert!(res.is_ok());
                assert_eq!(r.queue.len(), queued + 1);
                assert_eq!(r.queue[queued].ev.raw, raw, "held as it came");
                true
            }
            None => {
                assert_eq!(r.queue.len(), queued, "nothing done");
                false
            }
        }
    }

    #[test]
    fn a_plain_fragment_is_held_with_its_text() {
        let mut r = open();
        assert!(holds(&mut r, NAME, PLAIN));
        assert!(holds(&mut r, NAME, PLAIN));
        assert_eq!(r.batch[0].json, "{\"q\": \"a\\n{\"q\": \"a\\n");
    }

    #[test]
    fn anything_else_is_left_to_the_whole_tree() {
        for d in [
            PLAIN.replace(r#""index":1"#, r#""index":1,"index":1"#),
            PLAIN.replace(r#""partial_json":"#, r#""partial_json":"","partial_json":"#),
            PLAIN.replace(r#""index":1"#, r#""index":1,"x":1"#),
            PLAIN.replace(r#""partial_json""#, r#""Partial_Json""#),
            PLAIN.replace("input_json_delta", "text_delta"),
            PLAIN.replace("content_block_delta", "content_block_stop"),
            PLAIN.replace(
                r#""partial_json":"{\"q\": \"a\\n""#,
                r#""partial_json":{"q":1}"#,
            ),
            PLAIN.replace(r#""index":1"#, r#""index":0"#),
            PLAIN.replace(r#""index":1"#, r#""index":"1""#),
            format!("{PLAIN} x"),
            // an object written as an array of its fields
            r#"["content_block_delta",1,{"type":"input_json_delta","partial_json":"{"}]"#
                .to_string(),
            r#"{"type":"content_block_delta","index":1,"delta":["input_json_delta","{"]}"#
                .to_string(),
        ] {
            assert!(!holds(&mut open(), NAME, &d), "{d}");
        }
        assert!(!holds(&mut open(), None, PLAIN), "unnamed");
        assert!(!holds(&mut rw(), NAME, PLAIN), "no block open");
    }
}
