//! What a `generateContent` request says: its texts by role for
//! provenance, and its tool results (`functionResponse` parts) to fence.
//! Calls and results without an id are paired by name and order, as
//! Gemini pairs them.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::keys::{self as k};
use crate::context::Texts;
use crate::fence::{first_url, ToolResult};

/// Whether a `functionResponse` carries parts (Gemini's multimodal
/// function responses: `inlineData`, `fileData`) toolgate does not read as
/// text.
pub fn media_results(body: &Value) -> bool {
    turns(body).any(|(_, parts)| {
        (parts.iter().filter_map(Value::as_object)).any(|p| {
            let r = k::get(p, k::FUNCTION_RESPONSE).ok().flatten();
            let inner = r
                .and_then(Value::as_object)
                .and_then(|r| k::get(r, k::PARTS).ok().flatten());
            inner.is_some_and(crate::context::holds_media)
        })
    })
}

/// The parts of each turn: its role and parts.
fn turns(body: &Value) -> impl Iterator<Item = (&str, &[Value])> {
    let contents = (body.as_object())
        .and_then(|t| k::get(t, k::CONTENTS).ok().flatten())
        .and_then(Value::as_array);
    contents.into_iter().flatten().filter_map(|c| {
        let c = c.as_object()?;
        let role = k::get(c, k::ROLE)
            .ok()
            .flatten()
            .and_then(Value::as_str)
            .unwrap_or("user");
        let parts = k::get(c, k::PARTS)
            .ok()
            .flatten()
            .and_then(Value::as_array)?;
        Some((role, parts.as_slice()))
    })
}

/// The text of some parts (thoughts left out), joined by line ends.
fn parts_text(parts: &[Value]) -> String {
    let texts = parts.iter().filter_map(Value::as_object).filter(|p| {
        !k::get(p, k::THOUGHT)
            .ok()
            .flatten()
            .is_some_and(|t| t == &Value::Bool(true))
    });
    let texts: Vec<&str> = texts
        .filter_map(|p| k::get(p, k::TEXT).ok().flatten().and_then(Value::as_str))
        .collect();
    texts.join("\n")
}

/// The id a call or its result is known by: its own, else its name and
/// how many of that name came before (Gemini pairs them by order).
struct Ids(HashMap<String, usize>);

impl Ids {
    fn next(&mut self, m: &Map<String, Value>) -> (String, String) {
        let name = k::get(m, k::NAME)
            .ok()
            .flatten()
            .and_then(Value::as_str)
            .unwrap_or("");
        let n = self.0.entry(name.to_string()).or_insert(0);
        *n += 1;
        let id = match k::get(m, k::ID).ok().flatten().and_then(Value::as_str) {
            Some(id) => id.to_string(),
            None => format!("{name}#{n}"),
        };
        (id, name.to_string())
    }
}

/// The texts of the request: the system instruction, user turns, tool
/// results (all only when `all`) and the model's calls (when `calls`).
pub fn texts(body: &Value, all: bool, calls: bool) -> Texts {
    let mut t = Texts::default();
    if let Some(s) = (body.as_object())
        .and_then(|top| k::get(top, k::SYSTEM).ok().flatten())
        .and_then(Value::as_object)
        .and_then(|s| k::get(s, k::PARTS).ok().flatten())
        .and_then(Value::as_array)
    {
        t.system = parts_text(s);
    }
    let (mut call_ids, mut result_ids) = (Ids(HashMap::new()), Ids(HashMap::new()));
    for (role, parts) in turns(body) {
        for p in parts.iter().filter_map(Value::as_object) {
            if let Some(c) = k::get(p, k::FUNCTION_CALL)
                .ok()
                .flatten()
                .and_then(Value::as_object)
            {
                let (id, name) = call_ids.next(c);
                if calls {
                    let args = k::get(c, k::ARGS).ok().flatten().map(Value::to_string);
                    t.push_call(&id, &name, args.as_deref().unwrap_or("{}"));
                }
            }
            if let Some(r) = k::get(p, k::FUNCTION_RESPONSE)
                .ok()
                .flatten()
                .and_then(Value::as_object)
            {
                let (id, _) = result_ids.next(r);
                if all {
                    let text = k::get(r, k::RESPONSE).ok().flatten().map(result_text);
                    t.push_tool(&id, text.as_deref().unwrap_or(""));
                }
            }
        }
        if role == "user" {
            let text = parts_text(parts);
            if text.is_empty() {
                continue;
            }
            if t.first_user.is_none() {
                t.first_user = Some(text.clone());
            }
            if all {
                t.push_user(&text);
            }
            t.last_user = Some(text);
        }
    }
    t
}

/// A function's response as the model reads it: one field's string as
/// it is, anything else as its JSON text.
fn result_text(v: &Value) -> String {
    match v {
        Value::Object(m) if m.len() == 1 => match m.values().next() {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        },
        other => other.to_string(),
    }
}

/// The request's tool results, each with the tool and URL of the call it
/// answers. A response of one field is fenced in that field; one of
/// several becomes `{"output": <the response>}` so it is fenced whole.
pub fn tool_results(body: &mut Value) -> Vec<ToolResult<'_>> {
    let mut sources = HashMap::new();
    let mut ids = Ids(HashMap::new());
    for (_, parts) in turns(body) {
        for p in parts.iter().filter_map(Value::as_object) {
            if let Some(c) = k::get(p, k::FUNCTION_CALL)
                .ok()
                .flatten()
                .and_then(Value::as_object)
            {
                let (id, name) = ids.next(c);
                let args = k::get(c, k::ARGS).ok().flatten().map(Value::to_string);
                sources.insert(id, (name, args.as_deref().and_then(first_url)));
            }
        }
    }
    let mut ids = Ids(HashMap::new());
    let mut out = Vec::new();
    let Some(top) = body.as_object_mut() else {
        return out;
    };
    let Some(Value::Array(contents)) = k::get_mut(top, k::CONTENTS) else {
        return out;
    };
    for c in contents.iter_mut().filter_map(Value::as_object_mut) {
        let Some(Value::Array(parts)) = k::get_mut(c, k::PARTS) else {
            continue;
        };
        for p in parts.iter_mut().filter_map(Value::as_object_mut) {
            let Some(Value::Object(r)) = k::get_mut(p, k::FUNCTION_RESPONSE) else {
                continue;
            };
            let (call_id, name) = ids.next(r);
            let (tool, url) = match sources.get(&call_id) {
                Some((t, u)) => (t.clone(), u.clone()),
                None => (
                    if name.is_empty() {
                        "unknown".into()
                    } else {
                        name
                    },
                    None,
                ),
            };
            let key = k::spelled(r, k::RESPONSE);
            let response = r.entry(key).or_insert_with(|| json!({}));
            if !matches!(response, Value::Object(m) if m.len() == 1) {
                let whole = std::mem::take(response);
                *response = json!({ "output": whole });
            }
            let Value::Object(m) = response else { continue };
            let Some(content) = m.values_mut().next() else {
                continue;
            };
            out.push(ToolResult {
                call_id,
                tool,
                url,
                content,
            });
        }
    }
    out
}
