//! The chunks toolgate writes into a chat stream: the fields they take from
//! the upstream's chunks (`id`, `model`, …), remembered as they change, and
//! a released call as one whole delta, each written from its tree.

use bytes::BytesMut;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::{write_event, Site};
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
}

impl Template {
    /// Copies the fields of a parsed chunk that changed.
    pub fn remember(&mut self, obj: &Map<String, Value>) {
        for ((key, seen), field) in FIELDS.iter().zip(&mut self.raw).zip(&mut self.fields) {
            // Chunks of one stream mostly repeat these: copied only when changed.
            if let Some(v) = obj.get(*key).filter(|v| field.as_ref() != Some(*v)) {
                *field = Some(v.clone());
                *seen = Box::default();
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

    /// Writes the event of [`Template::chunk`].
    pub fn write_chunk(&mut self, out: &mut BytesMut, choice: u32, delta: &Value, finish: &Value) {
        write_event(out, &self.chunk(choice, delta.clone(), finish.clone()));
    }

    /// Writes the chunk that says a choice's finish, and nothing else.
    pub fn write_finish(&mut self, out: &mut BytesMut, choice: u32, sent: &str) {
        self.write_chunk(out, choice, &json!({}), &Value::String(sent.to_string()));
    }

    /// Writes a released call as one chunk: the whole call in one delta at
    /// index `j` (the extra keys the upstream's entry had kept).
    pub fn write_call(
        &mut self,
        out: &mut BytesMut,
        choice: u32,
        j: usize,
        call: &Call,
        site: &Site,
    ) {
        write_event(out, &self.call_chunk(choice, j, call, site));
    }

    /// The chunk of a released call (see [`Template::write_call`]).
    pub fn call_chunk(&self, choice: u32, j: usize, call: &Call, site: &Site) -> Value {
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
        self.chunk(choice, delta, Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(out: &BytesMut) -> String {
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn written_chunks_carry_the_fields_last_seen() {
        let mut t = Template::default();
        let mut out = BytesMut::new();
        // No fields yet: only the default `object`.
        t.write_chunk(&mut out, 2, &json!({}), &json!("stop"));
        assert_eq!(
            text(&out),
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\",\"index\":2}],\"object\":\"chat.completion.chunk\"}\n\n"
        );
        let first = json!({"id": "c-1", "model": "m\"x", "created": 7, "provider": "p"});
        t.remember(first.as_object().unwrap());
        let mut out = BytesMut::new();
        t.write_chunk(&mut out, 0, &json!({"content": "a"}), &Value::Null);
        let written = text(&out);
        for want in [
            r#""id":"c-1""#,
            r#""model":"m\"x""#,
            r#""created":7"#,
            r#""provider":"p""#,
        ] {
            assert!(written.contains(want), "{want}: {written}");
        }
        // A field that changes is written as it now is, raw or parsed.
        let next = json!({"id": "c-2", "object": "chat.completion.chunk.v2"});
        t.remember(next.as_object().unwrap());
        let raw: Box<RawValue> = serde_json::from_str("\"fp_\\u0041\"").unwrap();
        let mut fields = [None; 7];
        fields[4] = Some(&*raw);
        t.remember_raw(fields).unwrap();
        let mut out = BytesMut::new();
        t.write_chunk(&mut out, 0, &json!({}), &Value::Null);
        let written = text(&out);
        for want in [
            r#""id":"c-2""#,
            r#""object":"chat.completion.chunk.v2""#,
            r#""system_fingerprint":"fp_A""#,
        ] {
            assert!(written.contains(want), "{want}: {written}");
        }
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
        assert!(
            text(&after).contains(r#""id":"c-1","model":"mA","object":"chat.completion.chunk"}"#)
        );
    }

    #[test]
    fn a_written_call_is_one_whole_delta_with_the_upstreams_extra_keys() {
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
                extra: extra.clone(),
            };
            let mut out = BytesMut::new();
            t.write_call(&mut out, 1, 3, &call, &site);
            let written = text(&out);
            let data = written.strip_prefix("data: ").unwrap().trim_end();
            let v: Value = serde_json::from_str(data).unwrap();
            let delta = &v["choices"][0]["delta"];
            assert_eq!(v["choices"][0]["index"], 1);
            assert_eq!(v["model"], "m");
            let function = match legacy {
                true => &delta["function_call"],
                false => {
                    let entry = &delta["tool_calls"][0];
                    assert_eq!(entry["index"], 3);
                    assert_eq!(entry["id"], "call_\"1\"", "the call's id, not the extra's");
                    assert_eq!(entry["type"], "function");
                    if !extra.is_empty() {
                        assert_eq!(entry["extra_content"], json!({"g": 1}));
                        assert_eq!(entry["zz"], json!([1, null]));
                    }
                    &entry["function"]
                }
            };
            assert_eq!(function["name"], "get_weather");
            assert_eq!(
                function["arguments"],
                call.arguments.as_str(),
                "byte-identical arguments"
            );
        }
    }
}
