//! Structured output (`response_format`, the Responses API's `text.format`)
//! through a gate that withholds the model's calls: the openai SDK's parse
//! and stream helpers see a refusal, not text that fails to parse.

use serde_json::{json, Value};

use crate::support::*;

/// A model that answers a structured-output request with a call to `shell`.
fn calls_shell(req: &Value) -> (u16, String) {
    let body = if req["stream"] == true {
        let mut s = chunk(
            0,
            json!({"role": "assistant", "content": null, "refusal": null}),
            None,
        );
        s.push_str(&chunk(
            0,
            call_delta(0, "c1", "shell", "{\"cmd\":\"ls\"}"),
            None,
        ));
        s.push_str(&chunk(0, json!({}), Some("tool_calls")));
        s.push_str("data: [DONE]\n\n");
        s
    } else {
        json!({"id": "chatcmpl-s", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "refusal": null,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\":\"ls\"}"}}]}}]})
        .to_string()
    };
    (200, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_helpers_see_a_refusal_not_invalid_json() {
    let mock = start_mock(vec![func(
        std::sync::Arc::new(calls_shell),
        std::time::Duration::ZERO,
    )])
    .await;
    let gate = start_gate(&mock.base_url(), &deny(&["shell"]), "").await;
    let base = format!("{}/v1", gate.url);
    let Some(r) = run_sdk("structured_check.py", vec![base]).await else {
        return;
    };
    for mode in ["parse", "stream"] {
        let t = &r[mode];
        assert!(t.get("raised").is_none(), "{mode}: {t}");
        assert_eq!(
            t["refusal"], "I wasn't able to complete that action.",
            "{mode}: {t}"
        );
        assert_eq!(t["parsed"], Value::Null, "{mode}: {t}");
        assert_eq!(t["content"], Value::Null, "{mode}: {t}");
        assert_eq!(t["finish"], "stop", "{mode}: {t}");
        assert_eq!(t["calls"], 0, "{mode}: {t}");
    }
    let sent: Value = serde_json::from_slice(&mock.requests()[0].body).unwrap();
    assert_eq!(sent["response_format"]["type"], "json_schema");
}

/// A response of two calls and nothing else, streamed and whole.
fn calls_only() -> (String, Value) {
    let base = json!({"id": "resp_C", "object": "response", "created_at": 1, "model": "m", "status": "in_progress", "output": []});
    let fc = |i: u32, name: &str, done: bool| {
        json!({"id": format!("fc_{i}"), "type": "function_call",
        "status": if done {"completed"} else {"in_progress"}, "call_id": format!("call_{i}"), "name": name,
        "arguments": if done {"{}"} else {""}})
    };
    let mut fin = base.clone();
    fin["status"] = json!("completed");
    fin["output"] = json!([fc(0, "get_weather", true), fc(1, "shell", true)]);
    let mut events = vec![json!({"type": "response.created", "response": base})];
    for (i, name) in [(0, "get_weather"), (1, "shell")] {
        events.push(json!({"type": "response.output_item.added", "output_index": i, "item": fc(i, name, false)}));
        events.push(json!({"type": "response.function_call_arguments.delta", "output_index": i, "item_id": format!("fc_{i}"), "delta": "{}"}));
        events.push(json!({"type": "response.output_item.done", "output_index": i, "item": fc(i, name, true)}));
    }
    events.push(json!({"type": "response.completed", "response": fin}));
    (numbered_events(events), fin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_helpers_see_a_refusal_part() {
    let f: Responder = std::sync::Arc::new(|req: &Value| match req["stream"] == true {
        true => (200, calls_only().0),
        false => (200, calls_only().1.to_string()),
    });
    let mock = start_mock(vec![func(f, std::time::Duration::ZERO)]).await;
    // Plain `drop`: the structured-output request gets refusal parts.
    let gate = start_gate(&mock.base_url(), &deny(&["shell", "get_weather"]), "").await;
    let base = format!("{}/v1", gate.url);
    let Some(r) = run_sdk("structured_check.py", vec![base, "responses".into()]).await else {
        return;
    };
    let neutral = "I wasn't able to complete that action.";
    for mode in ["parse", "stream"] {
        let t = &r[mode];
        assert!(t.get("raised").is_none(), "{mode}: {t}");
        assert_eq!(t["refusal"], format!("{neutral} {neutral}"), "{mode}: {t}");
        assert_eq!(t["parsed"], Value::Null, "{mode}: {t}");
        assert_eq!(t["calls"], 0, "{mode}: {t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_sdk_output_type_sees_a_refusal() {
    let f: Responder = std::sync::Arc::new(|req: &Value| match req["stream"] == true {
        true => (200, calls_only().0),
        false => (200, calls_only().1.to_string()),
    });
    let mock = start_mock(vec![func(f, std::time::Duration::ZERO)]).await;
    let gate = start_gate(&mock.base_url(), &deny(&["shell", "get_weather"]), "").await;
    let base = format!("{}/v1", gate.url);
    let Some(r) = run_sdk("structured_check.py", vec![base, "agents".into()]).await else {
        return;
    };
    let neutral = "I wasn't able to complete that action.";
    for mode in ["run", "run_streamed"] {
        let t = &r[mode];
        // A refusal (ModelRefusalError, with the last refusal part), not a
        // failure to parse JSON.
        assert_eq!(t["refusal"], neutral, "{mode}: {t}");
    }
}
