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
use crate::json::{from_object, Checked, Key, Strict};

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
            Snapshot::Event(data) => match crate::json::strict_value(&data) {
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
    /// What it holds, for the budget: its bytes and a tree about twice
    /// their size.
    pub(super) fn bytes(&self) -> usize {
        match self {
            Ahead::Tree(raw, data, _) => raw.len() + 3 * data.len(),
            Ahead::Envelope { raw, data, read } => {
                raw.len() + data.len() + read.output.as_ref().map_or(0, |_| 2 * data.len())
            }
        }
    }

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
            Ahead::Envelope { raw, data, .. } => match crate::json::strict_value(&data) {
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
        text: &str,
        out: &mut BytesMut,
    ) -> Option<Result<(), Error>> {
        // With calls open, only an event that closes the batch (every call
        // done) is taken: it is gated first, as the whole-tree path does.
        if self.resume.active() || self.batch.iter().any(|s| s.done.is_none()) {
            return None;
        }
        let e = from_object::<Envelope>(text)?;
        let ty = ENVELOPES.into_iter().find(|t| *t == e.ty)?;
        if name.is_some_and(|n| n != ty) {
            return None;
        }
        self.began = true;
        self.uses_seq |= e.seq.is_some();
        let resp = e.resp;
        if let Some(usage) = &resp.usage {
            self.usage
                .add_response((resp.id.as_deref(), resp.model.as_deref()), usage);
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
        self.note_response(read.id.as_deref(), data.len(), || {
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
mod tests;
