//! The chunks toolgate writes into a chat stream: the fields they take from
//! the upstream's chunks (`id`, `model`, …), remembered as they change, and
//! a released call as one whole delta. They are written straight into the
//! output, the fields' JSON kept from one chunk to the next.

use bytes::{BufMut, BytesMut};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::Site;
use crate::call::Call;
use crate::error::Error;

/// The chunk fields copied into the chunks toolgate writes.
pub const FIELDS: [&str; 7] = [
    "id",
    "object",
    "created",
    "model",
    "system_fingerprint",
    "service_tier",
    "provider",
];

/// [`FIELDS`]' positions in the order of their names.
const BY_NAME: [usize; 7] = [2, 0, 3, 1, 6, 5, 4];

/// The `object` of a chunk written before the upstream named one.
const DEFAULT_OBJECT: &str = "chat.completion.chunk";

#[derive(Debug, Default)]
pub struct Template {
    /// Each field's value as last seen, in [`FIELDS`] order (a map of them
    /// would cost a 600-byte node in every open stream).
    fields: [Option<Value>; 7],
    /// The raw text each field last had in a chunk read by
    /// [`super::delta`], while `fields` holds that value (empty when
    /// unknown); boxed `str`s, not `String`s, keep every stream's rewriter
    /// within a smaller allocation.
    raw: [Box<str>; 7],
    /// `fields` (with the default `object`) as the JSON that follows
    /// `choices` in a written chunk, from the first `,`; rebuilt when a
    /// field changes (empty: not built yet).
    tail: Vec<u8>,
}

impl Template {
    /// Copies the fields of a parsed chunk that changed.
    pub fn remember(&mut self, obj: &Map<String, Value>) {
        for ((key, seen), field) in FIELDS.iter().zip(&mut self.raw).zip(&mut self.fields) {
            // Chunks of one stream mostly repeat these: copied only when changed.
            if let Some(v) = obj.get(*key).filter(|v| field.as_ref() != Some(*v)) {
                *field = Some(v.clone());
                *seen = Box::default();
                self.tail.clear();
            }
        }
    }

    /// The same for a chunk read by [`super::delta`] (its fields raw, in
    /// [`FIELDS`] order): a field is parsed only when its text changed.
    pub fn remember_raw(&mut self, raw: [Option<&RawValue>; 7]) -> Result<(), Error> {
        for ((raw, seen), field) in raw.into_iter().zip(&mut self.raw).zip(&mut self.fields) {
            let Some(raw) = raw.filter(|r| r.get() != &**seen) else {
                continue;
            };
            let v: Value = serde_json::from_str(raw.get())
                .map_err(|_| Error::UpstreamUnreadable("event data is not a JSON object"))?;
            *field = Some(v);
            *seen = raw.get().into();
            self.tail.clear();
        }
        Ok(())
    }

    /// Lets go of the raw texts while the stream waits on a slow gate (the
    /// next chunk's fields are then parsed once more).
    pub fn compact(&mut self) {
        self.raw = Default::default();
    }

    /// A field's value as last seen.
    pub fn field(&self, key: &str) -> Option<&Value> {
        let i = FIELDS.iter().position(|k| *k == key)?;
        self.fields[i].as_ref()
    }

    /// The fields as a chunk's keys, with the default `object`.
    fn map(&self) -> Map<String, Value> {
        let mut obj: Map<String, Value> = FIELDS
            .iter()
            .zip(&self.fields)
            .filter_map(|(k, v)| Some((k.to_string(), v.clone()?)))
            .collect();
        obj.entry("object").or_insert_with(|| json!(DEFAULT_OBJECT));
        obj
    }

    /// A chunk of these fields with one choice.
    pub fn chunk(&self, choice: u32, delta: Value, finish: Value) -> Value {
        let mut obj = self.map();
        obj.insert(
            "choices".into(),
            json!([{ "index": choice, "delta": delta, "finish_reason": finish }]),
        );
        Value::Object(obj)
    }

    /// Writes the event of [`Template::chunk`] (the same bytes) without
    /// building it.
    pub fn write_chunk(&mut self, out: &mut BytesMut, choice: u32, delta: &Value, finish: &Value) {
        self.write(out, choice, finish, |w| to_writer(w, delta));
    }

    /// Writes the chunk that says a choice's finish, and nothing else.
    pub fn write_finish(&mut self, out: &mut BytesMut, choice: u32, sent: &str) {
        self.write_chunk(out, choice, &json!({}), &Value::String(sent.to_string()));
    }

    /// Writes a released call as one chunk: the whole call in one delta at
    /// index `j` (keys in the order a tree of it would write them).
    pub fn write_call(
        &mut self,
        out: &mut BytesMut,
        choice: u32,
        j: usize,
        call: &Call,
        site: &Site,
    ) {
        self.write(out, choice, &Value::Null, |w| {
            if site.legacy {
                w.extend_from_slice(b"{\"function_call\":");
                function(w, call);
                w.push(b'}');
                return;
            }
            enum Part<'a> {
                Function,
                Id,
                Index,
                Type,
                Extra(&'a Value),
            }
            let mut parts: Vec<(&str, Part)> = vec![
                ("function", Part::Function),
                ("id", Part::Id),
                ("index", Part::Index),
                ("type", Part::Type),
            ];
            for (k, v) in &site.extra {
                if !parts.iter().any(|(p, _)| p == k) {
                    parts.push((k, Part::Extra(v)));
                }
            }
            parts.sort_by(|a, b| a.0.cmp(b.0));
            w.extend_from_slice(b"{\"tool_calls\":[{");
            for (n, (k, part)) in parts.into_iter().enumerate() {
                if n > 0 {
                    w.push(b',');
                }
                to_writer(w, k);
                w.push(b':');
                match part {
                    Part::Function => function(w, call),
                    Part::Id => to_writer(w, &call.id),
                    Part::Index => to_writer(w, &j),
                    Part::Type => w.extend_from_slice(b"\"function\""),
                    Part::Extra(v) => to_writer(w, v),
                }
            }
            w.extend_from_slice(b"}]}");
        });
    }

    /// `data: {"choices":[{"delta":…,"finish_reason":…,"index":…}],<fields>}`
    /// and the blank line, `delta` written by `write_delta`.
    fn write(
        &mut self,
        out: &mut BytesMut,
        choice: u32,
        finish: &Value,
        write_delta: impl FnOnce(&mut Vec<u8>),
    ) {
        if self.tail.is_empty() {
            // In key order, as a tree of the chunk writes them (without
            // building one).
            for i in BY_NAME {
                let (key, v) = (FIELDS[i], &self.fields[i]);
                if v.is_none() && key != "object" {
                    continue;
                }
                self.tail.push(b',');
                to_writer(&mut self.tail, key);
                self.tail.push(b':');
                match v {
                    Some(v) => to_writer(&mut self.tail, v),
                    None => to_writer(&mut self.tail, DEFAULT_OBJECT),
                }
            }
        }
        let mut w = Vec::with_capacity(128 + self.tail.len());
        w.extend_from_slice(b"data: {\"choices\":[{\"delta\":");
        write_delta(&mut w);
        w.extend_from_slice(b",\"finish_reason\":");
        to_writer(&mut w, finish);
        w.extend_from_slice(b",\"index\":");
        to_writer(&mut w, &choice);
        w.extend_from_slice(b"}]");
        w.extend_from_slice(&self.tail);
        w.extend_from_slice(b"}\n\n");
        out.put_slice(&w);
    }
}

/// `{"arguments":…,"name":…}`
fn function(w: &mut Vec<u8>, call: &Call) {
    w.extend_from_slice(b"{\"arguments\":");
    to_writer(w, &call.arguments);
    w.extend_from_slice(b",\"name\":");
    to_writer(w, &call.name);
    w.push(b'}');
}

/// Serialising a string, number or tree into memory cannot fail.
fn to_writer<T: serde::Serialize + ?Sized>(w: &mut Vec<u8>, v: &T) {
    let _ = serde_json::to_writer(w, v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::chat::write_event;

    /// The event as the tree of it writes it: what the written bytes must be.
    fn by_tree(v: &Value) -> Vec<u8> {
        let mut out = BytesMut::new();
        write_event(&mut out, v);
        out.to_vec()
    }

    fn call_tree(t: &Template, choice: u32, j: usize, call: &Call, site: &Site) -> Value {
        let function = json!({ "name": call.name, "arguments": call.arguments });
        let delta = if site.legacy {
            json!({ "function_call": function })
        } else {
            let mut entry = Map::new();
            entry.insert("index".into(), json!(j));
            entry.insert("id".into(), json!(call.id));
            entry.insert("type".into(), json!("function"));
            entry.insert("function".into(), function);
            for (k, v) in &site.extra {
                entry.entry(k.clone()).or_insert_with(|| v.clone());
            }
            json!({ "tool_calls": [Value::Object(entry)] })
        };
        t.chunk(choice, delta, Value::Null)
    }

    #[test]
    fn written_chunks_are_the_bytes_of_their_tree() {
        let mut t = Template::default();
        let written = |t: &mut Template, delta: Value, finish: Value| {
            let mut out = BytesMut::new();
            t.write_chunk(&mut out, 2, &delta, &finish);
            assert_eq!(out.to_vec(), by_tree(&t.chunk(2, delta, finish)));
        };
        // No fields yet: only the default `object`.
        written(&mut t, json!({}), json!("stop"));
        let first = json!({"id": "c-1", "model": "m\"x", "created": 7, "provider": "p"});
        t.remember(first.as_object().unwrap());
        written(&mut t, json!({"content": "a \u{1F600} \n"}), Value::Null);
        // A field that changes is written as it now is.
        let next = json!({"id": "c-2", "object": "chat.completion.chunk.v2"});
        t.remember(next.as_object().unwrap());
        written(&mut t, json!({"refusal": "no"}), json!("tool_calls"));
        let raw: Box<RawValue> = serde_json::from_str("\"fp_\\u0041\"").unwrap();
        let mut fields = [None; 7];
        fields[4] = Some(&*raw);
        t.remember_raw(fields).unwrap();
        written(&mut t, json!({}), Value::Null);
    }

    #[test]
    fn the_fields_are_written_in_the_order_of_their_names() {
        let mut sorted = FIELDS;
        sorted.sort_unstable();
        assert_eq!(BY_NAME.map(|i| FIELDS[i]), sorted);
        let mut t = Template::default();
        let all: Map<String, Value> = FIELDS
            .iter()
            .map(|k| (k.to_string(), json!(format!("{k}-v"))))
            .collect();
        t.remember(&all);
        let mut out = BytesMut::new();
        t.write_chunk(&mut out, 0, &json!({}), &Value::Null);
        assert_eq!(out.to_vec(), by_tree(&t.chunk(0, json!({}), Value::Null)));
    }

    #[test]
    fn a_compacted_template_writes_the_same_chunks() {
        let raw = |text: &str| -> Box<RawValue> { serde_json::from_str(text).unwrap() };
        let (id, model) = (raw("\"c-1\""), raw("\"m\\u0041\""));
        let mut fields = [None; 7];
        fields[0] = Some(&*id);
        fields[3] = Some(&*model);
        let mut t = Template::default();
        t.remember_raw(fields).unwrap();
        let mut before = BytesMut::new();
        t.write_chunk(&mut before, 0, &json!({"content": "x"}), &Value::Null);
        t.compact();
        assert!(t.raw.iter().all(|r| r.is_empty()));
        // The same fields again are read once more and change nothing.
        t.remember_raw(fields).unwrap();
        let mut after = BytesMut::new();
        t.write_chunk(&mut after, 0, &json!({"content": "x"}), &Value::Null);
        assert_eq!(before, after);
        assert_eq!(t.field("model"), Some(&json!("mA")));
        assert!(String::from_utf8(after.to_vec())
            .unwrap()
            .contains(r#""id":"c-1","model":"mA","object":"chat.completion.chunk"}"#));
    }

    #[test]
    fn a_written_call_is_the_bytes_of_its_tree() {
        let mut t = Template::default();
        let fields = json!({"id": "c", "model": "m", "system_fingerprint": null});
        t.remember(fields.as_object().unwrap());
        let call = Call {
            id: "call_\"1\"".into(),
            name: "get_weather".into(),
            arguments: "{\"q\": \"\\u00e9 \u{2028}\"}".into(),
            ..Call::default()
        };
        let extras = json!({"extra_content": {"g": 1}, "id": "not-this", "zz": [1, null]});
        for (legacy, extra) in [
            (false, Map::new()),
            (false, extras.as_object().unwrap().clone()),
            (true, Map::new()),
        ] {
            let site = Site {
                index: 0,
                legacy,
                extra,
            };
            let mut out = BytesMut::new();
            t.write_call(&mut out, 1, 3, &call, &site);
            let text = String::from_utf8(out.to_vec()).unwrap();
            assert_eq!(
                text,
                String::from_utf8(by_tree(&call_tree(&t, 1, 3, &call, &site))).unwrap()
            );
        }
    }
}
