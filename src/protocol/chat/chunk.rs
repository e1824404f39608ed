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
    is_empty_after(obj, |_| None)
}

/// [`is_empty_chunk`], a choice's `role` equal to `sent(index)` (the role
/// the agent was already sent for that choice) counting as nothing:
/// providers that repeat the role in every chunk (OpenRouter) would
/// otherwise send one such chunk per call fragment held.
pub fn is_empty_after<'a>(obj: &Map<String, Value>, sent: impl Fn(u32) -> Option<&'a str>) -> bool {
    let usage = obj.get("usage").is_some_and(|u| !u.is_null());
    let choices = match obj.get("choices") {
        Some(Value::Array(a)) => a,
        _ => return !usage,
    };
    !usage
        && choices.iter().enumerate().all(|(pos, c)| {
            let role = choice_index(c.get("index"), pos).and_then(&sent);
            c.get("finish_reason").is_none_or(Value::is_null)
                && ["delta", "message"].iter().all(|k| {
                    c.get(*k).is_none_or(|d| {
                        d.as_object().is_some_and(|m| {
                            m.iter().all(|(k, v)| {
                                v.is_null() || (k == "role" && role.is_some() && v.as_str() == role)
                            })
                        })
                    })
                })
        })
}

/// A choice's number from its `index`, or its position `pos` when it has
/// none (null or absent); `None` when the index is not a small integer.
pub fn choice_index(index: Option<&Value>, pos: usize) -> Option<u32> {
    match index {
        None | Some(Value::Null) => u32::try_from(pos).ok(),
        Some(v) => v.as_u64().and_then(|n| u32::try_from(n).ok()),
    }
}

/// The roles a chunk sends: `(index, role)` for each choice whose delta
/// names one.
pub fn roles(obj: &Map<String, Value>) -> impl Iterator<Item = (u32, &str)> {
    let choices = match obj.get("choices") {
        Some(Value::Array(a)) => &a[..],
        _ => &[],
    };
    choices.iter().enumerate().filter_map(|(pos, c)| {
        let role = c.get("delta")?.get("role")?.as_str()?;
        Some((choice_index(c.get("index"), pos)?, role))
    })
}
