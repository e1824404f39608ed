//! `rewrite = "resume"` over HTTP with a scripted provider: a rejected call
//! is answered upstream by toolgate itself and the model's continuation is
//! spliced into the response the agent receives (streamed and whole), and
//! the official `openai` SDK reads each as one ordinary turn.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::accumulate::Acc;
use crate::support::*;

const NEUTRAL_RESULT: &str = "The action could not be completed.";

/// `shell` is rejected (and resumed), `read` allowed.
const POLICY: &str = "[[rule]]\nname = \"no-shell\"\ntools = \"shell\"\nverdict = \"reject\"\nrewrite = \"resume\"\n";

fn usage(p: u64, c: u64) -> String {
    let v = json!({"id": "chatcmpl-t", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [], "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}});
    format!("data: {v}\n\n")
}

/// A stream with `text` (may be empty), then a call to `tool`.
fn calling(id: &str, tool: &str, text: &str) -> String {
    let mut s = chunk(0, json!({"role": "assistant", "content": ""}), None);
    if !text.is_empty() {
        s.push_str(&chunk(0, json!({"content": text}), None));
    }
    s.push_str(&chunk(0, call_delta(0, id, tool, "{\"cmd\":\"ls\"}"), None));
    s.push_str(&chunk(0, json!({}), Some("tool_calls")));
    s.push_str(&usage(10, 5));
    s.push_str("data: [DONE]\n\n");
    s.replace("chatcmpl-t", &format!("chatcmpl-{id}"))
}

/// A stream of text only, under another id.
fn answering(text: &str) -> String {
    let mut s = chunk(0, json!({"role": "assistant", "content": ""}), None);
    s.push_str(&chunk(0, json!({"content": text}), None));
    s.push_str(&chunk(0, json!({}), Some("stop")));
    s.push_str(&usage(20, 3));
    s.push_str("data: [DONE]\n\n");
    s.replace("chatcmpl-t", "chatcmpl-second")
}

fn whole(id: &str, content: Option<&str>, calls: &[(&str, &str)], finish: &str, p: u64) -> String {
    let tc: Vec<Value> = calls
        .iter()
        .map(|(cid, name)| json!({"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}))
        .collect();
    let mut msg = json!({"role": "assistant", "content": content});
    if !tc.is_empty() {
        msg["tool_calls"] = json!(tc);
    }
    json!({"id": id, "object": "chat.completion", "created": p, "model": "m",
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        "usage": {"prompt_tokens": p, "completion_tokens": 1, "total_tokens": p + 1}})
    .to_string()
}

fn request(stream: bool) -> Value {
    let mut r = chat_request(stream, &["shell", "read"]);
    if stream {
        r["stream_options"] = json!({"include_usage": true});
    }
    r
}

/// What went upstream, each with its `messages` after the fence notice
/// (which every request that declares tools starts with, the same each time).
fn sent_bodies(mock: &Mock) -> Vec<Value> {
    let mut bodies: Vec<Value> = mock
        .requests()
        .iter()
        .map(|s| serde_json::from_slice(&s.body).unwrap())
        .collect();
    let notice = bodies[0]["messages"][0].clone();
    assert_eq!(notice["role"], "system");
    for b in &mut bodies {
        let m = b["messages"].as_array_mut().unwrap();
        assert_eq!(m.remove(0), notice, "one system prefix on every request");
    }
    bodies
}

fn data_events(body: &[u8]) -> Vec<String> {
    Acc::sse_events(body).into_iter().map(|(_, d)| d).collect()
}

#[tokio::test]
async fn a_rejected_call_is_continued_in_the_same_stream() {
    let mock = start_mock(vec![
        Reply::sse(calling("c1", "shell", "Let me look.")),
        Reply::sse(answering("I could not run it; here is what I know.")),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), POLICY, "").await;
    let a = post_chat(&gate, &request(true)).await;
    assert_eq!(a.status, 200);
    let acc = Acc::from_sse(&a.body);
    assert!(acc.all_calls().is_empty(), "{}", a.text());
    assert_eq!(
        acc.content[&0],
        "Let me look.\n\nI could not run it; here is what I know."
    );
    assert_eq!(acc.finish[&0], "stop");
    let events = data_events(&a.body);
    assert_eq!(events.iter().filter(|d| *d == "[DONE]").count(), 1);
    assert_eq!(events.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(
        chunks.iter().all(|c| c["id"] == "chatcmpl-c1"),
        "one id: {}",
        a.text()
    );
    let roles = chunks
        .iter()
        .filter(|c| c["choices"][0]["delta"].get("role").is_some())
        .count();
    assert_eq!(roles, 1, "one role delta: {}", a.text());
    let usages: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c.get("usage"))
        .filter(|u| !u.is_null())
        .collect();
    assert_eq!(usages.len(), 1, "{}", a.text());
    assert_eq!(usages[0]["total_tokens"], 38, "usage is summed");
    assert_eq!(usages[0]["prompt_tokens"], 30);

    // The follow-up: the original request, the assistant turn, a neutral result.
    let sent = sent_bodies(&mock);
    assert_eq!(sent.len(), 2);
    let m = sent[1]["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3, "{}", sent[1]);
    assert_eq!(m[0], sent[0]["messages"][0]);
    assert_eq!(m[1]["role"], "assistant");
    assert_eq!(m[1]["tool_calls"][0]["id"], "c1");
    assert_eq!(m[1]["tool_calls"][0]["function"]["name"], "shell");
    assert_eq!(
        m[1]["tool_calls"][0]["function"]["arguments"],
        "{\"cmd\":\"ls\"}"
    );
    assert_eq!(
        m[2],
        json!({"role": "tool", "tool_call_id": "c1", "content": NEUTRAL_RESULT})
    );
    assert_eq!(
        sent[1]["tools"], sent[0]["tools"],
        "a rejected tool stays declared"
    );
    assert_eq!(sent[1]["stream"], true);
    let auth = mock.requests()[1].headers["authorization"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(
        auth,
        format!("Bearer {UPSTREAM_KEY}"),
        "the upstream key, as always"
    );

    let audit = gate.audit_flushed().await;
    let resume: Vec<&Value> = audit.iter().filter(|r| r["event"] == "resume").collect();
    assert_eq!(resume.len(), 1, "{audit:?}");
    assert_eq!(resume[0]["request_id"], audit[0]["request_id"]);
    assert_eq!(resume[0]["resume"], 1);
    let metrics = send("GET", &format!("{}/metrics", gate.admin), &[], "")
        .await
        .text();
    assert!(metrics.contains("toolgate_resumes_total 1"), "{metrics}");
}

#[tokio::test]
async fn an_allowed_call_in_the_continuation_is_released() {
    let mock = start_mock(vec![
        Reply::sse(calling("c1", "shell", "")),
        Reply::sse(calling("c2", "read", "")),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), POLICY, "").await;
    let a = post_chat(&gate, &request(true)).await;
    let acc = Acc::from_sse(&a.body);
    let calls = acc.all_calls();
    assert_eq!(calls.len(), 1, "{}", a.text());
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("c2", "read")
    );
    assert_eq!(acc.finish[&0], "tool_calls");
    assert!(
        acc.content.get(&0).is_none_or(String::is_empty),
        "{}",
        a.text()
    );
    let audit = gate.audit_flushed().await;
    let read = audit.iter().find(|r| r["tool"] == "read").unwrap();
    assert_eq!(
        read["resume"], 1,
        "the continuation's calls are linked: {read}"
    );
    assert_eq!(read["verdict"], "allow");
}

#[tokio::test]
async fn a_model_that_keeps_calling_is_bounded_then_told_neutrally() {
    let mock = start_mock(vec![Reply::sse(calling("c1", "shell", "Trying."))]).await;
    let gate = start_gate(&mock.base_url(), POLICY, "[rewrite]\nmax_resumes = 2\n").await;
    let a = post_chat(&gate, &request(true)).await;
    let acc = Acc::from_sse(&a.body);
    assert!(acc.all_calls().is_empty());
    assert_eq!(
        acc.content[&0],
        "Trying.\n\nTrying.\n\nTrying.\n\nI wasn't able to complete that action."
    );
    assert_eq!(acc.finish[&0], "stop");
    assert_eq!(mock.requests().len(), 3, "two follow-ups, no more");
    let last = &sent_bodies(&mock)[2];
    assert_eq!(last["messages"].as_array().unwrap().len(), 5, "{last}");
    let events = data_events(&a.body);
    assert_eq!(events.iter().filter(|d| *d == "[DONE]").count(), 1);
    let usage: Vec<Value> = events
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| c.get("usage").filter(|u| !u.is_null()).cloned())
        .collect();
    assert_eq!(
        usage,
        [json!({"prompt_tokens": 30, "completion_tokens": 15, "total_tokens": 45})]
    );
}

#[tokio::test]
async fn a_denied_tool_is_hidden_from_the_follow_up() {
    let mock = start_mock(vec![
        Reply::sse(calling("c1", "shell", "")),
        Reply::sse(answering("Done without it.")),
    ])
    .await;
    let policy = "[[rule]]\nname = \"no-shell\"\ntools = \"shell\"\nwhen = \"size(args) > 0\"\nverdict = \"deny\"\n";
    let gate = start_gate(&mock.base_url(), policy, "[rewrite]\nmode = \"resume\"\n").await;
    let a = post_chat(&gate, &request(true)).await;
    assert_eq!(Acc::from_sse(&a.body).content[&0], "Done without it.");
    let sent = sent_bodies(&mock);
    let tools: Vec<&str> = sent[1]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read"], "{}", sent[1]);
    assert_eq!(sent[1]["messages"][2]["content"], NEUTRAL_RESULT);
}

#[tokio::test]
async fn drop_stays_the_default() {
    let mock = start_mock(vec![Reply::sse(calling("c1", "shell", ""))]).await;
    let policy = "[[rule]]\nname = \"no-shell\"\ntools = \"shell\"\nverdict = \"reject\"\n";
    let gate = start_gate(&mock.base_url(), policy, "").await;
    let a = post_chat(&gate, &request(true)).await;
    assert_eq!(
        Acc::from_sse(&a.body).content[&0],
        "I wasn't able to complete that action."
    );
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn a_failed_follow_up_ends_with_the_neutral_text() {
    let mock = start_mock(vec![
        Reply::sse(calling("c1", "shell", "Let me look.")),
        Reply::json(
            500,
            r#"{"error":{"message":"provider exploded with sk-secret"}}"#,
        ),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), POLICY, "").await;
    let a = post_chat(&gate, &request(true)).await;
    assert_eq!(a.status, 200);
    let acc = Acc::from_sse(&a.body);
    assert_eq!(
        acc.content[&0],
        "Let me look.\n\nI wasn't able to complete that action."
    );
    assert_eq!(acc.finish[&0], "stop");
    assert!(!acc.error && !a.text().contains("exploded"), "{}", a.text());
    let events = data_events(&a.body);
    assert_eq!(events.iter().filter(|d| *d == "[DONE]").count(), 1);
    assert!(
        events.iter().any(|d| d.contains("\"total_tokens\":15")),
        "the first usage: {}",
        a.text()
    );

    let mock = start_mock(vec![
        Reply::json(
            200,
            whole(
                "chatcmpl-1",
                Some("Let me look."),
                &[("c1", "shell")],
                "tool_calls",
                10,
            ),
        ),
        Reply::json(500, r#"{"error":{"message":"provider exploded"}}"#),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), POLICY, "").await;
    let a = post_chat(&gate, &request(false)).await;
    assert_eq!(a.status, 200);
    let v = a.json();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Let me look.\n\nI wasn't able to complete that action."
    );
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["id"], "chatcmpl-1");
}

#[tokio::test]
async fn a_whole_response_is_continued_too() {
    let mock = start_mock(vec![
        Reply::json(
            200,
            whole(
                "chatcmpl-1",
                Some("Let me look."),
                &[("c1", "shell")],
                "tool_calls",
                10,
            ),
        ),
        Reply::json(
            200,
            whole(
                "chatcmpl-2",
                Some("Here it is."),
                &[("c2", "read")],
                "tool_calls",
                20,
            ),
        ),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), POLICY, "").await;
    let a = post_chat(&gate, &request(false)).await;
    let v = a.json();
    assert_eq!(v["id"], "chatcmpl-1");
    assert_eq!(v["created"], 10);
    let msg = &v["choices"][0]["message"];
    assert_eq!(msg["content"], "Let me look.\n\nHere it is.");
    assert_eq!(msg["tool_calls"].as_array().unwrap().len(), 1);
    assert_eq!(msg["tool_calls"][0]["function"]["name"], "read");
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(v["usage"]["total_tokens"], 32);
    let sent = sent_bodies(&mock);
    let m = sent[1]["messages"].as_array().unwrap();
    assert_eq!(m[1]["content"], "Let me look.");
    assert_eq!(m[1]["tool_calls"][0]["id"], "c1");
    assert_eq!(m[2]["content"], NEUTRAL_RESULT);
    assert_eq!(sent[1]["stream"], false);

    // Bounded: the same call every time, then the neutral text.
    let mock = start_mock(vec![Reply::json(
        200,
        whole("chatcmpl-1", None, &[("c1", "shell")], "tool_calls", 10),
    )])
    .await;
    let gate = start_gate(&mock.base_url(), POLICY, "[rewrite]\nmax_resumes = 1\n").await;
    let v = post_chat(&gate, &request(false)).await.json();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "I wasn't able to complete that action."
    );
    assert!(
        v["choices"][0]["message"].get("tool_calls").is_none(),
        "{v}"
    );
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(v["usage"]["total_tokens"], 22);
}

/// What the scripted provider does once the conversation holds the neutral
/// result.
#[derive(Clone, Copy, Debug)]
enum Then {
    /// Answers in text.
    Text,
    /// Calls an allowed tool.
    Allowed,
    /// Calls the rejected tool again, every time.
    Stubborn,
}

/// A scripted provider for the SDK: a call to `shell` first, then as `then`
/// says, streamed or whole.
fn scripted(then: Then) -> Reply {
    let f: Responder = Arc::new(move |req: &Value| {
        let answered = req["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        let stream = req["stream"] == true;
        let first = |stream: bool| match stream {
            true => calling("c1", "shell", "Checking."),
            false => whole(
                "chatcmpl-1",
                Some("Checking."),
                &[("c1", "shell")],
                "tool_calls",
                10,
            ),
        };
        let body = match (answered, then, stream) {
            (false, _, s) | (true, Then::Stubborn, s) => first(s),
            (true, Then::Text, true) => answering("All done."),
            (true, Then::Text, false) => whole("chatcmpl-2", Some("All done."), &[], "stop", 20),
            (true, Then::Allowed, true) => calling("c2", "read", ""),
            (true, Then::Allowed, false) => {
                whole("chatcmpl-2", None, &[("c2", "read")], "tool_calls", 20)
            }
        };
        (200, body)
    });
    func(f, Duration::ZERO)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_reads_a_continued_turn() {
    let bounded = "Checking.\n\nChecking.\n\nChecking.\n\nI wasn't able to complete that action.";
    for (then, content, calls, finish, requests) in [
        (Then::Text, "Checking.\n\nAll done.", json!([]), "stop", 6),
        (Then::Allowed, "Checking.", json!(["read"]), "tool_calls", 6),
        (Then::Stubborn, bounded, json!([]), "stop", 9),
    ] {
        let mock = start_mock(vec![scripted(then)]).await;
        let gate = start_gate(&mock.base_url(), POLICY, "").await;
        let Some(r) = run_sdk("resume_check.py", vec![format!("{}/v1", gate.url)]).await else {
            return;
        };
        for mode in ["stream", "helper", "whole"] {
            let t = &r[mode];
            assert_eq!(t["content"], content, "{then:?} {mode}: {t}");
            assert_eq!(t["calls"], calls, "{then:?} {mode}: {t}");
            assert_eq!(t["finish"], finish, "{then:?} {mode}: {t}");
            let id = if mode == "whole" {
                "chatcmpl-1"
            } else {
                "chatcmpl-c1"
            };
            assert_eq!(t["id"], id, "{then:?} {mode}: {t}");
        }
        if let Then::Text = then {
            assert_eq!(r["whole"]["total_tokens"], 32);
            assert_eq!(r["helper"]["total_tokens"], 38);
        }
        assert_eq!(mock.requests().len(), requests, "{then:?}");
        gate.stop().await;
    }
}
