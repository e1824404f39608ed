//! The items of OpenAI's Conversations API, both ways, with no I/O: the
//! `items` an agent writes are Responses input items (read as a request's
//! `input` is: texts, tool results, calls); what the provider returns of a
//! conversation (a list's `data`, or one item) is read for the call items
//! in it, which the proxy keeps or replaces, and the tool outputs whose
//! fences it takes off; and which conversation a request goes on.

use serde_json::{json, Value};

use super::responses::{self, ItemClass};
use super::{map_guard, Protocol, ToolResult};
use crate::call::Call;
use crate::context::Texts;
use crate::error::Error;

/// The wire format whose upstream serves the Conversations API, and whose
/// error shape its routes answer in.
pub const SERVED_BY: Protocol = Protocol::Responses;

/// Whether a wire format has conversations of this API (and so calls an
/// agent may read back from one).
pub fn kept_by(protocol: Protocol) -> bool {
    protocol == SERVED_BY
}

impl Protocol {
    /// The conversation of the Conversations API a request goes on
    /// (Responses' `conversation`, an id or `{"id": …}`); a value that
    /// names none in one way is refused.
    pub fn conversation(self, body: &Value) -> Result<Option<String>, Error> {
        if self != Protocol::Responses {
            return Ok(None);
        }
        let bad = || Error::BadRequest("'conversation' is not a conversation id.".into());
        match body.get("conversation") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(id)) if !id.is_empty() => Ok(Some(id.clone())),
            Some(Value::Object(o)) => match o.get("id") {
                Some(Value::String(id)) if !id.is_empty() && o.len() == 1 => Ok(Some(id.clone())),
                _ => Err(bad()),
            },
            Some(_) => Err(bad()),
        }
    }

    /// Answers `calls` (`(call id, item type)`, withheld earlier) with
    /// `text` in a request that goes on from where they were withheld.
    pub fn answer_withheld(self, body: &mut Value, calls: &[(String, String)], text: &str) {
        self.codec().answer_withheld(body, calls, text)
    }
}

/// The items of a request body, read as a Responses request's input.
pub struct Written {
    input: Value,
}

impl Written {
    /// Takes the `items` out of `body`; `None` when it has none.
    pub fn take(body: &mut Value) -> Result<Option<Written>, Error> {
        let items = match body.get_mut("items") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(a)) => std::mem::take(a),
            Some(_) => return Err(Error::BadRequest("'items' must be an array.".into())),
        };
        if items.iter().any(|i| !i.is_object()) {
            return Err(Error::BadRequest("Each item must be an object.".into()));
        }
        Ok(Some(Written {
            input: json!({ "input": items }),
        }))
    }

    pub fn len(&self) -> usize {
        self.input["input"].as_array().map_or(0, Vec::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the items say, as a request's texts.
    pub fn texts(&self) -> Texts {
        Protocol::Responses.texts_and_calls(&self.input, true, true)
    }

    /// The calls the agent writes (arguments over `max` bytes marked).
    pub fn calls(&self, max: usize) -> Result<Vec<Call>, Error> {
        let items = self.input["input"].as_array().into_iter().flatten();
        items
            .filter(|i| responses::class_of(i) == ItemClass::Call)
            .map(|i| responses::call_of(i, max))
            .collect()
    }

    /// The tool results among the items, to be fenced in place.
    pub fn tool_results(&mut self) -> Vec<ToolResult<'_>> {
        Protocol::Responses.tool_results(&mut self.input)
    }

    /// Puts the items back into `body`.
    pub fn put(mut self, body: &mut Value) {
        if let Some(obj) = body.as_object_mut() {
            obj.insert("items".into(), self.input["input"].take());
        }
    }
}

/// A call item read back from a conversation.
pub struct Found {
    /// Where it is among the items.
    pub at: usize,
    /// Its item id (its call id when it has none).
    pub item_id: String,
    pub call: Call,
}

/// The provider's answer about a conversation, as a tree.
pub struct ReadBack {
    top: Value,
    /// Whether it is one item (else a list's `data`, or neither).
    single: bool,
}

fn unreadable() -> Error {
    Error::UpstreamUnreadable("a conversation's answer is not unambiguous JSON")
}

impl ReadBack {
    pub fn parse(raw: &[u8]) -> Result<ReadBack, Error> {
        let top = crate::json::strict_value(raw).map_err(|_| unreadable())?;
        let Value::Object(obj) = &top else {
            return Err(unreadable());
        };
        map_guard(obj, &["data", "type", "object"])?;
        // A list that is an item too would be read one way by a client
        // listing items and another by one reading an item: fail closed.
        if obj.contains_key("data") && obj.contains_key("type") {
            return Err(unreadable());
        }
        let single = obj.contains_key("type");
        if obj.get("data").is_some_and(|d| !d.is_array()) {
            return Err(unreadable());
        }
        let rb = ReadBack { top, single };
        for item in rb.items() {
            let Value::Object(m) = item else {
                return Err(Error::UpstreamUnreadable(
                    "a conversation item is not an object",
                ));
            };
            map_guard(m, &responses::ITEM_KEYS)?;
            map_guard(m, &["output", "content"])?;
        }
        Ok(rb)
    }

    fn items(&self) -> &[Value] {
        match (self.single, &self.top["data"]) {
            (true, _) => std::slice::from_ref(&self.top),
            (false, Value::Array(a)) => a,
            _ => &[],
        }
    }

    fn item_mut(&mut self, at: usize) -> Option<&mut Value> {
        match self.single {
            true => (at == 0).then_some(&mut self.top),
            false => self.top.get_mut("data")?.get_mut(at),
        }
    }

    /// The call items in it, in order.
    pub fn calls(&self, max: usize) -> Result<Vec<Found>, Error> {
        let mut out = Vec::new();
        for (at, item) in self.items().iter().enumerate() {
            if responses::class_of(item) != ItemClass::Call {
                continue;
            }
            let call = responses::call_of(item, max)?;
            let item_id = item
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or(&call.id)
                .to_string();
            out.push(Found { at, item_id, call });
        }
        Ok(out)
    }

    /// Replaces the call item `found` by an assistant message saying
    /// `text`, with the id the same call gets where a response withholds
    /// it (made with `key`).
    pub fn withhold(&mut self, found: &Found, key: &[u8; 32], text: &str) {
        let id = responses::Ids::new(key).message_id(&found.item_id);
        if let Some(item) = self.item_mut(found.at) {
            *item = responses::neutral_item(&id, text, false);
        }
    }

    /// Passes each tool output's text (a string, or a part's `text`) with
    /// its call id to `unwrap`, and puts what it returns in its place;
    /// whether anything changed.
    pub fn unwrap_outputs(&mut self, unwrap: impl Fn(&str, &str) -> Option<String>) -> bool {
        let n = self.items().len();
        let mut changed = false;
        for at in 0..n {
            let Some(item) = self.item_mut(at) else {
                continue;
            };
            let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
            if responses::class_of(item) != ItemClass::Other || !ty.ends_with("_output") {
                continue;
            }
            let call_id = ["call_id", "id"]
                .iter()
                .find_map(|k| item.get(*k).and_then(Value::as_str))
                .unwrap_or("")
                .to_string();
            let mut put = |v: &mut Value| {
                if let Some(plain) = v.as_str().and_then(|s| unwrap(&call_id, s)) {
                    *v = Value::String(plain);
                    changed = true;
                }
            };
            match item.get_mut("output") {
                Some(Value::Array(parts)) => {
                    for p in parts.iter_mut() {
                        if let Some(t) = p.get_mut("text") {
                            put(t);
                        }
                    }
                }
                Some(v) => put(v),
                None => {}
            }
        }
        changed
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.top.to_string().into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_items_read_as_input_and_go_back_in_place() {
        let mut body = json!({"items": [
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "done"}], "metadata": {}});
        let mut w = Written::take(&mut body).unwrap().unwrap();
        assert_eq!(w.len(), 3);
        assert_eq!(w.calls(1000).unwrap()[0].name, "f");
        assert_eq!(w.tool_results().len(), 1);
        assert!(w.texts().user.contains("hi"));
        w.put(&mut body);
        assert_eq!(body["items"][2]["output"], "done");
        assert!(Written::take(&mut json!({"items": {}})).is_err());
        assert!(Written::take(&mut json!({"items": [1]})).is_err());
        assert!(Written::take(&mut json!({})).unwrap().is_none());
    }

    #[test]
    fn a_list_or_one_item_is_read_for_its_calls_and_outputs() {
        let list = json!({"object": "list", "data": [
            {"type": "message", "id": "m", "role": "user", "content": "x"},
            {"type": "function_call", "id": "fc", "call_id": "c", "name": "g", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "FENCED"}]});
        let mut rb = ReadBack::parse(list.to_string().as_bytes()).unwrap();
        let calls = rb.calls(100).unwrap();
        assert_eq!((calls[0].at, calls[0].item_id.as_str()), (1, "fc"));
        assert!(rb.unwrap_outputs(|id, t| (id == "c" && t == "FENCED").then(|| "plain".into())));
        rb.withhold(&calls[0], &[7; 32], "no");
        let v: Value = serde_json::from_slice(&rb.into_bytes()).unwrap();
        assert_eq!(v["data"][1]["type"], "message");
        assert_eq!(v["data"][2]["output"], "plain");
        let one = json!({"type": "function_call", "call_id": "c", "name": "g", "arguments": "{}"});
        let rb = ReadBack::parse(one.to_string().as_bytes()).unwrap();
        assert_eq!(rb.calls(100).unwrap().len(), 1);
        let conv = json!({"id": "conv_1", "object": "conversation"});
        let rb = ReadBack::parse(conv.to_string().as_bytes()).unwrap();
        assert!(rb.calls(100).unwrap().is_empty());
        // Read one way only.
        for bad in [
            r#"{"data": [], "Data": []}"#,
            r#"{"data": {}}"#,
            r#"{"data": [{"type": "message", "Type": "function_call"}]}"#,
            r#"{"data": [1]}"#,
            r#"{"data": [], "type": "function_call", "call_id": "c", "name": "g", "arguments": "{}"}"#,
            "[]",
        ] {
            assert!(ReadBack::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        // A new item type is a call, as in a response's output.
        let new = json!({"data": [{"type": "future_call", "call_id": "z"}]});
        let rb = ReadBack::parse(new.to_string().as_bytes()).unwrap();
        assert_eq!(rb.calls(100).unwrap().len(), 1);
    }
}
