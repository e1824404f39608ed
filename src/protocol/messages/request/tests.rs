//! Tests of reading a Messages request.
use super::*;
use crate::protocol::Protocol;

#[test]
fn the_room_made_for_tool_results_holds_their_text() {
    let body = json!({"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "sunny é"},
        {"type": "tool_result", "tool_use_id": "b", "content": [
            {"type": "text", "text": "x\"y"}, {"type": "image", "source": {"data": "x"}}]},
        {"type": "text", "text": "go on"}]}]});
    let t = texts(&body, true, false);
    let blocks = body["messages"][0]["content"]
        .as_array()
        .into_iter()
        .flatten();
    crate::context::assert_room_holds(&t, blocks.filter_map(|b| b.get("content")), 2);
}

#[test]
fn declared_tools_include_anthropic_defined_and_server_tools() {
    let r = Protocol::Messages
        .parse(
            br#"{"model":"m","messages":[],"tools":[
            {"name":"get","input_schema":{"type":"object"}},
            {"type":"custom","name":"put","input_schema":{"type":"object"}},
            {"type":"web_search_20250305","name":"web_search"},
            {"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},
            {"type":"bash_20250124","name":"bash"},
            {"type":"tool_search_tool_bm25_20251119","name":"tool_search_tool_bm25"},
            {"type":"code_execution_20250825","name":"code_execution"}]}"#,
        )
        .unwrap();
    let mut names: Vec<_> = r.declared.keys().cloned().collect();
    names.sort();
    assert_eq!(
        names,
        [
            "bash",
            "code_execution",
            "get",
            "put",
            "str_replace_based_edit_tool",
            "tool_search_tool_bm25",
            "web_search"
        ]
    );
    assert_eq!(
        r.hosted,
        ["web_search", "tool_search_tool_bm25", "code_execution"]
    );
    assert!(r.declared["get"].parameters.is_some());
    assert!(r.aliases.contains(&(
        "text_editor".to_string(),
        "str_replace_based_edit_tool".to_string()
    )));
    assert!(r.aliases.contains(&(
        "tool_search".to_string(),
        "tool_search_tool_bm25".to_string()
    )));
    assert!(r.explicit.is_empty());
}

#[test]
fn mcp_servers_need_an_explicit_allow() {
    let r = Protocol::Messages
        .parse(br#"{"messages":[],"mcp_servers":[{"type":"url","url":"https://x.example/mcp","name":"gh"}]}"#)
        .unwrap();
    assert_eq!(r.explicit, ["mcp.gh"]);
}

#[test]
fn bad_requests_are_client_errors() {
    for b in [
        &br#"{"messages":[],"tools":[{"input_schema":{}}]}"#[..],
        br#"{"messages":[],"tools":[5]}"#,
        br#"{"messages":[],"tools":[{"type":7,"name":"x"}]}"#,
        br#"{"messages":{}}"#,
        br#"{}"#,
        br#"{"messages":[],"system":5}"#,
        br#"{"messages":[],"stream":"yes"}"#,
        br#"{"messages":[],"mcp_servers":[{"url":"u"}]}"#,
    ] {
        let e = Protocol::Messages.parse(b).unwrap_err();
        assert_eq!(e.status(), 400, "{}", String::from_utf8_lossy(b));
    }
}

#[test]
fn texts_come_from_system_and_user_turns() {
    let body = json!({"system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}],
    "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
    ]});
    let t = texts(&body, true, true);
    assert_eq!(t.system, "Be brief.\nUse tools.");
    assert_eq!(t.first_user.as_deref(), Some("weather?"));
    assert_eq!(t.last_user.as_deref(), Some("thanks"));
    assert!(t.tool.contains("sunny") && !t.user.contains("sunny"));
}

#[test]
fn tool_results_are_found_in_every_shape() {
    let mut body = json!({"messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "fetch", "input": {"url": "https://x.example/a"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "page", "is_error": false},
            {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "a"}, {"type": "image", "source": {"type": "base64", "data": "x"}}]},
            {"type": "tool_result", "tool_use_id": "t3", "content": [{"type": "image", "source": {}}]},
            {"type": "tool_result", "tool_use_id": "t4", "content": [{"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": "r"}]}, {"type": "text", "text": "b"}]},
            {"type": "tool_result", "tool_use_id": "t5"},
            {"type": "text", "text": "go on"}
        ]}
    ]});
    let r = tool_results(&mut body);
    let seen: Vec<(&str, &str)> = r
        .iter()
        .map(|r| (r.call_id.as_str(), r.tool.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("t1", "fetch"),
            ("t2", "unknown"),
            // The fence leaves the image alone.
            ("t3", "unknown"),
            // The fence finds the search result's blocks inside.
            ("t4", "unknown")
        ]
    );
    assert_eq!(r[0].url.as_deref(), Some("https://x.example/a"));
    assert!(r[3].content.is_array());
}

#[test]
fn the_notice_goes_into_system_once() {
    for (system, want) in [
        (json!(null), json!("N")),
        (json!("S"), json!("S\n\nN")),
        (
            json!([{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}]),
            json!([{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "N"}]),
        ),
    ] {
        let mut b = json!({"system": system, "messages": []});
        add_notice(&mut b, "N");
        add_notice(&mut b, "N");
        assert_eq!(b["system"], want);
    }
}

#[test]
fn type_bases() {
    assert_eq!(type_base("web_search_20250305"), Some("web_search"));
    assert_eq!(type_base("text_editor_20250728"), Some("text_editor"));
    assert_eq!(
        type_base("tool_search_tool_regex_20251119"),
        Some("tool_search")
    );
    assert_eq!(type_base("mcp_toolset"), Some("mcp_toolset"));
    assert_eq!(type_base("custom"), None);
}
