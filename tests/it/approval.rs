//! Human approval (`ask`): calls held until a person answers through the
//! admin API; the official openai SDK waiting streamed and not; keep-alives
//! on the wire; two questions in one response; binding and replay; the
//! agent leaving, shutdown, overflow and monitor mode.

use std::time::Duration;

use serde_json::{json, Value};

use crate::accumulate::Acc;
use crate::support::*;

pub const TOKEN_ENV: &str = "TOOLGATE_IT_APPROVAL_TOKEN";
pub const TOKEN: &str = "approval-token-for-tests-0123456789";
pub const ARGS: &str = r#"{"amount": 5, "to": "acme"}"#;

/// Policy: `pay` and `refund` wait for a person.
pub const ASK: &str =
    "[[rule]]\nname = \"ask-money\"\ntools = [\"pay\", \"refund\"]\nverdict = \"ask\"\n";

/// `[approval]` with this time-out, short keep-alives and the test token.
pub fn approval_config(timeout: f64) -> String {
    std::env::set_var(TOKEN_ENV, TOKEN);
    format!(
        "[approval]\ntimeout_secs = {timeout}\nkeepalive_secs = 0.1\ntoken_env = \"{TOKEN_ENV}\"\n"
    )
}

/// A chat answer with `calls` (name, id, arguments): an SSE stream or a
/// whole body, as the request asks.
pub fn answer_with(calls: &'static [(&'static str, &'static str, &'static str)]) -> Reply {
    func(
        std::sync::Arc::new(move |req: &Value| {
            if req["stream"] == json!(true) {
                let mut body = chunk(
                    0,
                    json!({"role": "assistant", "content": "Paying now. "}),
                    None,
                );
                for (i, (name, id, args)) in calls.iter().enumerate() {
                    body.push_str(&chunk(0, call_delta(i as u32, id, name, args), None));
                }
                body.push_str(&chunk(0, json!({}), Some("tool_calls")));
                body.push_str("data: [DONE]\n\n");
                return (200, body);
            }
            let tool_calls: Vec<Value> = calls
                .iter()
                .map(|(name, id, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
                .collect();
            let v = json!({"id": "chatcmpl-a", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": tool_calls}, "finish_reason": "tool_calls"}]});
            (200, v.to_string())
        }),
        Duration::ZERO,
    )
}

pub async fn list(gate: &Gate) -> Vec<Value> {
    let a = send(
        "GET",
        &format!("{}/approvals", gate.admin),
        &[("authorization", &format!("Bearer {TOKEN}"))],
        "",
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    a.json()["pending"].as_array().unwrap().clone()
}

/// Waits until `n` questions are pending (up to 30 s: a Python SDK client
/// takes seconds to start on a loaded 2-core machine).
pub async fn pending(gate: &Gate, n: usize) -> Vec<Value> {
    for _ in 0..1500 {
        let l = list(gate).await;
        if l.len() >= n {
            return l;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{n} questions never appeared: {:?}", list(gate).await);
}

/// Approves question `q` as `ana`; the API's status.
pub async fn approve(gate: &Gate, q: &Value) -> u16 {
    let body = json!({"decision": "approve", "by": "ana"});
    decide(gate, q["id"].as_str().unwrap(), body)
        .await
        .status
        .as_u16()
}

pub async fn decide(gate: &Gate, id: &str, body: Value) -> Answer {
    send(
        "POST",
        &format!("{}/approvals/{id}", gate.admin),
        &[
            ("authorization", &format!("Bearer {TOKEN}")),
            ("content-type", "application/json"),
        ],
        body.to_string(),
    )
    .await
}

pub fn request(stream: bool) -> Value {
    let mut r = chat_request(stream, &["pay", "refund", "lookup"]);
    r["messages"] = json!([{"role": "user", "content": "pay the invoice"}]);
    r
}

pub async fn post(gate: &Gate, body: &Value) -> Answer {
    send(
        "POST",
        &format!("{}/v1/chat/completions", gate.url),
        &[
            ("content-type", "application/json"),
            ("x-toolgate-session", "s1"),
        ],
        body.to_string(),
    )
    .await
}

pub fn approval_records(audit: &[Value]) -> Vec<Value> {
    audit
        .iter()
        .filter(|r| r["gate"] == "approval")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_waits_and_gets_the_call_only_when_approved() {
    let mock = start_mock(vec![answer_with(&[("pay", "call_1", ARGS)])]).await;
    let gate = start_gate(&mock.base_url(), ASK, &approval_config(30.0)).await;
    let timed = start_gate(&mock.base_url(), ASK, &approval_config(0.8)).await;
    let neutral = "I wasn't able to complete that action.";
    for mode in ["stream", "whole"] {
        for outcome in ["approve", "deny", "timeout"] {
            let g = if outcome == "timeout" { &timed } else { &gate };
            let sdk = tokio::spawn(run_sdk(
                "approval_check.py",
                vec![format!("{}/v1", g.url), mode.into()],
            ));
            let q = pending(g, 1).await;
            assert_eq!(q[0]["tool"], "pay");
            assert_eq!(q[0]["rule"], "ask-money");
            assert_eq!(q[0]["phase"], "execution");
            assert_eq!(q[0]["request"], "pay the invoice");
            assert_eq!(
                serde_json::from_str::<Value>(q[0]["arguments"].as_str().unwrap()).unwrap(),
                json!({"amount": 5, "to": "acme"})
            );
            let id = q[0]["id"].as_str().unwrap().to_string();
            if outcome != "timeout" {
                // Long enough for several keep-alives on the stream.
                tokio::time::sleep(Duration::from_millis(400)).await;
                let a = decide(g, &id, json!({"decision": outcome, "by": "ana"})).await;
                assert_eq!(a.status, 200, "{}", a.text());
            }
            let Some(r) = sdk.await.unwrap() else { return };
            let label = format!("{mode}/{outcome}");
            if outcome == "approve" {
                assert_eq!(r["calls"], json!([["call_1", "pay", ARGS]]), "{label}: {r}");
                assert_eq!(r["finish"], "tool_calls", "{label}: {r}");
            } else {
                assert_eq!(r["calls"], json!([]), "{label}: {r}");
                assert_eq!(r["finish"], "stop", "{label}: {r}");
                let content = r["content"].as_str().unwrap_or_default();
                assert!(content.ends_with(neutral), "{label}: {r}");
            }
            assert!(list(g).await.is_empty(), "{label}");
        }
    }
    let audit = gate.audit_flushed().await;
    assert_eq!(
        audit.iter().filter(|r| r["verdict"] == "ask").count(),
        4,
        "{audit:?}"
    );
    let answered = approval_records(&audit);
    let decisions: Vec<(&str, &str, &str)> = answered
        .iter()
        .map(|r| {
            (
                r["approval"]["decision"].as_str().unwrap(),
                r["approval"]["by"].as_str().unwrap(),
                r["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("approve", "ana", "allow"),
            ("deny", "ana", "reject"),
            ("approve", "ana", "allow"),
            ("deny", "ana", "reject")
        ]
    );
    for r in &answered {
        assert_eq!(r["approval"]["channel"], "api");
        assert!(r["approval"]["waited_ms"].as_u64().unwrap() >= 300, "{r}");
        assert!(
            !r.to_string().contains("acme"),
            "raw arguments in the audit trail: {r}"
        );
    }
    let timeouts = approval_records(&timed.audit_flushed().await);
    assert_eq!(timeouts.len(), 2);
    assert!(
        timeouts
            .iter()
            .all(|r| r["approval"]["decision"] == "timeout" && r["verdict"] == "reject"),
        "{timeouts:?}"
    );
    let metrics = send("GET", &format!("{}/metrics", gate.admin), &[], "")
        .await
        .text();
    assert!(
        metrics.contains("toolgate_approvals_total{decision=\"approve\",channel=\"api\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("toolgate_approvals_pending 0"),
        "{metrics}"
    );
    assert!(metrics.contains("verdict=\"ask\""), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_stream_hears_keepalives_after_its_text_and_two_questions_are_answered_apart() {
    let mock = start_mock(vec![answer_with(&[
        ("pay", "call_a", ARGS),
        ("lookup", "call_l", "{}"),
        ("refund", "call_b", r#"{"id":7}"#),
    ])])
    .await;
    let gate = start_gate(&mock.base_url(), ASK, &approval_config(30.0)).await;
    let (_, mut body) = open_stream(&gate, &request(true), false).await;
    let mut wire = Vec::new();
    // The text before the calls is out while they wait.
    while !String::from_utf8_lossy(&wire).contains("Paying now.") {
        wire.extend(next_frame(&mut body).await);
    }
    let q = pending(&gate, 2).await;
    assert_eq!(
        q.iter()
            .map(|q| q["tool"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["pay", "refund"]
    );
    let before = wire.len();
    while String::from_utf8_lossy(&wire[before..])
        .matches(": keepalive")
        .count()
        < 3
    {
        wire.extend(next_frame(&mut body).await);
    }
    assert!(
        !String::from_utf8_lossy(&wire).contains("call_"),
        "a call went out before its answer"
    );
    let a = decide(
        &gate,
        q[0]["id"].as_str().unwrap(),
        json!({"decision": "approve", "by": "ana", "digest": q[0]["digest"]}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    // One answered, one waiting: nothing is released yet.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let d = decide(
        &gate,
        q[1]["id"].as_str().unwrap(),
        json!({"decision": "deny", "by": "ana"}),
    )
    .await;
    assert_eq!(d.status, 200);
    while let Some(f) = try_frame(&mut body).await {
        wire.extend(f);
    }
    let text = String::from_utf8_lossy(&wire).to_string();
    let released = text.find("call_a").unwrap();
    assert!(text[..released].contains(": keepalive"));
    let acc = Acc::from_sse(&wire);
    let calls: Vec<(String, String)> = acc
        .all_calls()
        .into_iter()
        .map(|c| (c.name, c.arguments))
        .collect();
    assert_eq!(
        calls,
        [
            ("pay".to_string(), ARGS.to_string()),
            ("lookup".into(), "{}".into())
        ]
    );
    let rec = approval_records(&gate.audit_flushed().await);
    let got: Vec<(&str, &str)> = rec
        .iter()
        .map(|r| {
            (
                r["tool"].as_str().unwrap(),
                r["approval"]["decision"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [("pay", "approve"), ("refund", "deny")]);
}

async fn next_frame(body: &mut hyper::body::Incoming) -> Vec<u8> {
    try_frame(body).await.expect("the stream ended early")
}

pub async fn try_frame(body: &mut hyper::body::Incoming) -> Option<Vec<u8>> {
    use http_body_util::BodyExt;
    loop {
        let f = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("no frame in 10 s")?;
        if let Ok(d) = f.unwrap().into_data() {
            return Some(d.to_vec());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_binds_to_its_call_and_a_session_approval_to_the_same_arguments() {
    let mock = start_mock(vec![
        answer_with(&[("pay", "call_1", ARGS)]),
        answer_with(&[("pay", "call_2", r#"{"amount": 500, "to": "mallory"}"#)]),
        answer_with(&[("pay", "call_3", ARGS)]),
        answer_with(&[("pay", "call_4", r#"{"to": "acme", "amount": 5}"#)]),
        answer_with(&[("pay", "call_5", r#"{"amount": 6, "to": "acme"}"#)]),
    ])
    .await;
    let config = format!("{}{}", approval_config(1.5), agent());
    let gate = start_gate(&mock.base_url(), ASK, &config).await;
    let auth = [("authorization", "Bearer wrong")];
    assert_eq!(
        send("GET", &format!("{}/approvals", gate.admin), &auth, "")
            .await
            .status,
        401
    );
    assert_eq!(
        send("GET", &format!("{}/approvals", gate.admin), &[], "")
            .await
            .status,
        401
    );

    // The first call is approved, for this call only.
    let g = &gate;
    let first = spawn_chat(g, request(false));
    let q1 = pending(g, 1).await[0].clone();
    let id1 = q1["id"].as_str().unwrap().to_string();
    let no = send(
        "POST",
        &format!("{}/approvals/{id1}", g.admin),
        &[("content-type", "application/json")],
        json!({"decision": "approve", "by": "x"}).to_string(),
    )
    .await;
    assert_eq!(no.status, 401, "an answer without the token is refused");
    assert_eq!(
        decide(g, &id1, json!({"decision": "approve", "by": "ana"}))
            .await
            .status,
        200
    );
    let a1 = first.await.unwrap();
    assert_eq!(
        Acc::from_json(&a1.body).all_calls().len(),
        1,
        "{}",
        a1.text()
    );

    // Another call: the old id answers 409, its digest does not fit the new one.
    let second = spawn_chat(g, request(false));
    let q2 = pending(g, 1).await[0].clone();
    assert_ne!(q2["id"], q1["id"]);
    assert_ne!(q2["digest"], q1["digest"]);
    assert_eq!(
        decide(g, &id1, json!({"decision": "approve", "by": "ana"}))
            .await
            .status,
        409
    );
    let id2 = q2["id"].as_str().unwrap();
    let stale = decide(
        g,
        id2,
        json!({"decision": "approve", "by": "ana", "digest": q1["digest"]}),
    )
    .await;
    assert_eq!(stale.status, 409, "{}", stale.text());
    assert_eq!(
        decide(
            g,
            "0123456789abcdef0123456789abcdef",
            json!({"decision": "approve", "by": "ana"})
        )
        .await
        .status,
        404
    );
    let bad = decide(g, id2, json!({"decision": "approve"})).await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    // Nobody approved it: it times out, a neutral turn.
    let a2 = second.await.unwrap();
    assert!(
        Acc::from_json(&a2.body).all_calls().is_empty(),
        "{}",
        a2.text()
    );
    assert_eq!(
        decide(g, id2, json!({"decision": "approve", "by": "ana"}))
            .await
            .status,
        409
    );

    // A session approval: the same tool and arguments (any key order) pass
    // unasked in that session; other arguments are asked again.
    let third = spawn_chat(g, request(false));
    let q3 = pending(g, 1).await[0].clone();
    assert_eq!(
        decide(
            g,
            q3["id"].as_str().unwrap(),
            json!({"decision": "approve", "by": "ana", "scope": "session"})
        )
        .await
        .status,
        200
    );
    assert_eq!(
        Acc::from_json(&third.await.unwrap().body).all_calls().len(),
        1
    );
    let fourth = post_to(&g.url, &request(false)).await;
    assert_eq!(Acc::from_json(&fourth.body).all_calls()[0].id, "call_4");
    let fifth = post_to(&g.url, &request(false)).await;
    assert!(
        Acc::from_json(&fifth.body).all_calls().is_empty(),
        "other arguments were asked again and timed out"
    );
    let rec = approval_records(&g.audit_flushed().await);
    let how: Vec<(&str, &str)> = rec
        .iter()
        .map(|r| {
            (
                r["approval"]["decision"].as_str().unwrap(),
                r["approval"]["channel"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        how,
        [
            ("approve", "api"),
            ("timeout", "-"),
            ("approve", "api"),
            ("approve", "session"),
            ("timeout", "-")
        ]
    );
}

/// Posts `body` to the gate in the background (it waits for an answer).
pub fn spawn_chat(gate: &Gate, body: Value) -> tokio::task::JoinHandle<Answer> {
    let url = gate.url.clone();
    tokio::spawn(async move { post_to(&url, &body).await })
}

pub async fn post_to(url: &str, body: &Value) -> Answer {
    send(
        "POST",
        &format!("{url}/v1/chat/completions"),
        &[
            ("content-type", "application/json"),
            ("x-toolgate-session", "s1"),
            // The client's token where `[[client]]` is configured
            // ([`AGENT`]); ignored where it is not.
            ("authorization", &format!("Bearer {AGENT_TOKEN}")),
        ],
        body.to_string(),
    )
    .await
}

const AGENT_TOKEN_ENV: &str = "TG_IT_APPROVAL_AGENT_TOKEN";
const AGENT_TOKEN: &str = "approval-agent-token-1";

/// A `[[client]]` the agent of [`post_to`] authenticates as: session
/// approvals need an authenticated agent.
pub fn agent() -> String {
    std::env::set_var(AGENT_TOKEN_ENV, AGENT_TOKEN);
    format!("[[client]]\nname = \"agent\"\ntoken_env = \"{AGENT_TOKEN_ENV}\"\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthenticated_agent_gets_no_session_approval() {
    // Without [[client]] every agent is `anonymous` and its session a header
    // any agent may send: a session approval could be taken by another.
    let mock = start_mock(vec![answer_with(&[("pay", "call_1", ARGS)])]).await;
    let gate = start_gate(&mock.base_url(), ASK, &approval_config(30.0)).await;
    let waiting = spawn_chat(&gate, request(false));
    let q = pending(&gate, 1).await[0].clone();
    let id = q["id"].as_str().unwrap();
    let session = json!({"decision": "approve", "by": "ana", "scope": "session"});
    let r = decide(&gate, id, session).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("authenticated"), "{}", r.text());
    // The call still waits, and may be approved alone.
    let once = json!({"decision": "approve", "by": "ana"});
    assert_eq!(decide(&gate, id, once).await.status, 200);
    let a = waiting.await.unwrap();
    assert_eq!(Acc::from_json(&a.body).all_calls().len(), 1, "{}", a.text());
    // The same call again is asked again: nothing was granted.
    let again = spawn_chat(&gate, request(false));
    assert_eq!(pending(&gate, 1).await.len(), 1);
    again.abort();
    gate.stop().await;
}
