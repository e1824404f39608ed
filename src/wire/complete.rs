//! Non-streaming chat completions: extract every call, then drop the rejected ones.
//!
//! Calls come from `choices[].message.tool_calls` and legacy
//! `choices[].message.function_call`. Allowed entries stay exactly as the
//! upstream sent them (only a present `index` is renumbered); a choice left
//! with no call gets the neutral message and `finish_reason: "stop"`.

use serde_json::{json, Map, Value};

use super::assemble::LEGACY_KEY;
use super::ToolCall;
use crate::error::Error;

fn malformed(why: &'static str) -> Error {
    Error::UpstreamUnreadable(why)
}

/// The calls of a parsed response body, in order. An `error` object is an error.
pub fn extract(body: &Value, max_call_bytes: usize) -> Result<Vec<ToolCall>, Error> {
    let Value::Object(obj) = body else {
        return Err(malformed("response is not a JSON object"));
    };
    if obj.get("error").is_some_and(|e| !e.is_null()) {
        return Err(Error::UpstreamEvent(bytes::Bytes::from(body.to_string())));
    }
    let mut calls = Vec::new();
    let choices = match obj.get("choices") {
        None | Some(Value::Null) => return Ok(calls),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(malformed("choices is not an array")),
    };
    for (pos, ch) in choices.iter().enumerate() {
        let choice = choice_index(ch, pos)?;
        let Some(msg) = ch.get("message").filter(|m| !m.is_null()) else {
            continue;
        };
        let Value::Object(msg) = msg else {
            return Err(malformed("message is not an object"));
        };
        match msg.get("tool_calls") {
            None | Some(Value::Null) => {}
            Some(Value::Array(entries)) => {
                for (i, e) in entries.iter().enumerate() {
                    calls.push(call(choice, i as u64, e, false, max_call_bytes)?);
                }
            }
            Some(_) => return Err(malformed("tool_calls is not an array")),
        }
        match msg.get("function_call") {
            None | Some(Value::Null) => {}
            Some(f @ Value::Object(_)) => {
                let e = json!({ "function": f });
                calls.push(call(choice, LEGACY_KEY, &e, true, max_call_bytes)?);
            }
            Some(_) => return Err(malformed("function_call is not an object")),
        }
    }
    Ok(calls)
}

fn choice_index(ch: &Value, pos: usize) -> Result<u32, Error> {
    match ch.get("index") {
        None | Some(Value::Null) => u32::try_from(pos).ok(),
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Some(_) => None,
    }
    .ok_or_else(|| malformed("choice index is not a small integer"))
}

fn call(choice: u32, index: u64, e: &Value, legacy: bool, max: usize) -> Result<ToolCall, Error> {
    let Value::Object(e) = e else {
        return Err(malformed("tool call entry is not an object"));
    };
    let s = |v: Option<&Value>| -> Result<String, Error> {
        match v {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(malformed("tool call field is not a string")),
        }
    };
    let f = match e.get("function") {
        None | Some(Value::Null) => None,
        Some(Value::Object(f)) => Some(f),
        Some(_) => return Err(malformed("tool call function is not an object")),
    };
    let arguments = match f.and_then(|f| f.get("arguments")) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v @ (Value::Object(_) | Value::Array(_))) => v.to_string(),
        Some(_) => return Err(malformed("tool call arguments are not a string")),
    };
    let oversized = arguments.len() > max;
    Ok(ToolCall {
        choice,
        index,
        id: s(e.get("id"))?,
        kind: e.get("type").and_then(Value::as_str).map(String::from),
        name: s(f.and_then(|f| f.get("name")))?,
        arguments: if oversized { String::new() } else { arguments },
        legacy,
        oversized,
        extra: Map::new(),
    })
}

/// Removes the calls whose `allowed` entry is false (missing = false), in the
/// order [`extract`] returned them.
pub fn apply(body: &mut Value, calls: &[ToolCall], allowed: &[bool], neutral: &str) {
    let Some(Value::Array(choices)) = body.get_mut("choices") else {
        return;
    };
    for (pos, ch) in choices.iter_mut().enumerate() {
        let Ok(choice) = choice_index(ch, pos) else {
            continue;
        };
        let verdict = |index: u64| {
            calls
                .iter()
                .position(|c| c.choice == choice && c.index == index)
                .and_then(|i| allowed.get(i).copied())
                .unwrap_or(false)
        };
        let Some(Value::Object(msg)) = ch.get_mut("message") else {
            continue;
        };
        let mut had = false;
        let mut left = 0;
        if let Some(Value::Array(entries)) = msg.get_mut("tool_calls") {
            had |= !entries.is_empty();
            let mut i = 0u64;
            entries.retain(|_| {
                let keep = verdict(i);
                i += 1;
                keep
            });
            for (j, e) in entries.iter_mut().enumerate() {
                if let Some(idx) = e.get_mut("index") {
                    *idx = json!(j);
                }
            }
            left += entries.len();
            if entries.is_empty() {
                msg.remove("tool_calls");
            }
        }
        if msg.get("function_call").is_some_and(|f| !f.is_null()) {
            had = true;
            if verdict(LEGACY_KEY) {
                left += 1;
            } else {
                msg.remove("function_call");
            }
        }
        if had && left == 0 {
            let text = match msg.get("content").and_then(Value::as_str) {
                Some(t) if !t.is_empty() => format!("{t}\n\n{neutral}"),
                _ => neutral.to_string(),
            };
            msg.insert("content".into(), json!(text));
            if let Value::Object(c) = ch {
                c.insert("finish_reason".into(), json!("stop"));
                if c.get("native_finish_reason").is_some_and(|v| !v.is_null()) {
                    c.insert("native_finish_reason".into(), json!("stop"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> Value {
        json!({"id":"x","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
        "tool_calls":[
            {"id":"a","type":"function","function":{"name":"one","arguments":"{}"}},
            {"id":"b","type":"function","function":{"name":"two","arguments":"{\"k\":1}"},"extra_content":{"g":1}}
        ]}}]})
    }

    #[test]
    fn extracts_calls_in_order() {
        let c = extract(&body(), 1024).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(
            (
                c[1].id.as_str(),
                c[1].name.as_str(),
                c[1].arguments.as_str()
            ),
            ("b", "two", "{\"k\":1}")
        );
    }

    #[test]
    fn a_rejected_call_is_removed_and_others_kept_verbatim() {
        let mut b = body();
        let c = extract(&b, 1024).unwrap();
        apply(&mut b, &c, &[false, true], "N");
        let tc = b["choices"][0]["message"]["tool_calls"].as_array().unwrap();
        assert_eq!(tc.len(), 1);
        assert_eq!(tc[0]["extra_content"], json!({"g":1}));
        assert_eq!(b["choices"][0]["finish_reason"], "tool_calls");
    }

    #[test]
    fn nothing_left_gives_the_neutral_message() {
        let mut b = body();
        let c = extract(&b, 1024).unwrap();
        apply(&mut b, &c, &[false, false], "N");
        let m = &b["choices"][0]["message"];
        assert!(m.get("tool_calls").is_none());
        assert_eq!(m["content"], "N");
        assert_eq!(b["choices"][0]["finish_reason"], "stop");
    }

    #[test]
    fn legacy_function_call_is_extracted_and_removed() {
        let mut b = json!({"choices":[{"index":0,"finish_reason":"function_call","message":{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}}}]});
        let c = extract(&b, 1024).unwrap();
        assert!(c[0].legacy);
        apply(&mut b, &c, &[false], "N");
        assert!(b["choices"][0]["message"].get("function_call").is_none());
        assert_eq!(b["choices"][0]["finish_reason"], "stop");
    }

    #[test]
    fn errors_and_bad_shapes_are_errors() {
        assert!(matches!(
            extract(&json!({"error":{"message":"x"}}), 10),
            Err(Error::UpstreamEvent(_))
        ));
        assert!(extract(&json!([1]), 10).is_err());
        assert!(extract(&json!({"choices":[{"message":{"tool_calls":{}}}]}), 10).is_err());
    }
}
