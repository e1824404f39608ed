//! A held call's argument deltas read typed and borrowed: the bulk of a
//! streamed call, held without building a tree.
//!
//! The shape is narrow on purpose: one of [`DELTAS`]'s types, every key one
//! named here, at most once, each value of the type the whole-tree path
//! requires. The event must name one open call (by `item_id`, by
//! `output_index`, or both the same) that is not done, and nothing may be
//! resumed. Whatever falls outside goes on to the whole-tree path, which
//! decides as before (and fails the stream where it must). For an event
//! that fits, that path would take the same text and hold the same bytes;
//! this reader leads to the same.

use bytes::Bytes;
use serde::Deserialize;

use super::StreamRewriter;
use crate::error::Error;
use crate::json::{from_object, AnyStr, Key};

/// The argument delta types of call items.
const DELTAS: [&str; 2] = [
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallDelta<'a> {
    #[serde(borrow, rename = "type")]
    ty: Key<'a>,
    #[serde(default)]
    sequence_number: Option<u64>,
    #[serde(borrow, default)]
    item_id: Option<Key<'a>>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(borrow)]
    delta: Key<'a>,
    #[serde(default, rename = "obfuscation")]
    _obfuscation: Option<AnyStr>,
}

impl StreamRewriter {
    /// Holds `raw` when its `data` is an argument delta of an open call:
    /// `Some` with what holding it gave, `None` (nothing done) otherwise.
    pub(super) fn hold_delta(
        &mut self,
        name: Option<&str>,
        raw: &Bytes,
        data: &Bytes,
        text: &str,
    ) -> Option<Result<(), Error>> {
        if self.resume.active() || self.batch.is_empty() {
            return None;
        }
        let d = from_object::<CallDelta>(text)?;
        let ty = d.ty.0.as_ref();
        if !DELTAS.contains(&ty) || name.is_some_and(|n| n != ty) {
            return None;
        }
        let by_id = d.item_id.as_ref().and_then(|id| {
            self.batch
                .iter()
                .position(|s| !s.item_id.is_empty() && s.item_id == id.0)
        });
        let by_index = d
            .output_index
            .and_then(|o| self.batch.iter().position(|s| s.output_index == o));
        // An event that names one call by place and another item by id is
        // left to the whole-tree path (which fails it).
        let i = match (by_id, by_index, &d.item_id) {
            (Some(a), Some(b), _) if a != b => return None,
            (Some(a), _, _) | (None, Some(a), None) => a,
            _ => return None,
        };
        let slot = &mut self.batch[i];
        if slot.done.is_some() {
            return None;
        }
        if let Err(e) = slot.add_delta(ty, &d.delta.0) {
            return Some(Err(e));
        }
        let ty = ty.to_string();
        self.began = true;
        self.uses_seq |= d.sequence_number.is_some();
        Some(self.keep_call_event(i, raw.clone(), data.clone(), ty, d.sequence_number))
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

    /// A rewriter holding one open call, `fc_1` at output index 1.
    fn open() -> StreamRewriter {
        let mut r = rw();
        let added = r#"{"type":"response.output_item.added","sequence_number":1,"output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"c","name":"f","arguments":""}}"#;
        r.push(format!("event: response.output_item.added\ndata: {added}\n\n").as_bytes());
        let mut out = BytesMut::new();
        assert!(r.process(&mut out).is_ok());
        assert_eq!(r.batch.len(), 1);
        r
    }

    const PLAIN: &str = r#"{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":1,"delta":"{\"q\":","obfuscation":"xY"}"#;

    fn holds(r: &mut StreamRewriter, name: Option<&str>, data: &str) -> bool {
        let raw = Bytes::from(format!("data: {data}\n\n"));
        let text = data;
        let data = Bytes::copy_from_slice(data.as_bytes());
        let queued = r.queue.len();
        match r.hold_delta(name, &raw, &data, text) {
            Some(res) => {
                assert!(res.is_ok());
                assert_eq!(r.queue.len(), queued + 1);
                assert_eq!(r.queue[queued].raw, raw, "held as it came");
                true
            }
            None => {
                assert_eq!(r.queue.len(), queued, "nothing done");
                false
            }
        }
    }

    #[test]
    fn a_plain_argument_delta_is_held_with_its_text() {
        let mut r = open();
        assert!(holds(
            &mut r,
            Some("response.function_call_arguments.delta"),
            PLAIN
        ));
        let by_index = PLAIN.replace(r#""item_id":"fc_1","#, "");
        assert!(holds(&mut r, None, &by_index));
        let by_id = PLAIN.replace(r#""output_index":1,"#, "");
        assert!(holds(&mut r, None, &by_id));
        assert_eq!(r.batch[0].text, r#"{"q":{"q":{"q":"#);
        assert_eq!(r.queue[1].seq, Some(2), "after the item added");
    }

    #[test]
    fn anything_else_is_left_to_the_whole_tree() {
        for d in [
            PLAIN.replace(r#""obfuscation":"xY""#, r#""obfuscation":"xY","delta":"z""#),
            PLAIN.replace(r#""obfuscation":"xY""#, r#""obfuscation":"xY","x":1"#),
            PLAIN
                .replace(r#""Delta""#, r#""delta""#)
                .replace(r#""delta""#, r#""Delta""#),
            PLAIN.replace("function_call_arguments.delta", "output_text.delta"),
            PLAIN.replace(
                "function_call_arguments.delta",
                "function_call_arguments.done",
            ),
            PLAIN.replace(r#""delta":"{\"q\":""#, r#""delta":{"q":1}"#),
            PLAIN.replace(r#""sequence_number":2"#, r#""sequence_number":-2"#),
            // no open call named, or two named
            PLAIN
                .replace("fc_1", "fc_9")
                .replace(r#""output_index":1"#, r#""output_index":9"#),
            format!("{PLAIN} x"),
            // an object written as an array of its fields
            r#"["response.function_call_arguments.delta",2,"fc_1",1,"{","xY"]"#.to_string(),
        ] {
            assert!(!holds(&mut open(), None, &d), "{d}");
        }
        assert!(!holds(
            &mut open(),
            Some("response.output_text.delta"),
            PLAIN
        ));
        assert!(!holds(&mut rw(), None, PLAIN), "no call open");
        let mut r = open();
        r.batch[0].done = Some(super::super::hold::Done {
            call: Default::default(),
            item: None,
        });
        assert!(!holds(&mut r, None, PLAIN), "the call is done");
    }
}
