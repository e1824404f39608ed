//! Replicas sharing state in a real Redis (Debian's `redis-server`, started
//! here on a free port): a `[[limit]]` holds across three toolgate
//! binaries behind a round-robin front; with Redis gone, a limited call
//! fails closed with its reason audited while unlimited calls flow, or is
//! counted on the replica (`on_error = "local"`), and service comes back
//! with Redis, without a restart; over TLS; a Responses follow-up and a
//! Messages thread continue on another replica, and records forged in
//! Redis are not read; an approval asked on one
//! replica (a binary) is decided on another, a forged one is not taken, and
//! a killed replica's question leaves the list.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::accumulate::Acc;
use crate::support::*;

/// A `redis-server` on `port`, without persistence; killed when dropped.
pub struct Redis(Child);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

use crate::approval_ui::tool;

/// Starts Redis on `port` and waits until it answers (`None`: a skip,
/// never in CI, when `redis-server` is not installed).
pub async fn redis(port: u16) -> Option<Redis> {
    let Some(bin) = tool("redis-server") else {
        assert!(
            std::env::var("CI").is_err(),
            "CI must provide redis-server (Debian: redis-server)"
        );
        eprintln!("SKIPPED: no redis-server (Debian: apt-get install redis-server)");
        return None;
    };
    let child = Command::new(bin)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let r = Redis(child);
    for _ in 0..100 {
        if ping(port).await {
            return Some(r);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("redis-server did not answer on {port}");
}

async fn ping(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let mut buf = [0u8; 16];
    s.write_all(b"PING\r\n").await.is_ok()
        && matches!(s.read(&mut buf).await, Ok(n) if buf[..n].starts_with(b"+PONG"))
}

/// A provider whose model calls `read_notes` (limited) when asked for
/// notes, else `get_weather` (not limited).
fn provider() -> Reply {
    func(
        Arc::new(|req: &Value| {
            let asked = req["messages"].to_string();
            let tool = if asked.contains("notes") {
                "read_notes"
            } else {
                "get_weather"
            };
            let call = json!({"id": "call_1", "type": "function", "function": {"name": tool, "arguments": "{}"}});
            (200, json!({"id": "c", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [call]}}]}).to_string())
        }),
        Duration::ZERO,
    )
}

fn ask(what: &str) -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": what}],
        "tools": [{"type": "function", "function": {"name": "read_notes", "parameters": {"type": "object"}}},
                  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})
}

async fn released(gate: &Gate, what: &str) -> Vec<String> {
    released_at(&gate.url, what).await
}

/// The calls released to an agent at `url` (a replica or the front).
async fn released_at(url: &str, what: &str) -> Vec<String> {
    let a = send(
        "POST",
        &format!("{url}/v1/chat/completions"),
        &[("content-type", "application/json")],
        ask(what).to_string(),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    Acc::from_json(&a.body)
        .all_calls()
        .into_iter()
        .map(|c| c.name)
        .collect()
}

/// A round-robin front for `replicas`: each connection it accepts goes to
/// the next replica (the agent's client opens one per request).
async fn front(replicas: &[String]) -> String {
    let to: Vec<String> = replicas
        .iter()
        .map(|u| u.trim_start_matches("http://").to_string())
        .collect();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        for n in 0.. {
            let Ok((mut inbound, _)) = l.accept().await else {
                return;
            };
            let next = to[n % to.len()].clone();
            tokio::spawn(async move {
                if let Ok(mut out) = tokio::net::TcpStream::connect(next).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                }
            });
        }
    });
    format!("http://{addr}")
}

/// A replica with a limit of 4/minute on `read_notes`, its state in Redis.
async fn replica(upstream: &Mock, port: u16, prefix: &str, on_error: &str) -> Gate {
    let url = format!("redis://127.0.0.1:{port}");
    replica_at(
        upstream,
        &url,
        &format!("key_prefix = \"{prefix}\"\non_error = \"{on_error}\"\n"),
    )
    .await
}

/// A replica with that limit, its `[state]` in Redis at `url` with `more`
/// keys. Its timeout leaves room for a TLS handshake on a loaded 2-core CI
/// machine (at 200 ms every call of the TLS test once failed closed there).
async fn replica_at(upstream: &Mock, url: &str, more: &str) -> Gate {
    let mut files = shipped(&["default.toml"]);
    files.push((
        "50-limit.toml".into(),
        "[[limit]]\nmatch = \"read_notes\"\nkey = \"global\"\nrate = \"4/minute\"\n".into(),
    ));
    let state = format!("[state]\nbackend = \"redis\"\nurl = \"{url}\"\ntimeout_ms = 1000\n{more}");
    start_gate_files(&upstream.base_url(), &files, &state).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_holds_across_three_replicas() {
    let port = crate::bin::free_port();
    let Some(_redis) = redis(port).await else {
        return;
    };
    let upstream = start_mock(vec![provider()]).await;
    // Three toolgate binaries, one Redis, one front.
    let state = format!(
        "[state]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:{port}\"\nkey_prefix = \"across:\"\n"
    );
    let files = [
        (
            "00-default.toml",
            include_str!("../../policies/default.toml"),
        ),
        (
            "50-limit.toml",
            "[[limit]]\nmatch = \"read_notes\"\nkey = \"global\"\nrate = \"4/minute\"\n",
        ),
    ];
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(crate::bin::Bin::start(&upstream.base_url(), &files, &state).await);
    }
    let urls: Vec<String> = replicas.iter().map(|r| r.url.clone()).collect();
    let url = front(&urls).await;
    let mut allowed = 0;
    for _ in 0..9 {
        allowed += released_at(&url, "read my notes").await.len();
    }
    assert_eq!(allowed, 4, "4/minute across the replicas, not on each");
    let (mut limited, mut served) = (0, Vec::new());
    for r in &mut replicas {
        assert!(r.terminate().await);
        let audit = r.audit();
        limited += audit
            .iter()
            .filter(|e| e["reason"] == "rate_limited")
            .count();
        served.push(audit.len());
    }
    assert_eq!(limited, 5);
    assert_eq!(served, [3, 3, 3], "the front took the replicas in turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_limited_calls_fail_closed_others_flow_and_service_comes_back() {
    let port = crate::bin::free_port();
    let Some(redis_up) = redis(port).await else {
        return;
    };
    let upstream = start_mock(vec![provider()]).await;
    let gate = replica(&upstream, port, "outage:", "fail_closed").await;
    assert_eq!(released(&gate, "read my notes").await, ["read_notes"]);

    drop(redis_up);
    assert!(released(&gate, "read my notes").await.is_empty());
    assert_eq!(
        released(&gate, "the weather").await,
        ["get_weather"],
        "a call that needs no shared state flows"
    );
    let audit = gate.audit_flushed().await;
    let down = &audit[1];
    assert_eq!(
        (down["reason"].as_str(), down["verdict"].as_str()),
        (Some("state_unavailable"), Some("reject")),
        "{down}"
    );
    let why = down["signals"]["rate.error"]["value"]
        .as_str()
        .unwrap_or("");
    assert!(why.starts_with("shared state unavailable"), "{why}");
    assert!(
        !why.contains("127.0.0.1"),
        "the URL stays out of the audit: {why}"
    );
    let m = metrics(&gate).await;
    assert!(
        m.contains(r#"toolgate_state_errors_total{op="limit",then="fail_closed"}"#),
        "{m}"
    );

    // Redis returns (empty: no persistence); the same replica serves again.
    let _redis = redis(port).await;
    let mut back = false;
    for _ in 0..40 {
        if released(&gate, "read my notes").await == ["read_notes"] {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(back, "service did not recover when Redis returned");
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_error_local_counts_on_the_replica_while_redis_is_gone() {
    let port = crate::bin::free_port();
    // No Redis at all: every count falls back to the replica's own.
    let upstream = start_mock(vec![provider()]).await;
    let gate = replica(&upstream, port, "local:", "local").await;
    let mut allowed = 0;
    for _ in 0..6 {
        allowed += released(&gate, "read my notes").await.len();
    }
    assert_eq!(allowed, 4, "the replica's own count still holds the limit");
    let audit = gate.audit_flushed().await;
    assert!(audit[0]["signals"]["rate.error"]["value"].is_string());
    assert_eq!(audit[5]["reason"], "rate_limited");
    let m = metrics(&gate).await;
    assert!(
        m.contains(r#"toolgate_state_errors_total{op="limit",then="local"} 6"#),
        "{m}"
    );
    gate.stop().await;
}

/// What a replica's admin port reports.
async fn metrics(gate: &Gate) -> String {
    send("GET", &format!("{}/metrics", gate.admin), &[], "")
        .await
        .text()
}

/// Runs one command in Redis on `port`, as anything with access could: the
/// start of its reply.
pub async fn command(port: u16, args: &[&str]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return String::new();
    };
    let mut cmd = format!("*{}\r\n", args.len());
    for a in args {
        cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    let mut buf = [0u8; 64];
    if s.write_all(cmd.as_bytes()).await.is_err() {
        return String::new();
    }
    let n = s.read(&mut buf).await.unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Sets `key` to `value` in Redis on `port`.
pub async fn set(port: u16, key: &str, value: &str) -> bool {
    command(port, &["SET", key, value]).await.starts_with("+OK")
}

/// The key of a record of `kind` about `id` under `prefix`, as toolgate
/// names it (a digest of the id).
pub fn record_key(prefix: &str, kind: &str, id: &str) -> String {
    let hex = toolgate::digest::sha256_hex(id.as_bytes());
    format!("{prefix}{kind}:{}", &hex[..32])
}

/// How many keys under `pattern` Redis on `port` holds.
pub async fn keys(port: u16, pattern: &str) -> usize {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return 0;
    };
    let cmd = format!("*2\r\n$4\r\nKEYS\r\n${}\r\n{pattern}\r\n", pattern.len());
    let mut buf = vec![0u8; 65536];
    if s.write_all(cmd.as_bytes()).await.is_err() {
        return 0;
    }
    let n = s.read(&mut buf).await.unwrap_or(0);
    // `*N\r\n…`: the count of the array.
    String::from_utf8_lossy(&buf[..n])
        .strip_prefix('*')
        .and_then(|r| r.split("\r\n").next())
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The config of replicas sharing records in Redis on `port`: one fence
/// secret for all of them (the records are sealed under it) and the
/// `[state]` table, open for a `key_prefix`.
pub fn shared_records(port: u16) -> String {
    std::env::set_var(
        "TG_IT_RECORDS_FENCE_KEY",
        "fence-key-the-replicas-share-9876543210",
    );
    format!(
        "[fence]\nkey_env = \"TG_IT_RECORDS_FENCE_KEY\"\n\n[state]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:{port}\"\n"
    )
}

fn function_call_response(id: &str, call_id: &str, name: &str) -> Value {
    json!({"id": id, "object": "response", "status": "completed", "output": [
        {"id": format!("fc_{call_id}"), "type": "function_call", "status": "completed", "call_id": call_id, "name": name, "arguments": "{}"}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responses_follow_up_on_another_replica_answers_the_withheld_call() {
    let port = crate::bin::free_port();
    let Some(redis_up) = redis(port).await else {
        return;
    };
    let done = json!({"id": "resp_B", "object": "response", "status": "completed", "output": [
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "ok", "annotations": []}]}
    ]});
    let mock = start_mock(vec![
        Reply::json(
            200,
            function_call_response("resp_A", "call_X", "shell").to_string(),
        ),
        Reply::json(200, done.to_string()),
        Reply::json(200, done.to_string()),
    ])
    .await;
    let state = format!("{}key_prefix = \"resp:\"\n", shared_records(port));
    let a = start_gate(&mock.base_url(), &deny(&["shell"]), &state).await;
    let b = start_gate(&mock.base_url(), &deny(&["shell"]), &state).await;
    let first = post_chat_at(
        &a,
        "/v1/responses",
        &json!({"model": "m", "input": "clean up", "tools": [{"type": "function", "name": "shell"}]}),
        &[],
    )
    .await;
    assert!(!first.text().contains("call_X"), "{}", first.text());
    // Written in the background: wait for the record to land.
    for _ in 0..50 {
        if keys(port, "resp:withheld:*").await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let follow = json!({"model": "m", "previous_response_id": "resp_A", "input": "and now?"});
    let next = post_chat_at(&b, "/v1/responses", &follow, &[]).await;
    assert_eq!(next.status, 200, "{}", next.text());
    let seen: Value = serde_json::from_slice(&mock.requests()[1].body).unwrap();
    assert_eq!(seen["input"][0]["type"], "function_call_output", "{seen}");
    assert_eq!(
        seen["input"][0]["call_id"], "call_X",
        "the other replica answered the withheld call"
    );

    // Redis gone: a follow-up the replica knows nothing of fails closed
    // (503, retry later); the replica that served the response still knows.
    drop(redis_up);
    let c = start_gate(&mock.base_url(), &deny(&["shell"]), &state).await;
    let refused = post_chat_at(&c, "/v1/responses", &follow, &[]).await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert!(refused.text().contains("Retry later"), "{}", refused.text());
    let known = post_chat_at(&a, "/v1/responses", &follow, &[]).await;
    assert_eq!(known.status, 200, "{}", known.text());
    for g in [a, b, c] {
        g.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_forged_in_redis_neither_redirect_a_follow_up_nor_answer_a_call() {
    let port = crate::bin::free_port();
    let Some(_redis) = redis(port).await else {
        return;
    };
    let done = json!({"id": "resp_B", "object": "response", "status": "completed", "output": []});
    let mock = start_mock(vec![
        Reply::json(
            200,
            function_call_response("resp_A", "call_X", "shell").to_string(),
        ),
        Reply::json(200, done.to_string()),
    ])
    .await;
    let state = format!("{}key_prefix = \"forge:\"\n", shared_records(port));
    let a = start_gate(&mock.base_url(), &deny(&["shell"]), &state).await;
    let b = start_gate(&mock.base_url(), &deny(&["shell"]), &state).await;
    let tools = json!([{"type": "function", "name": "shell"}]);
    let first = post_chat_at(
        &a,
        "/v1/responses",
        &json!({"model": "m", "input": "clean up", "tools": tools}),
        &[],
    )
    .await;
    assert!(!first.text().contains("call_X"), "{}", first.text());
    let withheld = record_key("forge:", "withheld", "resp_A");
    for _ in 0..50 {
        if keys(port, &withheld).await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The record holds no call id in the clear.
    let item = command(port, &["LINDEX", &withheld, "0"]).await;
    assert!(item.starts_with('$') && !item.contains("call_X"), "{item}");
    // What anything with access to Redis could write: a rename of resp_A to
    // another response, and one more call of resp_A to answer.
    let renamed = record_key("forge:", "renamed", "resp_A");
    assert!(set(port, &renamed, "resp_EVIL").await);
    let forged = r#"["call_FORGED","function"]"#;
    assert!(command(port, &["RPUSH", &withheld, forged])
        .await
        .starts_with(':'));
    let follow = json!({"model": "m", "previous_response_id": "resp_A", "input": "and now?"});
    let next = post_chat_at(&b, "/v1/responses", &follow, &[]).await;
    assert_eq!(next.status, 200, "{}", next.text());
    let seen: Value = serde_json::from_slice(&mock.requests()[1].body).unwrap();
    assert_eq!(seen["previous_response_id"], "resp_A", "{seen}");
    let answered: Vec<&Value> = seen["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| &i["call_id"])
        .collect();
    assert_eq!(
        answered,
        [&json!("call_X")],
        "only the sealed record counts: {seen}"
    );
    let m = metrics(&b).await;
    assert!(
        m.contains(r#"toolgate_state_errors_total{op="recall",then="ignored"} 2"#),
        "{m}"
    );
    for g in [a, b] {
        g.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_asked_on_one_replica_is_decided_on_another_and_a_dead_replicas_leaves_the_list(
) {
    use crate::approval::{
        answer_with, approval_config, approve, list, pending, post_to, request, ARGS, ASK, TOKEN,
        TOKEN_ENV,
    };
    let port = crate::bin::free_port();
    let Some(_redis) = redis(port).await else {
        return;
    };
    let upstream = start_mock(vec![answer_with(&[("pay", "call_1", ARGS)])]).await;
    let extra = format!(
        "{}[state]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:{port}\"\nkey_prefix = \"ask:\"\n",
        approval_config(30.0)
    );
    // A: the toolgate binary (killed below); B: another replica.
    let a = crate::bin::Bin::start_env(
        &upstream.base_url(),
        &[
            (
                "00-default.toml",
                include_str!("../../policies/default.toml"),
            ),
            ("10-ask.toml", ASK),
        ],
        &extra,
        &[(TOKEN_ENV, TOKEN)],
    )
    .await;
    let mut files = shipped(&["default.toml"]);
    files.push(("10-ask.toml".into(), ASK.into()));
    let b = start_gate_files(&upstream.base_url(), &files, &extra).await;

    let url = a.url.clone();
    let asked = tokio::spawn(async move { post_to(&url, &request(false)).await });
    let q = pending(&b, 1).await;
    assert_eq!(q[0]["tool"], "pay", "B lists the question A holds: {q:?}");
    // The list lives as long as the question (30 s and a beat's 4): what a
    // replica that died left on it goes with it.
    let ttl = command(port, &["PTTL", "ask:approvals"]).await;
    let ms: i64 = ttl.trim_start_matches(':').trim().parse().unwrap_or(-1);
    assert!((30_000..=34_000).contains(&ms), "{ttl}");
    // An answer written into Redis by anything but a replica (unsigned) is
    // not taken: after several of A's looks the question still waits.
    let id = q[0]["id"].as_str().unwrap();
    let key = record_key("ask:", "decision", id);
    let forged = r#"00.{"approve":true,"by":"mallory","channel":"api","session":false}"#;
    assert!(set(port, &key, forged).await);
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(list(&b).await.len(), 1, "a forged answer approved the call");
    assert!(
        q[0]["request"].is_null(),
        "the user's message is not shared"
    );
    assert_eq!(approve(&b, &q[0]).await, 200);
    let answered = asked.await.unwrap();
    let calls: Vec<String> = Acc::from_json(&answered.body)
        .all_calls()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(calls, ["pay"], "approved on B, released through A");
    // Settled on A: a second answer on B is a conflict, as it is on A.
    let mut second = 0;
    for _ in 0..50 {
        second = approve(&b, &q[0]).await;
        if second == 409 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(second, 409, "answered once");

    // A dies with a call waiting: the question leaves B's list.
    let url = a.url.clone();
    let waiting = tokio::spawn(async move { post_to(&url, &request(false)).await });
    pending(&b, 1).await;
    drop(a);
    let _ = waiting.await;
    let mut gone = false;
    for _ in 0..100 {
        if list(&b).await.is_empty() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        gone,
        "a dead replica's question stayed pending: {:?}",
        list(&b).await
    );
    b.stop().await;
}

/// A Messages answer calling `get_weather`, under `id`.
fn weather_message(id: &str) -> String {
    json!({"id": id, "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "tool_use", "id": format!("toolu_{id}"), "name": "get_weather", "input": {"city": "Paris"}}],
        "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_messages_thread_created_on_one_replica_continues_on_another() {
    let port = crate::bin::free_port();
    let Some(_redis) = redis(port).await else {
        return;
    };
    let mock = start_mock(vec![
        Reply::json(200, weather_message("msg_01")),
        Reply::json(200, weather_message("msg_02")),
    ])
    .await;
    // One fence secret for both replicas: the facts are sealed under it.
    std::env::set_var(
        "TG_IT_SHARED_FENCE_KEY",
        "fence-key-both-replicas-share-0123456789",
    );
    let extra = format!(
        "{}[fence]\nkey_env = \"TG_IT_SHARED_FENCE_KEY\"\n\n[state]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:{port}\"\nkey_prefix = \"thr:\"\n",
        messages_upstream(&mock.base_url())
    );
    let a = start_gate_files(&mock.base_url(), &shipped(&["default.toml"]), &extra).await;
    let b = start_gate_files(&mock.base_url(), &shipped(&["default.toml"]), &extra).await;
    let headers = [("anthropic-version", "2023-06-01"), ("x-api-key", "k")];
    let create = json!({"model": "m", "max_tokens": 10, "thread": {"type": "create"},
        "system": "You check the weather for the user.",
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "weather in Paris?"}]});
    let first = send(
        "POST",
        &format!("{}/v1/messages", a.url),
        &headers,
        create.to_string(),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert!(first.text().contains("toolu_msg_01"), "{}", first.text());
    for _ in 0..50 {
        if keys(port, "thr:thread:*").await >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sealed = keys(port, "thr:thread:*").await;
    assert_eq!(sealed, 1, "the thread's facts are in Redis");
    let go_on = json!({"model": "m", "max_tokens": 10,
        "thread": {"type": "continue", "previous_message_id": "msg_01"},
        "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_msg_01", "content": "sunny"}]}]});
    let next = send(
        "POST",
        &format!("{}/v1/messages", b.url),
        &headers,
        go_on.to_string(),
    )
    .await;
    assert_eq!(next.status, 200, "B knows A's thread: {}", next.text());
    assert!(
        next.text().contains("toolu_msg_02"),
        "the call is released: B gates with the tools A's request declared: {}",
        next.text()
    );
    // A replica with another fence secret cannot open the facts: a lost
    // thread (404), which the SDK recovers from by replaying.
    std::env::set_var(
        "TG_IT_OTHER_FENCE_KEY",
        "another-fence-key-0123456789-abcdef",
    );
    let other = start_gate_files(
        &mock.base_url(),
        &shipped(&["default.toml"]),
        &extra.replace("TG_IT_SHARED_FENCE_KEY", "TG_IT_OTHER_FENCE_KEY"),
    )
    .await;
    let lost = send(
        "POST",
        &format!("{}/v1/messages", other.url),
        &headers,
        go_on.to_string(),
    )
    .await;
    assert_eq!(lost.status, 404, "{}", lost.text());
    for g in [a, b, other] {
        g.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_reach_redis_over_tls_verified_against_a_ca_file() {
    if tool("redis-server").is_none() {
        let _ = redis(0).await; // the skip (or CI's failure) with its message
        return;
    }
    let dir = TempDir::new();
    let made = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["certs", "dev", "--out"])
        .arg(&dir.0)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let port = crate::bin::free_port();
    let pem = |f: &str| dir.0.join(f).display().to_string();
    let child = Command::new(tool("redis-server").unwrap())
        .args([
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--tls-port", &port.to_string(), "--tls-auth-clients", "no"])
        .args([
            "--tls-cert-file",
            &pem("server.pem"),
            "--tls-key-file",
            &pem("server-key.pem"),
        ])
        .args(["--tls-ca-cert-file", &pem("ca.pem")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _redis = Redis(child);
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let upstream = start_mock(vec![provider()]).await;
    let url = format!("rediss://localhost:{port}");
    let more = format!("key_prefix = \"tls:\"\nca_file = \"{}\"\n", pem("ca.pem"));
    let mut replicas = Vec::new();
    for _ in 0..2 {
        replicas.push(replica_at(&upstream, &url, &more).await);
    }
    let mut allowed = 0;
    for i in 0..6 {
        allowed += released(&replicas[i % 2], "read my notes").await.len();
    }
    assert_eq!(allowed, 4, "one limit across the replicas, over TLS");
    // Without the CA the server's certificate is not trusted: fail closed.
    let untrusting = replica_at(&upstream, &url, "key_prefix = \"tls:\"\n").await;
    assert!(released(&untrusting, "read my notes").await.is_empty());
    let audit = untrusting.audit_flushed().await;
    assert_eq!(audit[0]["reason"], "state_unavailable", "{}", audit[0]);
    replicas.push(untrusting);
    for r in replicas {
        r.stop().await;
    }
}

/// A record written with a version is never replaced by an older one: a
/// write that lands late (a replica's background write of an earlier
/// turn) leaves the newest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_versioned_record_keeps_the_newest_of_writes_landing_out_of_order() {
    let port = crate::bin::free_port();
    let Some(_redis) = redis(port).await else {
        return;
    };
    let cfg = toolgate::config::State {
        backend: toolgate::config::Backend::Redis,
        url: format!("redis://127.0.0.1:{port}"),
        key_prefix: "versions:".into(),
        on_error: toolgate::config::OnError::FailClosed,
        timeout: std::time::Duration::from_secs(2),
        ca_file: None,
    };
    let s = toolgate::state::Shared::new(&cfg).unwrap().unwrap();
    let ttl = std::time::Duration::from_secs(60);
    assert!(s.put_newer("c", "conv_1", (2, "two:x"), ttl).await.unwrap());
    assert!(!s.put_newer("c", "conv_1", (1, "one"), ttl).await.unwrap());
    assert!(!s.put_newer("c", "conv_1", (2, "again"), ttl).await.unwrap());
    assert_eq!(
        s.get_versioned("c", "conv_1").await.unwrap(),
        Some((2, "two:x".to_string()))
    );
    assert!(s.put_newer("c", "conv_1", (3, "three"), ttl).await.unwrap());
    assert_eq!(
        s.get_versioned("c", "conv_1").await.unwrap(),
        Some((3, "three".to_string()))
    );
    assert_eq!(s.get_versioned("c", "none").await.unwrap(), None);
}
