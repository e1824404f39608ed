//! `resume` for Messages: the follow-up request (the assistant turn with
//! the blocks the model wrote, its withheld `tool_use` blocks, then a user
//! turn with a neutral `tool_result` for each; denied tools hidden) and, for
//! a whole body, the continuation joined to what came before.

use serde_json::{json, Value};

use crate::call::Release;
use crate::error::Error;
use crate::protocol::{append_turn, join_whole, Resumption};

/// Blocks that may go back to the API in an assistant turn as the model
/// wrote them. A response with any other block (a provider-run tool and its
/// result, say) is not continued: it ends as `drop` ends it.
pub fn replayable(ty: &str) -> bool {
    matches!(ty, "text" | "thinking" | "redacted_thinking")
}

/// The two turns that answer `calls` (`tool_use` blocks, all withheld)
/// after the model's own `blocks`.
pub fn turn(blocks: Vec<Value>, calls: Vec<Value>, result: &str) -> Vec<Value> {
    let results: Vec<Value> = calls
        .iter()
        .map(|c| json!({"type": "tool_result", "tool_use_id": c["id"], "content": result}))
        .collect();
    let mut content = blocks;
    content.extend(calls);
    vec![
        json!({"role": "assistant", "content": content}),
        json!({"role": "user", "content": results}),
    ]
}

/// The follow-up request: `body` with the turns appended to `messages` and
/// the denied tools hidden.
pub fn follow_up(body: &mut Value, r: &Resumption) -> Result<(), Error> {
    append_turn(body, "messages", r)?;
    super::hide::remove_tools(body, &r.denied);
    Ok(())
}

/// The resumption of a whole body whose calls (`verdicts` in content order)
/// are all withheld for resume; `None` when it is not to be continued.
pub fn whole(text: &str, verdicts: &[Release], result: &str) -> Option<Resumption> {
    // Most bodies are not continued: known before the body is read again.
    if verdicts.is_empty() || !verdicts.iter().all(|v| v.resumable()) {
        return None;
    }
    let body: Value = serde_json::from_str(text).ok()?;
    let content = body.get("content")?.as_array()?;
    let (mut blocks, mut calls, mut denied) = (Vec::new(), Vec::new(), Vec::new());
    for b in content {
        let ty = b.get("type").and_then(Value::as_str).unwrap_or("");
        if ty == "tool_use" {
            let i = calls.len();
            match Release::at(verdicts, i) {
                Release::Resume { deny } => {
                    if deny {
                        denied.push(b.get("name")?.as_str()?.to_string());
                    }
                }
                _ => return None,
            }
            calls.push(b.clone());
        } else if replayable(ty) {
            blocks.push(b.clone());
        } else {
            return None;
        }
    }
    if calls.is_empty() {
        return None;
    }
    Some(Resumption {
        turn: turn(blocks.clone(), calls, result),
        denied,
        blocks,
        usage: body.get("usage").cloned(),
        ..Resumption::default()
    })
}

/// The agent's whole body: the continuation `last` under the first
/// message's `id`, after the blocks of the messages that were continued,
/// usage summed.
pub fn join(first: &Value, before: &[Resumption], last: &mut Value) {
    join_whole(first, before, last, &["id"], Some("content"));
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"{"id":"msg_1","type":"message","role":"assistant","content":[
        {"type":"thinking","thinking":"hm","signature":"s"},
        {"type":"text","text":"Let me run it."},
        {"type":"tool_use","id":"tu_1","name":"shell","input":{"cmd":"ls"}}],
        "stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5}}"#;

    #[test]
    fn a_whole_body_gives_its_blocks_and_calls_to_the_follow_up() {
        let r = whole(BODY, &[Release::Resume { deny: true }], "NO").unwrap();
        assert_eq!(r.denied, ["shell"]);
        assert_eq!(r.turn[0]["content"].as_array().unwrap().len(), 3);
        assert_eq!(r.turn[0]["content"][2]["id"], "tu_1");
        assert_eq!(
            r.turn[1]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "tu_1", "content": "NO"})
        );
        assert!(whole(BODY, &[Release::Withhold], "NO").is_none());
        let hosted = BODY.replace(
            "\"thinking\",\"thinking\"",
            "\"server_tool_use\",\"thinking\"",
        );
        assert!(whole(&hosted, &[Release::Resume { deny: false }], "NO").is_none());

        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "shell", "input_schema": {}}, {"name": "read", "input_schema": {}}]});
        follow_up(&mut body, &r).unwrap();
        assert_eq!(body["messages"].as_array().unwrap().len(), 3);
        assert_eq!(body["tools"].as_array().unwrap().len(), 1);

        let mut last = json!({"id": "msg_2", "content": [{"type": "text", "text": "Done."}],
            "usage": {"input_tokens": 20, "output_tokens": 2}});
        join(&serde_json::from_str(BODY).unwrap(), &[r], &mut last);
        assert_eq!(last["id"], "msg_1");
        assert_eq!(last["content"].as_array().unwrap().len(), 3);
        assert_eq!(last["content"][1]["text"], "Let me run it.");
        assert_eq!(
            last["usage"],
            json!({"input_tokens": 30, "output_tokens": 7})
        );
    }
}
