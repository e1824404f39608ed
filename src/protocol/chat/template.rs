//! The chunks toolgate writes into a chat stream: the fields they take from
//! the upstream's chunks (`id`, `model`, …), remembered as they change, and
//! a released call as one whole delta.

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

#[derive(Debug, Default)]
pub struct Template {
    fields: Map<String, Value>,
    /// The raw text each field last had in a chunk read by
    /// [`super::delta`], while `fields` holds that value (empty when unknown).
    raw: [String; 7],
}

impl Template {
    /// Copies the fields of a parsed chunk that changed.
    pub fn remember(&mut self, obj: &Map<String, Value>) {
        for (key, seen) in FIELDS.iter().zip(&mut self.raw) {
            // Chunks of one stream mostly repeat these: copied only when changed.
            if let Some(v) = obj.get(*key).filter(|v| self.fields.get(*key) != Some(*v)) {
                self.fields.insert(key.to_string(), v.clone());
                seen.clear();
            }
        }
    }

    /// The same for a chunk read by [`super::delta`] (its fields raw, in
    /// [`FIELDS`] order): a field is parsed only when its text changed.
    pub fn remember_raw(&mut self, raw: [Option<&RawValue>; 7]) -> Result<(), Error> {
        for ((key, raw), seen) in FIELDS.iter().zip(raw).zip(&mut self.raw) {
            let Some(raw) = raw.filter(|r| r.get() != seen) else {
                continue;
            };
            let v: Value = serde_json::from_str(raw.get())
                .map_err(|_| Error::UpstreamUnreadable("event data is not a JSON object"))?;
            self.fields.insert(key.to_string(), v);
            raw.get().clone_into(seen);
        }
        Ok(())
    }

    /// A field's value as last seen.
    pub fn field(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// A chunk of these fields with one choice.
    pub fn chunk(&self, choice: u32, delta: Value, finish: Value) -> Value {
        let mut obj = self.fields.clone();
        obj.entry("object")
            .or_insert_with(|| json!("chat.completion.chunk"));
        obj.insert(
            "choices".into(),
            json!([{ "index": choice, "delta": delta, "finish_reason": finish }]),
        );
        Value::Object(obj)
    }

    /// A released call as one chunk: the whole call in one delta at index `j`.
    pub fn call(&self, choice: u32, j: usize, call: &Call, site: &Site) -> Value {
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
