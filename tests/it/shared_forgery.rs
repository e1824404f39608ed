//! What a Redis writer cannot do to replicas sharing state: show a person
//! another call than the one a replica holds, approve a call with an
//! answer about another one, or continue a thread with another thread's
//! facts. Two replicas on one real `redis-server`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::accumulate::Acc;
use crate::shared_state::{command, keys, record_key, redis, set};
use crate::support::*;

/// The call the provider proposes: not what the person is shown below.
const HELD: &str = r#"{"amount": 5000, "to": "attacker-acct"}"#;

/// The whole value of `key` in Redis on `port` (a bulk string), if any.
async fn get(port: u16, key: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let cmd = format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len());
    s.write_all(cmd.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, rest) = text.split_once("\r\n")?;
        let len: i64 = head.strip_prefix('$')?.parse().ok()?;
        if len < 0 {
            return None;
        }
        if rest.len() >= len as usize + 2 {
            return Some(rest[..len as usize].to_string());
        }
    }
}

/// What a replica signs with the approvals API's token, as every replica
/// can: a decision about question `id`.
fn signed_decision(id: &str, answer: &Value) -> String {
    use toolgate::digest::{hex, hmac_sha256, sha256};
    let what = answer.to_string();
    let key = sha256(crate::approval::TOKEN.as_bytes());
    let parts: [&[u8]; 5] = [
        b"decision",
        &[0xff],
        id.as_bytes(),
        &[0xff],
        what.as_bytes(),
    ];
    format!("{}.{what}", hex(&hmac_sha256(&key, &parts)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_rewritten_in_redis_is_not_shown_and_an_answer_about_another_call_is_not_taken()
{
    use crate::approval::{
        answer_with, approval_config, approve, decide, list, pending, post_to, request, ASK,
    };
    let port = crate::bin::free_port();
    let Some(_redis) = redis(port).await else {
        return;
    };
    let upstream = start_mock(vec![answer_with(&[("pay", "call_1", HELD)])]).await;
    let extra = format!(
        "{}[state]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:{port}\"\nkey_prefix = \"forged-ask:\"\n",
        approval_config(30.0)
    );
    let mut files = shipped(&["default.toml"]);
    files.push(("10-ask.toml".into(), ASK.into()));
    let a = start_gate_files(&upstream.base_url(), &files, &extra).await;
    let b = start_gate_files(&upstream.base_url(), &files, &extra).await;

    let url = a.url.clone();
    let asked = tokio::spawn(async move { post_to(&url, &request(false)).await });
    let held = pending(&a, 1).await;
    let id = held[0]["id"].as_str().unwrap().to_string();
    let key = record_key("forged-ask:", "approval", &id);
    for _ in 0..100 {
        if keys(port, &key).await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let record = get(port, &key).await.expect("the question is published");
    assert!(record.contains("attacker-acct"), "{record}");
    // A Redis writer makes the question look harmless, keeping the rest.
    let rewritten = record.replace("5000", "5").replace("attacker-acct", "acme");
    assert!(set(port, &key, &rewritten).await);

    // B never shows a person the rewritten call, and cannot answer it.
    let shown = list(&b).await;
    assert!(
        shown
            .iter()
            .all(|q| !q["arguments"].to_string().contains("acme")),
        "B showed the rewritten call: {shown:?}"
    );
    let answered_on_b = approve(&b, &held[0]).await;
    assert_ne!(
        answered_on_b, 200,
        "an answer about a rewritten question was taken"
    );

    // An answer signed as a replica signs, but about another call (its
    // digest is not the held call's), is not taken by the holder.
    let other = json!({"approve": true, "by": "mallory", "channel": "api", "session": false,
        "digest": "00".repeat(32)});
    let decision = record_key("forged-ask:", "decision", &id);
    assert!(set(port, &decision, &signed_decision(&id, &other)).await);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        list(&a).await.len(),
        1,
        "an answer about another call approved this one"
    );
    assert!(
        command(port, &["EXISTS", &decision])
            .await
            .starts_with(":0"),
        "the holder removed the answer it did not take"
    );

    // Answered where the true question is shown, the call that was shown
    // is the call released.
    assert_eq!(held[0]["arguments"].as_str(), Some(HELD));
    let ok = decide(&a, &id, json!({"decision": "approve", "by": "ana"})).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let got = asked.await.unwrap();
    let calls = Acc::from_json(&got.body).all_calls();
    assert_eq!(calls.len(), 1, "{}", got.text());
    assert_eq!(calls[0].arguments, HELD);
    a.stop().await;
    b.stop().await;
}

/// A Messages answer `id` that says `text`.
fn said(id: &str, text: &str) -> Reply {
    let v = json!({"id": id, "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}});
    Reply::json(200, v.to_string())
}

/// A Messages answer `id` calling `delete_file`.
fn deletes(id: &str) -> Reply {
    let v = json!({"id": id, "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "tool_use", "id": "toolu_del", "name": "delete_file", "input": {"path": "/"}}],
        "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}});
    Reply::json(200, v.to_string())
}

/// A thread created declaring `tools`.
fn create(tools: &[&str]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| json!({"name": t, "input_schema": {"type": "object"}}))
        .collect();
    json!({"model": "m", "max_tokens": 10, "thread": {"type": "create"},
        "system": "You help with files.", "tools": tools,
        "messages": [{"role": "user", "content": "hello"}]})
}

fn continue_from(id: &str) -> Value {
    json!({"model": "m", "max_tokens": 10,
        "thread": {"type": "continue", "previous_message_id": id},
        "messages": [{"role": "user", "content": "go on"}]})
}

async fn messages(gate: &Gate, body: &Value) -> Answer {
    let headers = [("anthropic-version", "2023-06-01"), ("x-api-key", "k")];
    send(
        "POST",
        &format!("{}/v1/messages", gate.url),
        &headers,
        body.to_string(),
    )
    .await
}

#[tokio::test]
async fn an_answer_id_the_provider_gives_to_two_threads_continues_neither() {
    // Thread 1 declares delete_file; thread 2 does not, and the provider
    // answers both under one id. Continued from that id, thread 2 must not
    // be gated with thread 1's tools.
    let mock = start_mock(vec![
        said("msg_same", "one"),
        said("msg_same", "two"),
        deletes("msg_next"),
    ])
    .await;
    let gate = start_gate_files(
        &mock.base_url(),
        &shipped(&["default.toml"]),
        &messages_upstream(&mock.base_url()),
    )
    .await;
    assert_eq!(
        messages(&gate, &create(&["delete_file", "read_file"]))
            .await
            .status,
        200
    );
    assert_eq!(messages(&gate, &create(&["read_file"])).await.status, 200);
    let next = messages(&gate, &continue_from("msg_same")).await;
    assert!(!next.text().contains("toolu_del"), "{}", next.text());
    assert_eq!(
        next.status,
        404,
        "a lost thread, replayed whole: {}",
        next.text()
    );
    assert_eq!(
        next.json()["error"]["details"]["error_code"],
        "thread_not_found"
    );
    assert_eq!(mock.requests().len(), 2, "the continue never went upstream");
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_record_copied_under_another_answer_in_redis_does_not_open() {
    let port = crate::bin::free_port();
    let Some(_redis) = redis(port).await else {
        return;
    };
    let mock = start_mock(vec![
        said("msg_A", "one"),
        said("msg_B", "two"),
        deletes("msg_next"),
    ])
    .await;
    let extra = format!(
        "{}{}key_prefix = \"copy:\"\n",
        messages_upstream(&mock.base_url()),
        crate::shared_state::shared_records(port)
    );
    let a = start_gate_files(&mock.base_url(), &shipped(&["default.toml"]), &extra).await;
    let b = start_gate_files(&mock.base_url(), &shipped(&["default.toml"]), &extra).await;
    assert_eq!(
        messages(&a, &create(&["delete_file", "read_file"]))
            .await
            .status,
        200
    );
    assert_eq!(messages(&a, &create(&["read_file"])).await.status, 200);
    let (ka, kb) = (
        record_key("copy:", "thread", "msg_A"),
        record_key("copy:", "thread", "msg_B"),
    );
    for _ in 0..100 {
        if keys(port, "copy:thread:*").await == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A Redis writer copies thread 1's sealed facts under thread 2's answer.
    let sealed = get(port, &ka).await.expect("thread 1's facts are shared");
    assert!(set(port, &kb, &sealed).await);
    let next = messages(&b, &continue_from("msg_B")).await;
    assert!(!next.text().contains("toolu_del"), "{}", next.text());
    assert_eq!(next.status, 404, "{}", next.text());
    assert_eq!(mock.requests().len(), 2, "the continue never went upstream");
    a.stop().await;
    b.stop().await;
}
