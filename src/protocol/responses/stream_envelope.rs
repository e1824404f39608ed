//! Response envelopes read without a tree: `response.created`,
//! `.in_progress`, `.queued` and the terminal events each carry the whole
//! response, the request's instructions and tools echoed in it, and were
//! parsed whole for the few members toolgate reads.
//!
//! The shape is narrow: the event's keys are `type`, `sequence_number` and
//! `response`, each at most once; the response is an object whose keys are
//! all distinct (and none taken for `id` or `output` by a lenient reader),
//! its `output` an array. One pass reads it: `output` alone becomes a tree,
//! as before; every other value is only checked to be one the strict tree
//! would take (no repeated key at any depth), since it goes on as it came.
//! Whatever falls outside, and any event that would not reach
//! [`StreamRewriter::pass`] (calls open, a resumed stream), goes to the
//! whole-tree path, which decides as before. An envelope that closes a
//! batch of calls is gated first and sent as read after the verdicts, as
//! there. Also here: what the rewriter keeps of an envelope (the snapshot
//! for a failure ending, the event that closed a batch).

use std::borrow::Cow;
use std::fmt;

use bytes::{Bytes, BytesMut};
use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

use super::{malformed, StreamRewriter};
use crate::error::Error;
use crate::fold;
use crate::protocol::json::{from_object, Checked, Key, Strict};

/// The response a stream announced, kept for a failure ending: its tree, or
/// the data of the event that carried it when that was read without one
/// (checked strict then, so it reads back).
#[derive(Debug)]
pub(super) enum Snapshot {
    Tree(Map<String, Value>),
    Event(Bytes),
}

impl Snapshot {
    pub(super) fn into_map(self) -> Option<Map<String, Value>> {
        match self {
            Snapshot::Tree(m) => Some(m),
            Snapshot::Event(data) => match crate::protocol::json::strict_value(&data) {
                Ok(Value::Object(mut event)) => match event.remove("response") {
                    Some(Value::Object(m)) => Some(m),
                    _ => None,
                },
                _ => None,
            },
        }
    }
}

/// The event that closed a batch, handled after the verdicts.
#[derive(Debug)]
pub(super) enum Ahead {
    /// Read as a tree.
    Tree(Bytes, Bytes, Map<String, Value>),
    /// An envelope read typed.
    Envelope { raw: Bytes, data: Bytes, read: Read },
}

impl Ahead {
    pub(super) fn ty(&self) -> &str {
        match self {
            Ahead::Tree(_, _, obj) => obj.get("type").and_then(Value::as_str).unwrap_or(""),
            Ahead::Envelope { read, .. } => read.ty,
        }
    }
}

/// The events that carry the whole response.
const ENVELOPES: [&str; 6] = [
    "response.created",
    "response.in_progress",
    "response.queued",
    "response.completed",
    "response.incomplete",
    "response.failed",
];

/// Responses with more members go to the whole-tree path.
const MAX_MEMBERS: usize = 64;

/// What the rewriter reads of an envelope.
struct Envelope<'a> {
    ty: Cow<'a, str>,
    seq: Option<u64>,
    resp: Resp<'a>,
}

/// A member toolgate does not read, or that the shape above does not take.
fn odd<E: de::Error>() -> E {
    E::custom("not an envelope of the narrow shape")
}

impl<'de> Deserialize<'de> for Envelope<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Top;
        impl<'de> Visitor<'de> for Top {
            type Value = Envelope<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a response event")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Envelope<'de>, A::Error> {
                let (mut ty, mut seq, mut resp) = (None, None, None);
                while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
                    match k.as_ref() {
                        "type" if ty.is_none() => ty = Some(m.next_value::<Key<'de>>()?.0),
                        "sequence_number" if seq.is_none() => {
                            seq = Some(m.next_value::<Option<u64>>()?)
                        }
                        "response" if resp.is_none() => resp = Some(m.next_value::<Resp<'de>>()?),
                        _ => return Err(odd()),
                    }
                }
                let (Some(ty), Some(resp)) = (ty, resp) else {
                    return Err(odd());
                };
                Ok(Envelope {
                    ty,
                    seq: seq.flatten(),
                    resp,
                })
            }
        }
        d.deserialize_map(Top)
    }
}

/// An envelope as read, kept while the calls it closed are gated.
#[derive(Debug)]
pub(super) struct Read {
    pub ty: &'static str,
    seq: Option<u64>,
    id: Option<String>,
    output: Option<Vec<Value>>,
}

/// The response: its `id`, `output`, `model` and `usage`, every other
/// member checked.
struct Resp<'a> {
    id: Option<Cow<'a, str>>,
    output: Option<Vec<Value>>,
    model: Option<Cow<'a, str>>,
    /// When an object.
    usage: Option<Value>,
}

impl<'de> Deserialize<'de> for Resp<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Resp<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a response")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Resp<'de>, A::Error> {
                let mut r = Resp {
                    id: None,
                    output: None,
                    model: None,
                    usage: None,
                };
                let mut keys: Vec<Cow<'de, str>> = Vec::with_capacity(32);
                while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
                    // Compared one by one: a response has a few tens of members.
                    if keys.len() >= MAX_MEMBERS
                        || keys.contains(&k)
                        || fold::impersonates(&k, &["id", "output"])
                    {
                        return Err(odd());
                    }
                    match k.as_ref() {
                        "id" => r.id = m.next_value::<Id<'de>>()?.0,
                        "model" => r.model = m.next_value::<Id<'de>>()?.0,
                        "usage" => {
                            r.usage = Some(m.next_value::<Strict>()?.0).filter(Value::is_object)
                        }
                        "output" => match m.next_value::<Strict>()?.0 {
                            Value::Array(items) => r.output = Some(items),
                            _ => return Err(odd()),
                        },
                        _ => {
                            m.next_value::<Checked>()?;
                        }
                    }
                    keys.push(k);
                }
                Ok(r)
            }
        }
        d.deserialize_map(V)
    }
}

/// An `id` or `model`: the string, or `None` for any other (checked) value.
struct Id<'a>(Option<Cow<'a, str>>);

impl<'de> Deserialize<'de> for Id<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Strict::deserialize(d)?.0 {
            Value::String(s) => Ok(Id(Some(Cow::Owned(s)))),
            _ => Ok(Id(None)),
        }
    }
}

impl StreamRewriter {
    /// The event that closed a batch, once its verdicts are applied.
    pub(super) fn ahead(&mut self, ahead: Ahead, out: &mut BytesMut) -> Result<(), Error> {
        match ahead {
            Ahead::Tree(raw, data, obj) => self.dispatch(raw, data, obj, out),
            // Sent as it was read, unless the verdicts resume the response
            // (what waits for the follow-up is the whole-tree path's).
            Ahead::Envelope { raw, data, read } if !self.resume.active() => {
                self.send_envelope(&raw, &data, read, out)
            }
            Ahead::Envelope { raw, data, .. } => match crate::protocol::json::strict_value(&data) {
                Ok(Value::Object(obj)) => self.dispatch(raw, data, obj, out),
                _ => Err(malformed("event data is not a JSON object")),
            },
        }
    }

    /// Sends (or rewrites) an envelope read without a tree; `None`
    /// (nothing done) when it is not one this reader takes.
    pub(super) fn pass_envelope(
        &mut self,
        name: Option<&str>,
        raw: &Bytes,
        data: &Bytes,
        out: &mut BytesMut,
    ) -> Option<Result<(), Error>> {
        // With calls open, only an event that closes the batch (every call
        // done) is taken: it is gated first, as the whole-tree path does.
        if self.resume.active() || self.batch.iter().any(|s| s.done.is_none()) {
            return None;
        }
        let text = std::str::from_utf8(data).ok()?;
        let e = from_object::<Envelope>(text)?;
        let ty = ENVELOPES.into_iter().find(|t| *t == e.ty)?;
        if name.is_some_and(|n| n != ty) {
            return None;
        }
        self.began = true;
        self.uses_seq |= e.seq.is_some();
        let resp = e.resp;
        if let Some(usage) = &resp.usage {
            self.usage.add_response(resp.model.as_deref(), usage);
        }
        let read = Read {
            ty,
            seq: e.seq,
            id: resp.id.map(Cow::into_owned),
            output: resp.output,
        };
        if !self.batch.is_empty() {
            self.lookahead = Some(Ahead::Envelope {
                raw: raw.clone(),
                data: data.clone(),
                read,
            });
            return Some(self.start_gate());
        }
        Some(self.send_envelope(raw, data, read, out))
    }

    /// Sends an envelope read typed, its response's `output` rewritten if
    /// the calls decided need it.
    pub(super) fn send_envelope(
        &mut self,
        raw: &Bytes,
        data: &Bytes,
        read: Read,
        out: &mut BytesMut,
    ) -> Result<(), Error> {
        // A copy of its own size: a slice would keep the whole buffer it was
        // read into for as long as the stream lasts.
        self.note_response(read.id.as_deref(), || {
            Snapshot::Event(Bytes::copy_from_slice(data))
        });
        let output = match read.output {
            Some(items) => self.final_output(&items)?,
            None => None,
        };
        self.emit(raw, data, read.ty, read.seq, output, out)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::call::Call;
    use crate::protocol::sync_driver::RunSync;
    use crate::protocol::Rewriter;

    fn rw(typed: bool) -> StreamRewriter {
        let r = StreamRewriter::new(&crate::protocol::sync_driver::testing::options());
        if typed {
            r
        } else {
            r.whole_tree_only()
        }
    }

    fn ev(v: &Value) -> String {
        format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap_or(""))
    }

    /// The response a real provider echoes: instructions and tools.
    fn response(status: &str, output: Value) -> Value {
        json!({"id": "resp_1", "object": "response", "status": status, "instructions": "Be brief.",
               "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}],
               "output": output, "usage": null})
    }

    fn call_item(status: &str, args: &str) -> Value {
        json!({"id": "fc_1", "type": "function_call", "status": status, "arguments": args, "call_id": "call_1", "name": "shell"})
    }

    /// A turn with one call, its envelopes numbered.
    fn turn(created: Value, completed: Value) -> String {
        let args = "{\"cmd\":\"ls\"}";
        [
            created,
            json!({"type": "response.in_progress", "response": response("in_progress", json!([]))}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": call_item("in_progress", "")}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_1", "delta": args}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": call_item("completed", args)}),
            completed,
        ]
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut e = e.clone();
            if i > 0 && e.get("sequence_number").is_none() {
                e["sequence_number"] = json!(i);
            }
            ev(&e)
        })
        .collect()
    }

    fn created() -> Value {
        json!({"type": "response.created", "response": response("in_progress", json!([]))})
    }

    fn completed() -> Value {
        let args = "{\"cmd\":\"ls\"}";
        json!({"type": "response.completed", "response": response("completed", json!([call_item("completed", args)]))})
    }

    fn both(input: &str, allow: bool) -> String {
        let outs: Vec<String> = [true, false]
            .map(|typed| {
                let out = rw(typed).run_sync(&[input.as_bytes()], |_: &Call| allow);
                String::from_utf8_lossy(&out).into_owned()
            })
            .into();
        assert_eq!(outs[0], outs[1], "typed and whole-tree differ on:\n{input}");
        outs[0].clone()
    }

    /// Whether `data` (an event's) is taken by this reader on a fresh stream.
    fn taken(data: &Value) -> bool {
        let mut r = rw(true);
        let text = Bytes::from(data.to_string());
        let raw = Bytes::from(format!("data: {}\n\n", data));
        let mut out = BytesMut::new();
        r.pass_envelope(None, &raw, &text, &mut out).is_some()
    }

    #[test]
    fn envelopes_pass_as_they_came_and_are_rewritten_alike() {
        let input = turn(created(), completed());
        assert!(taken(&created()) && taken(&completed()));
        assert_eq!(both(&input, true), input, "all allowed: byte for byte");
        let denied = both(&input, false);
        let last = denied.rsplit("data: ").next().unwrap_or("");
        let done: Value = serde_json::from_str(last.trim()).unwrap();
        assert_eq!(done["type"], "response.completed");
        assert_eq!(done["response"]["output"][0]["type"], "message", "{denied}");
        assert!(!denied.contains("\"ls\""), "{denied}");
    }

    #[test]
    fn a_failure_after_a_typed_envelope_ends_with_its_snapshot() {
        // The stream breaks after the call opened: the ending carries the
        // response from the snapshot kept as text.
        let input = turn(created(), completed());
        let cut = input.find("event: response.output_item.done").unwrap_or(0);
        let broken = format!("{}data: {{\"type\":\n\n", &input[..cut]);
        let out = both(&broken, true);
        assert!(out.contains("event: response.failed"), "{out}");
        assert!(out.contains("\"instructions\":\"Be brief.\""), "{out}");
        assert!(!out.contains("\"ls\""), "{out}");
    }

    #[test]
    fn odd_envelopes_go_to_the_whole_tree_path() {
        let resp = response("in_progress", json!([])).to_string();
        let with = |f: &dyn Fn(&mut Value)| {
            let mut e = created();
            f(&mut e);
            e.to_string()
        };
        let odd = [
            // A repeated key deep in the echoed tools, and in the response.
            r#"{"type":"response.created","response":{"id":"r","tools":[{"name":"a","name":"b"}],"output":[]}}"#.to_string(),
            r#"{"type":"response.created","response":{"id":"r","output":[],"output":[{"type":"function_call","id":"x","call_id":"y","name":"shell","arguments":"{}"}]}}"#.to_string(),
            format!(r#"{{"type":"response.created","response":{resp},"response":{resp}}}"#),
            with(&|e| e["response"]["Output"] = json!([call_item("completed", "{}")])),
            with(&|e| e["response"]["output"] = json!({})),
            with(&|e| e["response"] = json!([1])),
            with(&|e| e["sequence_number"] = json!("3")),
            with(&|e| e["extra"] = json!(1)),
            with(&|e| e["type"] = json!("response.output_text.done")),
            format!(r#"{{"type":"response.created","response":{resp},"Response":{resp}}}"#),
            with(&|e| {
                for i in 0..MAX_MEMBERS {
                    e["response"][format!("m{i}")] = json!(i);
                }
            }),
        ];
        let first = created().to_string();
        let base = turn(created(), completed());
        for e in &odd {
            let mut r = rw(true);
            let raw = Bytes::from(format!("data: {e}\n\n"));
            let data = Bytes::from(e.clone());
            let passed = r.pass_envelope(None, &raw, &data, &mut BytesMut::new());
            assert!(passed.is_none(), "{e}");
            // Either path answers the same for a turn that opens with it.
            let input = base.replacen(&first, e, 1);
            assert_ne!(input, base);
            both(&input, true);
            both(&input, false);
        }
        // The repeated keys were refused, not passed.
        for e in &odd[..3] {
            let out = both(&base.replacen(&first, e, 1), true);
            assert!(out.contains("event: error"), "{out}");
        }
    }

    #[test]
    fn usage_is_counted_alike() {
        let mut done = completed();
        done["response"]["model"] = json!("gpt-test");
        done["response"]["usage"] = json!({"input_tokens": 5, "input_tokens_details": {"cached_tokens": 1}, "output_tokens": 2, "total_tokens": 7});
        let input = turn(created(), done);
        for typed in [true, false] {
            let mut r = rw(typed);
            r.run_sync(&[input.as_bytes()], |_: &Call| true);
            let u = r.take_usage();
            assert_eq!((u.input, u.output), (5, 2), "typed {typed}");
            assert_eq!(u.model.as_deref(), Some("gpt-test"), "typed {typed}");
        }
    }

    #[test]
    fn an_id_that_is_not_a_string_is_read_alike() {
        let base = turn(created(), completed());
        let first = created().to_string();
        for id in [r#"5"#, r#"{"a":1}"#, r#"{"a":1,"a":2}"#, "null"] {
            let e = first.replacen(r#""id":"resp_1""#, &format!(r#""id":{id}"#), 1);
            assert_ne!(e, first);
            let input = base.replacen(&first, &e, 1);
            let out = both(&input, false);
            assert_eq!(
                out.contains("event: error"),
                id.contains("\"a\":2"),
                "{out}"
            );
        }
    }

    #[test]
    fn with_calls_open_only_the_event_that_closes_them() {
        let input = turn(created(), completed());
        let text = Bytes::from(completed().to_string());
        let raw = Bytes::from(format!("data: {}\n\n", completed()));
        for (upto, closes) in [
            ("event: response.output_item.done", false),
            ("event: response.completed", true),
        ] {
            let mut r = rw(true);
            let cut = input.find(upto).unwrap_or(0);
            let mut out = BytesMut::new();
            r.push(&input.as_bytes()[..cut]);
            assert!(r.process(&mut out).is_ok());
            let taken = r.pass_envelope(None, &raw, &text, &mut out);
            assert_eq!(taken.is_some(), closes, "{upto}");
            if closes {
                // Gated first; the envelope, as read, waits for the verdicts.
                assert!(matches!(taken, Some(Ok(()))));
                assert_eq!(r.pending().len(), 1);
                let ty = r.lookahead.as_ref().map(Ahead::ty);
                assert_eq!(ty, Some("response.completed"));
                assert!(matches!(r.lookahead, Some(Ahead::Envelope { .. })));
            }
        }
    }
}
