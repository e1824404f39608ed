//! The context's tests: what a request is read into (texts, the calls results answer, result keys) and what its headers, path and messages say.

use super::*;
use crate::protocol::Protocol;
use serde_json::json;

/// A chat conversation: system, user, a tool result, user again.
pub(super) fn body() -> Value {
    json!({"messages": [
        {"role": "system", "content": "You are a mail assistant."},
        {"role": "user", "content": [{"type": "text", "text": "Email Bob"}]},
        {"role": "tool", "tool_call_id": "c", "content": "bob@example.com"},
        {"role": "user", "content": "now"}
    ]})
}

#[test]
fn a_text_pushed_whole_takes_its_own_size_not_double() {
    // The newline after a text that filled the buffer would double it:
    // a second copy of every result so far, at once.
    let big = "x".repeat(1 << 20);
    let mut t = Texts::default();
    t.push_tool("c1", &big);
    t.push_user(&big);
    assert_eq!(t.tool.len(), big.len() + 1);
    assert_eq!(t.tool.capacity(), big.len() + 1);
    assert_eq!(t.user.capacity(), big.len() + 1);
    assert_eq!(t.tool_results, vec![(0..big.len(), "c1".to_string())]);
}

#[test]
fn the_calls_results_answer_are_read_in_every_wire_format() {
    let want = |t: Texts| {
        assert_eq!(
            t.sources,
            vec![Source {
                call_id: "c1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"bill.txt"}"#.into(),
            }]
        );
        assert_eq!(t.tool_results.len(), 1);
    };
    want(Protocol::Chat.texts(
        &json!({"messages": [
            {"role": "user", "content": "pay the bill"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\":\"bill.txt\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "IBAN"}
        ]}),
        true,
    ));
    want(Protocol::Responses.texts(
        &json!({"input": [
            {"role": "user", "content": "pay the bill"},
            {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{\"path\":\"bill.txt\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "IBAN"}
        ]}),
        true,
    ));
    want(Protocol::Messages.texts(
        &json!({"messages": [
            {"role": "user", "content": "pay the bill"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "bill.txt"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "IBAN"}]}
        ]}),
        true,
    ));
    // Not read unless a rule reads the texts.
    let lean = Protocol::Chat.texts(
        &json!({"messages": [{"role": "assistant", "tool_calls": [{"id": "c1",
            "function": {"name": "n", "arguments": "{}"}}]}]}),
        false,
    );
    assert!(lean.sources.is_empty());
}

#[test]
fn each_tool_result_is_keyed_by_its_own_hash_and_a_new_request_rekeys() {
    let texts = |results: &[&str]| {
        let mut t = Texts::default();
        for (i, r) in results.iter().enumerate() {
            t.push_tool(&format!("c{i}"), r);
        }
        t
    };
    let mut c = Context::default();
    fill(
        &mut c,
        &HeaderMap::new(),
        None,
        None,
        texts(&["alpha", "beta", "alpha"]),
    );
    let sha = |s: &str| crate::digest::content_key(s.as_bytes());
    assert_eq!(c.result_keys(), [sha("alpha"), sha("beta"), sha("alpha")]);
    // The scans and readings of the next request must not be looked up
    // under this one's keys.
    fill(&mut c, &HeaderMap::new(), None, None, texts(&["gamma"]));
    assert_eq!(c.result_keys(), [sha("gamma")]);
}

#[test]
fn headers_win_then_path_then_default_then_unknown() {
    let mut h = HeaderMap::new();
    let mut c = Context {
        principal: "p".into(),
        ..Context::default()
    };
    fill(&mut c, &h, None, None, Protocol::Chat.texts(&body(), true));
    assert_eq!(c.phase, "unknown");
    fill(
        &mut c,
        &h,
        None,
        Some("planning"),
        Protocol::Chat.texts(&body(), true),
    );
    assert_eq!(c.phase, "planning");
    fill(
        &mut c,
        &h,
        Some("execution"),
        Some("planning"),
        Protocol::Chat.texts(&body(), true),
    );
    assert_eq!(c.phase, "execution");
    h.insert("x-toolgate-phase", "review".parse().unwrap());
    h.insert("x-toolgate-session", "s1".parse().unwrap());
    h.insert("x-toolgate-agent", "a1".parse().unwrap());
    fill(
        &mut c,
        &h,
        Some("execution"),
        None,
        Protocol::Chat.texts(&body(), true),
    );
    assert_eq!(
        (c.phase.as_str(), c.session.as_str(), c.agent.as_str()),
        ("review", "s1", "a1")
    );
}

#[test]
fn mission_request_session_and_texts_come_from_messages() {
    let mut c = Context {
        principal: "p".into(),
        ..Context::default()
    };
    fill(
        &mut c,
        &HeaderMap::new(),
        None,
        None,
        Protocol::Chat.texts(&body(), true),
    );
    assert_eq!(c.mission.as_deref(), Some("You are a mail assistant."));
    assert_eq!(c.original_request.as_deref(), Some("now"));
    assert_eq!(c.agent, "p");
    // The first 16 hex digits of SHA-256 over the system text, a NUL and
    // the first user text (the same session as the releases before).
    let seed = "You are a mail assistant.\u{0}Email Bob";
    let want = format!("fp-{}", &crate::digest::sha256_hex(seed.as_bytes())[..16]);
    assert_eq!(c.session, want);
    assert!(c.tool_text.contains("bob@example.com") && c.user_text.contains("Email Bob"));
    let mut c2 = Context {
        principal: "p".into(),
        ..Context::default()
    };
    let mut later = body();
    later["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "content": "again"}));
    fill(
        &mut c2,
        &HeaderMap::new(),
        None,
        None,
        Protocol::Chat.texts(&later, true),
    );
    assert_eq!(
        c.session, c2.session,
        "the fingerprint is stable as a conversation grows"
    );
}
