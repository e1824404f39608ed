//! Helpers over one `chat.completion.chunk` object.

use serde_json::{json, Map, Value};

/// Sets a choice's `finish_reason` (and `native_finish_reason`, when present).
pub fn set_finish(c: &mut Map<String, Value>, sent: &str) {
    c.insert("finish_reason".into(), json!(sent));
    if c.get("native_finish_reason").is_some_and(|v| !v.is_null()) {
        c.insert("native_finish_reason".into(), json!(sent));
    }
}

/// True when a stripped chunk carries nothing worth sending.
pub fn is_empty_chunk(obj: &Map<String, Value>) -> bool {
    let usage = obj.get("usage").is_some_and(|u| !u.is_null());
    let choices = match obj.get("choices") {
        Some(Value::Array(a)) => a,
        _ => return !usage,
    };
    !usage
        && choices.iter().all(|c| {
            c.get("finish_reason").is_none_or(Value::is_null)
                && ["delta", "message"].iter().all(|k| {
                    c.get(*k).is_none_or(|d| {
                        d.as_object()
                            .is_some_and(|m| m.values().all(Value::is_null))
                    })
                })
        })
}
