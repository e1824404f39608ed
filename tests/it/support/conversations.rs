//! A provider that keeps conversations as OpenAI's Conversations API does:
//! items written into one are stored (with ids), listed and read back; a
//! Responses request naming one reads its items first, and adds its input
//! and output to it; a conversation whose last calls went unanswered is
//! refused, as OpenAI refuses it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::*;

/// The conversations the provider holds, by id.
#[derive(Default)]
pub struct Conversations {
    held: Mutex<HashMap<String, Vec<Value>>>,
    next: Mutex<usize>,
}

impl Conversations {
    /// The items of conversation `id`, oldest first.
    pub fn items(&self, id: &str) -> Vec<Value> {
        self.held
            .lock()
            .unwrap()
            .get(id)
            .cloned()
            .unwrap_or_default()
    }

    /// Adds `item` to conversation `id` as it stands, as though another
    /// writer (not through toolgate) had.
    pub fn plant(&self, id: &str, item: Value) {
        let mut held = self.held.lock().unwrap();
        held.entry(id.to_string()).or_default().push(item);
    }

    fn stored(&self, mut item: Value) -> Value {
        let mut n = self.next.lock().unwrap();
        *n += 1;
        if item.get("id").and_then(Value::as_str).is_none() {
            item["id"] = json!(format!("item_{n}"));
        }
        item
    }
}

fn list(items: Vec<Value>) -> Value {
    json!({"object": "list", "first_id": items.first().map(|i| i["id"].clone()),
        "last_id": items.last().map(|i| i["id"].clone()), "has_more": false, "data": items})
}

fn not_found() -> Reply {
    let e = json!({"error": {"message": "Conversation not found.", "type": "invalid_request_error",
        "param": null, "code": "not_found"}});
    Reply::json(404, e.to_string())
}

fn input_items(req: &Value) -> Vec<Value> {
    match &req["input"] {
        Value::String(s) => vec![json!({"type": "message", "role": "user", "content": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    }
}

/// The call ids of `items`' function calls that no output answers.
fn unanswered(items: &[Value]) -> Vec<String> {
    let answered = |id: &Value| {
        items
            .iter()
            .any(|i| i["type"] == "function_call_output" && &i["call_id"] == id)
    };
    items
        .iter()
        .filter(|i| i["type"] == "function_call" && !answered(&i["call_id"]))
        .filter_map(|i| i["call_id"].as_str().map(String::from))
        .collect()
}

/// A provider holding `store`'s conversations; Responses requests are
/// answered by `respond`.
pub fn conversation_provider(store: Arc<Conversations>, respond: Responder) -> Reply {
    Reply::computed(move |seen| {
        let body: Value = serde_json::from_slice(&seen.body).unwrap_or(Value::Null);
        let (path, query) = seen.path.split_once('?').unwrap_or((&seen.path, ""));
        let segs: Vec<&str> = path.trim_matches('/').split('/').skip(1).collect();
        let method = seen.method.as_str();
        let conv =
            |id: &str| json!({"id": id, "object": "conversation", "created_at": 1, "metadata": {}});
        match (method, &segs[..]) {
            ("POST", ["responses"]) => {
                let named = match &body["conversation"] {
                    Value::String(s) => Some(s.clone()),
                    Value::Object(o) => o.get("id").and_then(Value::as_str).map(String::from),
                    _ => None,
                };
                let Some(id) = named else {
                    let (status, b) = respond(&body);
                    return Reply::json(status, b);
                };
                if !store.held.lock().unwrap().contains_key(&id) {
                    return not_found();
                }
                let mut all = store.items(&id);
                let input = input_items(&body);
                all.extend(input.iter().cloned());
                if let Some(call) = unanswered(&all).first() {
                    let e = json!({"error": {"message": format!("No tool output found for function call {call}."),
                        "type": "invalid_request_error", "param": "input", "code": null}});
                    return Reply::json(400, e.to_string());
                }
                let (status, b) = respond(&body);
                if status == 200 {
                    let answer: Value = serde_json::from_str(&b).unwrap_or(Value::Null);
                    let out = answer["output"].as_array().cloned().unwrap_or_default();
                    let added: Vec<Value> = input
                        .into_iter()
                        .chain(out)
                        .map(|i| store.stored(i))
                        .collect();
                    store
                        .held
                        .lock()
                        .unwrap()
                        .entry(id)
                        .or_default()
                        .extend(added);
                }
                Reply::json(status, b)
            }
            ("POST", ["conversations"]) => {
                let id = {
                    let mut n = store.next.lock().unwrap();
                    *n += 1;
                    format!("conv_{n}")
                };
                let items: Vec<Value> = body["items"].as_array().cloned().unwrap_or_default();
                let items = items.into_iter().map(|i| store.stored(i)).collect();
                store.held.lock().unwrap().insert(id.clone(), items);
                Reply::json(200, conv(&id).to_string())
            }
            (_, ["conversations", id, rest @ ..]) => {
                let id = id.to_string();
                if !store.held.lock().unwrap().contains_key(&id) {
                    return not_found();
                }
                match (method, rest) {
                    ("GET", []) => Reply::json(200, conv(&id).to_string()),
                    ("DELETE", []) => {
                        store.held.lock().unwrap().remove(&id);
                        let v =
                            json!({"id": id, "object": "conversation.deleted", "deleted": true});
                        Reply::json(200, v.to_string())
                    }
                    ("POST", ["items"]) => {
                        let items: Vec<Value> =
                            body["items"].as_array().cloned().unwrap_or_default();
                        let added: Vec<Value> =
                            items.into_iter().map(|i| store.stored(i)).collect();
                        store
                            .held
                            .lock()
                            .unwrap()
                            .entry(id)
                            .or_default()
                            .extend(added.clone());
                        Reply::json(200, list(added).to_string())
                    }
                    ("GET", ["items"]) => {
                        let mut items = store.items(&id);
                        if !query.contains("order=asc") {
                            items.reverse();
                        }
                        Reply::json(200, list(items).to_string())
                    }
                    ("GET", ["items", item]) => {
                        match store.items(&id).into_iter().find(|i| i["id"] == *item) {
                            Some(i) => Reply::json(200, i.to_string()),
                            None => not_found(),
                        }
                    }
                    _ => not_found(),
                }
            }
            _ => not_found(),
        }
    })
}
