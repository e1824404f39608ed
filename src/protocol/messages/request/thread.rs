//! A request's `thread` (the beta message threads): what it says, and the
//! answers to calls withheld from the reply a continue goes on from.

use serde_json::{json, Value};

use crate::error::Error;

fn bad(m: impl Into<String>) -> Error {
    Error::BadRequest(m.into())
}

/// A request's `thread` (server-held conversation state, the beta
/// `message-threads-2026-08-12`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Thread {
    /// No `thread`: the request carries the whole conversation.
    None,
    /// `{"type": "create"}`: the server holds the conversation from this
    /// request's answer on, with this request's `system` and `tools`.
    Create,
    /// `{"type": "continue", "previous_message_id"}`: only the new messages,
    /// no `system`, no `tools` (the server takes the thread's).
    Continue(String),
}

/// Reads the request's `thread`; a malformed one is the agent's error.
pub fn thread(body: &Value) -> Result<Thread, Error> {
    let t = match body.get("thread") {
        None | Some(Value::Null) => return Ok(Thread::None),
        Some(Value::Object(t)) => t,
        Some(_) => return Err(bad("'thread' must be an object.")),
    };
    match t.get("type").and_then(Value::as_str) {
        Some("create") => Ok(Thread::Create),
        Some("continue") => match t.get("previous_message_id") {
            Some(Value::String(id)) if !id.is_empty() => Ok(Thread::Continue(id.clone())),
            _ => Err(bad(
                "thread.previous_message_id must be a non-empty string.",
            )),
        },
        _ => Err(bad("thread.type must be 'create' or 'continue'.")),
    }
}

/// Answers calls withheld from the thread's last reply (`tool_use` ids) with
/// `text` as `tool_result` blocks at the start of the continue's first
/// user message (a new one when it has none), unless the agent answered
/// them: the server holds that reply, and refuses a continue that leaves a
/// `tool_use` of it unanswered.
pub fn answer_withheld(body: &mut Value, calls: &[(String, String)], text: &str) {
    let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    let answered = |id: &str, messages: &[Value]| {
        messages
            .iter()
            .filter_map(|m| m.get("content").and_then(Value::as_array))
            .flatten()
            .any(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
    };
    let answers: Vec<Value> = calls
        .iter()
        .filter(|(id, _)| !answered(id, messages))
        .map(|(id, _)| json!({"type": "tool_result", "tool_use_id": id, "content": text}))
        .collect();
    if answers.is_empty() {
        return;
    }
    match messages.first_mut() {
        Some(m) if m["role"] == "user" => {
            let content = m
                .as_object_mut()
                .map(|o| o.entry("content").or_insert(Value::Null));
            let Some(content) = content else { return };
            let rest = match content.take() {
                Value::String(s) => vec![json!({"type": "text", "text": s})],
                Value::Array(blocks) => blocks,
                _ => Vec::new(),
            };
            *content = Value::Array(answers.into_iter().chain(rest).collect());
        }
        _ => messages.insert(0, json!({"role": "user", "content": answers})),
    }
}

#[cfg(test)]
mod tests {
    use super::super::add_notice;
    use super::*;

    #[test]
    fn threads_are_read_and_a_continue_gets_no_notice() {
        let create = json!({"thread": {"type": "create"}, "messages": []});
        assert_eq!(thread(&create).ok(), Some(Thread::Create));
        let cont = json!({"thread": {"type": "continue", "previous_message_id": "msg_1"},
            "messages": [{"role": "user", "content": "go on"}]});
        assert_eq!(thread(&cont).ok(), Some(Thread::Continue("msg_1".into())));
        for bad in [
            json!({"thread": "create"}),
            json!({"thread": {"type": "continue"}}),
            json!({"thread": {"type": "fork"}}),
        ] {
            assert!(thread(&bad).is_err(), "{bad}");
        }
        let mut c = cont.clone();
        add_notice(&mut c, "N");
        assert!(c.get("system").is_none());
        let mut c = create.clone();
        add_notice(&mut c, "N");
        assert_eq!(c["system"], "N");
    }

    #[test]
    fn withheld_calls_are_answered_first_in_the_continue() {
        let calls = [("toolu_2".to_string(), "tool_use".to_string())];
        let mut b = json!({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}]});
        answer_withheld(&mut b, &calls, "N");
        let content = &b["messages"][0]["content"];
        assert_eq!(
            content[0],
            json!({"type": "tool_result", "tool_use_id": "toolu_2", "content": "N"})
        );
        assert_eq!(content[1]["tool_use_id"], "toolu_1");
        // Answered once only; a string content becomes a text block after it.
        answer_withheld(&mut b, &calls, "N");
        assert_eq!(
            b["messages"][0]["content"].as_array().map(Vec::len),
            Some(2)
        );
        let mut b = json!({"messages": [{"role": "user", "content": "and now?"}]});
        answer_withheld(&mut b, &calls, "N");
        assert_eq!(
            b["messages"][0]["content"][1],
            json!({"type": "text", "text": "and now?"})
        );
        let mut b = json!({"messages": []});
        answer_withheld(&mut b, &calls, "N");
        assert_eq!(b["messages"][0]["role"], "user");
    }
}
