//! `resume` for Chat Completions: the follow-up request (the assistant turn
//! with the withheld calls, a neutral `tool` result for each, denied tools
//! hidden) and, for a whole body, the continuation joined to what came before.

use serde_json::{json, Map, Value};

use super::Site;
use crate::call::Call;
use crate::error::Error;
use crate::protocol::{append_turn, join_whole, Resumption};

/// The messages that answer `calls` (one choice's, all withheld): the
/// assistant turn that made them, then a neutral result for each.
pub fn turn(calls: &[(&Call, &Site)], text: Option<&str>, result: &str) -> Vec<Value> {
    let content = text
        .filter(|t| !t.is_empty())
        .map_or(Value::Null, |t| json!(t));
    let mut out = Vec::with_capacity(calls.len() + 1);
    if let [(call, site)] = calls {
        if site.legacy {
            let f = json!({ "name": call.name, "arguments": call.arguments });
            out.push(json!({ "role": "assistant", "content": content, "function_call": f }));
            out.push(json!({ "role": "function", "name": call.name, "content": result }));
            return out;
        }
    }
    let entries: Vec<Value> = calls
        .iter()
        .map(|(call, site)| {
            let mut e = Map::new();
            e.insert("id".into(), json!(call.id));
            e.insert("type".into(), json!("function"));
            let f = json!({ "name": call.name, "arguments": call.arguments });
            e.insert("function".into(), f);
            for (k, v) in &site.extra {
                e.entry(k.clone()).or_insert_with(|| v.clone());
            }
            Value::Object(e)
        })
        .collect();
    out.push(json!({ "role": "assistant", "content": content, "tool_calls": entries }));
    for (call, _) in calls {
        out.push(json!({ "role": "tool", "tool_call_id": call.id, "content": result }));
    }
    out
}

/// The follow-up request: `body` (what went upstream last) with the turn
/// appended to `messages` and the denied tools hidden.
pub fn follow_up(body: &mut Value, r: &Resumption) -> Result<(), Error> {
    append_turn(body, "messages", r)?;
    super::hide::remove_tools(body, &r.denied);
    Ok(())
}

/// The agent's whole body: the continuation `last` under the first
/// response's `id` and `created`, its message text after the texts of the
/// responses that were continued (`before`), usage summed.
pub fn join(first: &Value, before: &[Resumption], last: &mut Value) {
    join_whole(first, before, last, &["id", "created"], None);
    let Value::Object(obj) = last else {
        return;
    };
    let texts: Vec<&str> = before
        .iter()
        .filter_map(|r| r.text.as_deref())
        .filter(|t| !t.is_empty())
        .collect();
    if !texts.is_empty() {
        if let Some(Value::Object(msg)) = obj
            .get_mut("choices")
            .and_then(|c| c.get_mut(0))
            .and_then(|c| c.get_mut("message"))
        {
            let mut text = texts.join("\n\n");
            if let Some(own) = msg.get("content").and_then(Value::as_str) {
                if !own.is_empty() {
                    text.push_str("\n\n");
                    text.push_str(own);
                }
            }
            msg.insert("content".into(), json!(text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str) -> Call {
        Call {
            id: id.into(),
            name: name.into(),
            arguments: "{\"a\":1}".into(),
            ..Call::default()
        }
    }

    #[test]
    fn the_follow_up_answers_every_call_and_hides_denied_tools() {
        let (a, b) = (call("c1", "shell"), call("c2", "fetch"));
        let site = Site::default();
        let mut r = Resumption {
            turn: turn(&[(&a, &site), (&b, &site)], Some("Working."), "NO"),
            denied: vec!["shell".into()],
            ..Resumption::default()
        };
        r.text = Some("Working.".into());
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "shell"}},
                      {"type": "function", "function": {"name": "fetch"}}],
            "tool_choice": {"type": "function", "function": {"name": "shell"}}});
        follow_up(&mut body, &r).unwrap();
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(m[1]["content"], "Working.");
        assert_eq!(m[1]["tool_calls"][1]["function"]["name"], "fetch");
        assert_eq!(
            m[2],
            json!({"role": "tool", "tool_call_id": "c1", "content": "NO"})
        );
        assert_eq!(m[3]["tool_call_id"], "c2");
        assert_eq!(body["tools"].as_array().unwrap().len(), 1);
        assert!(
            body.get("tool_choice").is_none(),
            "a choice forcing a hidden tool goes"
        );
        assert!(follow_up(&mut json!({"model": "m"}), &r).is_err());
    }

    #[test]
    fn a_legacy_call_is_answered_the_legacy_way() {
        let a = call("", "lookup");
        let site = Site {
            legacy: true,
            ..Site::default()
        };
        let t = turn(&[(&a, &site)], None, "NO");
        assert_eq!(t[0]["function_call"]["name"], "lookup");
        assert_eq!(t[0]["content"], Value::Null);
        assert_eq!(
            t[1],
            json!({"role": "function", "name": "lookup", "content": "NO"})
        );
    }

    #[test]
    fn a_whole_body_is_joined_under_the_first_id() {
        let first = json!({"id": "A", "created": 1});
        let before = [Resumption {
            text: Some("Let me look.".into()),
            usage: Some(json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})),
            ..Resumption::default()
        }];
        let mut last = json!({"id": "B", "created": 2, "choices": [{"index": 0,
            "message": {"role": "assistant", "content": "Done."}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23}});
        join(&first, &before, &mut last);
        assert_eq!(last["id"], "A");
        assert_eq!(last["created"], 1);
        assert_eq!(
            last["choices"][0]["message"]["content"],
            "Let me look.\n\nDone."
        );
        assert_eq!(last["usage"]["total_tokens"], 38);
        assert_eq!(last["usage"]["prompt_tokens"], 30);
    }
}
