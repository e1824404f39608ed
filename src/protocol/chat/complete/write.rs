//! Parts of a rewritten whole message: its kept tool-call entries, its
//! `reasoning_details` without withheld calls' entries, and the neutral
//! text after its content.

use serde_json::value::RawValue;

use crate::json::{write_obj, write_string, Obj, Sink};

/// `reasoning_details` without the entries that name a withheld call (a
/// thought signature carries its call's id); as it came when none does.
pub(super) fn write_reasoning(out: &mut impl Sink, v: &RawValue, withheld: &[&str]) {
    let names = |e: &serde_json::Value| {
        e.get("id")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|id| withheld.contains(&id))
    };
    match serde_json::from_str::<Vec<serde_json::Value>>(v.get()) {
        Ok(items) if items.iter().any(names) => {
            let kept: Vec<serde_json::Value> = items.into_iter().filter(|e| !names(e)).collect();
            out.text(&serde_json::Value::Array(kept).to_string());
        }
        _ => out.raw(v),
    }
}

/// The kept tool-call entries, a present `index` renumbered.
pub(super) fn write_tools(out: &mut impl Sink, kept: &[&RawValue]) {
    out.text("[");
    for (j, e) in kept.iter().enumerate() {
        if j > 0 {
            out.text(",");
        }
        match Obj::of(e) {
            Some(o) if o.get("index").is_some() => {
                write_obj(out, &o, |k, _| (k == "index").then(|| j.to_string()))
            }
            _ => out.raw(e),
        }
    }
    out.text("]");
}

/// `content` followed by a blank line and the neutral text (content in
/// parts: followed by a text part); the neutral text alone when there was
/// none. A non-empty string is written raw up to
/// its closing quote and the rest appended, so it is never decoded or
/// copied.
pub(super) fn append_neutral(out: &mut impl Sink, content: &RawValue, neutral: &str) {
    let raw = content.get();
    match raw.strip_suffix('"') {
        Some(open) if raw.starts_with('"') && raw.len() > 2 => {
            out.slice(open);
            let mut rest = String::new();
            write_string(&mut rest, &format!("\n\n{neutral}"));
            out.text(&rest[1..]);
        }
        _ if raw.starts_with('[') => match serde_json::from_str::<Vec<serde_json::Value>>(raw) {
            // Content in parts keeps them; the neutral text is one more.
            Ok(mut parts) => {
                parts.push(serde_json::json!({ "type": "text", "text": neutral }));
                out.text(&serde_json::Value::Array(parts).to_string());
            }
            Err(_) => write_string(out, neutral),
        },
        _ => write_string(out, neutral),
    }
}
