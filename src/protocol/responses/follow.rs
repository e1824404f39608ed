//! `resume` for the Responses API: the follow-up request and, for a whole
//! body, the continuation joined to what came before.
//!
//! A stored response (`store` not false) is continued the API's own way:
//! `previous_response_id` names it and `input` holds only a neutral
//! `function_call_output` per withheld call. Otherwise the conversation is
//! replayed: the request's `input`, the items the model wrote, its calls
//! and their outputs.

use serde_json::{json, Value};

use super::{class_of, ItemClass};
use crate::call::Release;
use crate::error::Error;
use crate::protocol::{join_whole, Resumption};

/// The items that answer `calls` (`function_call` items, all withheld):
/// the reasoning that led to them, the calls, then a neutral output for each.
pub fn turn(reasoning: Vec<Value>, calls: Vec<Value>, result: &str) -> Vec<Value> {
    let outputs: Vec<Value> = calls
        .iter()
        .map(|c| json!({"type": "function_call_output", "call_id": c["call_id"], "output": result}))
        .collect();
    reasoning.into_iter().chain(calls).chain(outputs).collect()
}

/// A withheld `function_call` item as it goes back upstream.
pub fn call_item(item: &Value) -> Option<Value> {
    let f = |k: &str| item.get(k).cloned();
    let mut v = json!({"type": "function_call", "call_id": f("call_id")?, "name": f("name")?,
        "arguments": f("arguments").unwrap_or_else(|| json!(""))});
    if let Some(ns) = f("namespace").filter(Value::is_string) {
        v["namespace"] = ns;
    }
    Some(v)
}

/// The follow-up request, from `body` (what went upstream last).
pub fn follow_up(body: &mut Value, r: &Resumption) -> Result<(), Error> {
    let Value::Object(obj) = body else {
        return Err(Error::UpstreamUnreadable("the request is not an object"));
    };
    let stored = obj.get("store") != Some(&Value::Bool(false));
    let input = match (stored, r.previous.as_deref()) {
        (true, Some(id)) => {
            obj.insert("previous_response_id".into(), json!(id));
            r.turn
                .iter()
                .filter(|i| i["type"] == "function_call_output")
                .cloned()
                .collect()
        }
        _ => {
            let mut items = match obj.remove("input") {
                Some(Value::String(s)) => vec![json!({"role": "user", "content": s})],
                Some(Value::Array(a)) => a,
                _ => Vec::new(),
            };
            items.extend(r.blocks.iter().cloned());
            items.extend(r.turn.iter().cloned());
            items
        }
    };
    obj.insert("input".into(), Value::Array(input));
    super::hide::remove_tools(body, &r.denied);
    Ok(())
}

/// The resumption of a whole response whose calls (`verdicts` in `output`
/// order) are all withheld for resume; `None` when it is not continued.
pub fn whole(text: &str, verdicts: &[Release], result: &str) -> Option<Resumption> {
    // Most bodies are not continued: known before the body is read again.
    if verdicts.is_empty() || !verdicts.iter().all(|v| v.resumable()) {
        return None;
    }
    let body: Value = serde_json::from_str(text).ok()?;
    let (mut blocks, mut calls, mut denied) = (Vec::new(), Vec::new(), Vec::new());
    let mut reasoning = Vec::new();
    for item in body.get("output")?.as_array()? {
        let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
        match class_of(item) {
            ItemClass::Call => {
                let Release::Resume { deny } = Release::at(verdicts, calls.len()) else {
                    return None;
                };
                if ty != "function_call" {
                    return None;
                }
                if deny {
                    denied.push(super::call_of(item, usize::MAX).ok()?.name);
                }
                calls.push(call_item(item)?);
            }
            // The agent is not shown reasoning that led only to withheld calls.
            ItemClass::Reasoning => reasoning.push(item.clone()),
            ItemClass::Other => blocks.push(item.clone()),
        }
    }
    if calls.is_empty() {
        return None;
    }
    Some(Resumption {
        turn: turn(reasoning, calls, result),
        denied,
        blocks,
        usage: body.get("usage").cloned(),
        previous: body.get("id").and_then(Value::as_str).map(str::to_string),
        ..Resumption::default()
    })
}

/// The agent's whole body: the continuation `last` under the first
/// response's `id`, after the items of the responses that were continued,
/// usage summed.
pub fn join(first: &Value, before: &[Resumption], last: &mut Value) {
    join_whole(first, before, last, &["id"], Some("output"));
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"{"id":"resp_1","object":"response","status":"completed","output":[
        {"type":"message","id":"msg_a","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Let me run it.","annotations":[]}]},
        {"type":"function_call","id":"fc_1","call_id":"call_1","name":"shell","arguments":"{\"cmd\":\"ls\"}","status":"completed"}],
        "usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}"#;

    #[test]
    fn a_stored_response_is_continued_by_its_id_and_others_replayed() {
        let r = whole(BODY, &[Release::Resume { deny: false }], "NO").unwrap();
        assert_eq!(r.previous.as_deref(), Some("resp_1"));
        assert_eq!(r.blocks.len(), 1);
        let mut stored = json!({"model": "m", "input": "hi", "tools": []});
        follow_up(&mut stored, &r).unwrap();
        assert_eq!(stored["previous_response_id"], "resp_1");
        assert_eq!(
            stored["input"],
            json!([{"type": "function_call_output", "call_id": "call_1", "output": "NO"}])
        );
        let mut replayed = json!({"model": "m", "input": "hi", "store": false});
        follow_up(&mut replayed, &r).unwrap();
        let items = replayed["input"].as_array().unwrap();
        assert_eq!(items.len(), 4, "{replayed}");
        assert_eq!(items[0], json!({"role": "user", "content": "hi"}));
        assert_eq!(items[2]["type"], "function_call");
        assert_eq!(items[2]["arguments"], "{\"cmd\":\"ls\"}");
        assert!(replayed.get("previous_response_id").is_none());
        assert!(whole(BODY, &[Release::Withhold], "NO").is_none());

        let mut last = json!({"id": "resp_2", "output": [{"type": "message", "id": "msg_b"}],
            "usage": {"input_tokens": 20, "output_tokens": 2, "total_tokens": 22}});
        join(&serde_json::from_str(BODY).unwrap(), &[r], &mut last);
        assert_eq!(last["id"], "resp_1");
        assert_eq!(last["output"].as_array().unwrap().len(), 2);
        assert_eq!(last["usage"]["total_tokens"], 37);
    }
}
