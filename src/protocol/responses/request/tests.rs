//! A Responses request's tests: its declared tools, texts, tool results and the answers to withheld calls.

use super::*;
use crate::protocol::Protocol;

#[test]
fn the_room_made_for_tool_outputs_holds_their_text() {
    let body = serde_json::json!({"input": [
        {"type": "function_call_output", "call_id": "a", "output": "sunny é"},
        {"type": "function_call_output", "call_id": "b", "output": [
            {"type": "input_text", "text": "x\"y"}, {"type": "input_text", "text": "zz"}]},
        {"type": "shell_call_output", "call_id": "c", "output": [{"stdout": "out", "stderr": "err"}]},
        {"role": "user", "content": "hi"}]});
    let t = texts(&body, true, false);
    let results = (body["input"].as_array().into_iter().flatten()).filter_map(|i| i.get("output"));
    crate::context::assert_room_holds(&t, results, 3);
}

#[test]
fn declared_tools_include_built_in_ones() {
    let r = Protocol::Responses
        .parse(br#"{"model":"m","tools":[{"type":"function","name":"a","parameters":{"type":"object"}},{"type":"custom","name":"b"},{"type":"web_search_preview"},{"type":"shell"},{"type":"computer_use_preview"}]}"#)
        .unwrap();
    let mut names: Vec<_> = r.declared.keys().cloned().collect();
    names.sort();
    assert_eq!(names, ["a", "b", "computer", "shell", "web_search"]);
    assert_eq!(r.hosted, ["web_search"]);
    assert!(r.declared["a"].parameters.is_some());
}

#[test]
fn namespaced_tools_and_a_client_tool_search_are_declared() {
    let r = Protocol::Responses
        .parse(br#"{"model":"m","tools":[{"type":"namespace","name":"crm","description":"","tools":[{"type":"function","name":"delete_contact","parameters":{"type":"object"}},{"type":"custom","name":"note"}]},{"type":"tool_search","execution":"client"}]}"#)
        .unwrap();
    let mut names: Vec<_> = r.declared.keys().cloned().collect();
    names.sort();
    assert_eq!(names, ["crm.delete_contact", "crm.note", "tool_search"]);
    assert!(r.hosted.is_empty(), "{:?}", r.hosted);
    assert!(r.declared["crm.delete_contact"].parameters.is_some());
    let r = Protocol::Responses
        .parse(br#"{"model":"m","tools":[{"type":"tool_search"}]}"#)
        .unwrap();
    assert_eq!(r.hosted, ["tool_search"]);
    for b in [
        &br#"{"tools":[{"type":"namespace","name":"crm","tools":[{"type":"web_search"}]}]}"#[..],
        br#"{"tools":[{"type":"namespace","tools":[]}]}"#,
        br#"{"tools":[{"type":"namespace","name":"crm","tools":[{"type":"function"}]}]}"#,
    ] {
        let e = Protocol::Responses.parse(b).unwrap_err();
        assert_eq!(e.status(), 400, "{}", String::from_utf8_lossy(b));
    }
}

#[test]
fn bad_requests_are_client_errors() {
    for b in [
        &br#"{"background":true}"#[..],
        br#"{"tools":[{"type":"function"}]}"#,
        br#"{"tools":[{}]}"#,
        br#"{"input":5}"#,
        br#"{"stream":"yes"}"#,
    ] {
        let e = Protocol::Responses.parse(b).unwrap_err();
        assert_eq!(e.status(), 400, "{}", String::from_utf8_lossy(b));
    }
}

#[test]
fn texts_come_from_instructions_and_items() {
    let body = json!({"instructions": "Be brief.", "input": [
        {"role": "developer", "content": "Use tools."},
        {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
        {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"role": "user", "content": "thanks"}
    ]});
    let t = texts(&body, true, true);
    assert_eq!(t.system, "Be brief.\nUse tools.");
    assert_eq!(t.first_user.as_deref(), Some("weather?"));
    assert_eq!(t.last_user.as_deref(), Some("thanks"));
    assert!(t.tool.contains("sunny"));
    assert_eq!(
        texts(&json!({"input": "hi"}), false, false)
            .last_user
            .as_deref(),
        Some("hi")
    );
}

#[test]
fn tool_results_of_every_kind_are_found() {
    let mut body = json!({"input": [
        {"type": "function_call", "call_id": "c1", "name": "fetch", "arguments": "{\"url\":\"https://x.example/a\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "page"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "t"}, {"type": "input_image", "image_url": "data:x"}]},
        {"type": "shell_call_output", "call_id": "c3", "output": [{"stdout": "out", "stderr": "err", "outcome": {"type": "exit", "exit_code": 0}}]},
        {"type": "computer_call_output", "call_id": "c4", "output": {"type": "computer_screenshot", "image_url": "data:y"}},
        {"type": "local_shell_call_output", "id": "c5", "output": "ls"}
    ]});
    let r = tool_results(&mut body);
    let seen: Vec<(&str, &str)> = r
        .iter()
        .map(|r| (r.call_id.as_str(), r.tool.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("c1", "fetch"),
            ("c2", "unknown"),
            ("c3", "unknown"),
            ("c3", "unknown"),
            // The fence leaves the screenshot alone.
            ("c4", "unknown"),
            ("c5", "unknown")
        ]
    );
    assert_eq!(r[0].url.as_deref(), Some("https://x.example/a"));
}

#[test]
fn withheld_calls_are_answered_first_once() {
    let mut body = json!({"previous_response_id": "r1", "input": "go on"});
    let calls = [
        ("c1".to_string(), "function_call".to_string()),
        ("c2".to_string(), "computer_call".to_string()),
    ];
    answer_withheld(&mut body, &calls, "N");
    assert_eq!(
        body["input"][0],
        json!({"type": "function_call_output", "call_id": "c1", "output": "N"})
    );
    assert_eq!(
        body["input"][1],
        json!({"role": "user", "content": "go on"})
    );
    assert_eq!(body["input"].as_array().unwrap().len(), 2);
    answer_withheld(&mut body, &calls, "N");
    assert_eq!(
        body["input"].as_array().unwrap().len(),
        2,
        "not answered twice"
    );
}
