//! Bounded under load and against slow peers, over real sockets: a partial
//! head, an idle keep-alive connection and an unfinished body are cut off;
//! over `max_streams` or `max_connections` a clear 503 with `Retry-After`
//! in the path's error shape, never a hang; slow streams holding big
//! arguments stay within the shared budget of bytes held.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

fn addr(gate: &Gate) -> String {
    gate.url.trim_start_matches("http://").to_string()
}

/// Reads until the peer closes (or 10 s pass); what it sent, and how long it took.
async fn read_to_close(s: &mut TcpStream) -> (String, Duration) {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while start.elapsed() < Duration::from_secs(10) {
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), start.elapsed())
}

const LIMITS: &str = "[limits]\nheader_read_timeout_secs = 1\nrequest_body_timeout_secs = 1\n";

#[tokio::test]
async fn a_partial_head_an_idle_connection_and_an_unfinished_body_are_cut_off() {
    let mock = start_mock(vec![Reply::json(200, r#"{"object":"list","data":[]}"#)]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, LIMITS).await;

    let mut partial = TcpStream::connect(addr(&gate)).await.unwrap();
    partial
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let (_, took) = read_to_close(&mut partial).await;
    assert!(
        took < Duration::from_secs(5),
        "a partial head stayed open {took:?}"
    );

    let mut idle = TcpStream::connect(addr(&gate)).await.unwrap();
    idle.write_all(
        b"GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer agent-token\r\n\r\n",
    )
    .await
    .unwrap();
    let (answer, took) = read_to_close(&mut idle).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        took < Duration::from_secs(5),
        "an idle keep-alive stayed open {took:?}"
    );

    let mut slow = TcpStream::connect(addr(&gate)).await.unwrap();
    slow.write_all(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer agent-token\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"model\":",
    )
    .await
    .unwrap();
    let (answer, took) = read_to_close(&mut slow).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive in time"), "{answer}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(
        mock.requests().iter().all(|r| r.path.contains("models")),
        "nothing else went upstream"
    );
}

#[tokio::test]
async fn over_max_streams_a_503_in_the_paths_shape_and_the_held_ones_finish() {
    let go = Arc::new(tokio::sync::Notify::new());
    let paused = Reply::Paused {
        before: chunk(0, serde_json::json!({"content": "a"}), None).into(),
        after: [
            chunk(0, serde_json::json!({}), Some("stop")),
            "data: [DONE]\n\n".into(),
        ]
        .concat()
        .into(),
        go: go.clone(),
    };
    let mock = start_mock(vec![paused]).await;
    let extra = format!(
        "[limits]\nmax_streams = 2\n\n{}",
        messages_upstream(&mock.base_url())
    );
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, &extra).await;
    let body = chat_request(true, &[]);
    let (_, first) = open_stream(&gate, &body, false).await;
    let (_, second) = open_stream(&gate, &body, false).await;

    let live = send("GET", &format!("{}/metrics", gate.admin), &[], "")
        .await
        .text();
    for gauge in ["toolgate_open_streams 2", "toolgate_open_connections 2"] {
        assert!(live.contains(gauge), "{gauge}: {live}");
    }
    let tasks = live
        .lines()
        .find_map(|l| l.strip_prefix("toolgate_runtime_tasks "))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(tasks.is_some_and(|n| n >= 2), "{live}");

    let third = post_chat(&gate, &body).await;
    assert_eq!(third.status, 503, "{}", third.text());
    assert_eq!(third.headers["retry-after"], "1");
    assert_eq!(third.json()["error"]["type"], "server_error");
    let messages = send(
        "POST",
        &format!("{}/v1/messages", gate.url),
        &[
            ("authorization", "Bearer agent-token"),
            ("content-type", "application/json"),
        ],
        r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(messages.status, 503);
    assert_eq!(
        messages.json()["error"]["type"],
        "overloaded_error",
        "{}",
        messages.text()
    );

    go.notify_waiters();
    for b in [first, second] {
        use http_body_util::BodyExt;
        let text = b.collect().await.unwrap().to_bytes();
        assert!(String::from_utf8_lossy(&text).contains("[DONE]"));
    }
    // The slots came back.
    let again = post_chat(&gate, &chat_request(false, &[])).await;
    assert_ne!(again.status, 503, "{}", again.text());
    let metrics = send("GET", &format!("{}/metrics", gate.admin), &[], "")
        .await
        .text();
    assert!(
        metrics.contains(r#"toolgate_overloads_total{limit="streams"} 2"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn over_max_connections_a_503_and_the_connection_closes() {
    let mock = start_mock(vec![Reply::json(200, r#"{"object":"list","data":[]}"#)]).await;
    let gate = start_gate(
        &mock.base_url(),
        ALLOW_ALL,
        "[limits]\nmax_connections = 2\n",
    )
    .await;
    let held = [
        TcpStream::connect(addr(&gate)).await.unwrap(),
        TcpStream::connect(addr(&gate)).await.unwrap(),
    ];
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut over = TcpStream::connect(addr(&gate)).await.unwrap();
    over.write_all(
        b"GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer agent-token\r\n\r\n",
    )
    .await
    .unwrap();
    let (answer, took) = read_to_close(&mut over).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    assert!(
        took < Duration::from_secs(5),
        "the connection closed after its answer"
    );
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"]["message"], "The server is busy. Retry later.");

    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ok = send(
        "GET",
        &format!("{}/v1/models", gate.url),
        &[("authorization", "Bearer agent-token")],
        "",
    )
    .await;
    assert_eq!(ok.status, 200, "a slot is free again: {}", ok.text());
}

#[tokio::test]
async fn a_stalled_upstream_ends_the_stream_closed_and_a_slow_one_does_not() {
    let stalled = Reply::Paused {
        before: [
            chunk(0, serde_json::json!({"content": "thinking"}), None),
            chunk(0, call_delta(0, "call_1", "get_weather", "{\"ci"), None),
        ]
        .concat()
        .into(),
        after: Default::default(),
        go: Arc::new(tokio::sync::Notify::new()),
    };
    // Keep-alive comments and events 400 ms apart: never idle for a second.
    let slow_body = [
        ": keep-alive\n\n".to_string(),
        chunk(0, serde_json::json!({"content": "a"}), None),
        ": keep-alive\n\n".to_string(),
        ": keep-alive\n\n".to_string(),
        one_call_stream("get_weather", "{}"),
    ]
    .concat();
    let slow = Reply::Sse {
        body: slow_body.into(),
        chunk: 200,
        delay: Duration::from_millis(400),
        reset: false,
        gzip: false,
    };
    let mock = start_mock(vec![stalled, slow]).await;
    let gate = start_gate(
        &mock.base_url(),
        ALLOW_ALL,
        "upstream.idle_timeout_secs = 1\n",
    )
    .await;
    let started = Instant::now();
    let a = post_chat(&gate, &chat_request(true, &["get_weather"])).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");
    let text = a.text();
    assert!(text.contains("thinking"), "{text}");
    assert!(
        !text.contains("call_1"),
        "a held call is never released: {text}"
    );
    assert!(
        text.contains("\"error\"") && text.trim_end().ends_with("data: [DONE]"),
        "{text}"
    );

    let b = post_chat(&gate, &chat_request(true, &["get_weather"])).await;
    assert!(b.text().contains("call_1"), "{}", b.text());
}

/// Reads `body` for up to `wait`: what arrived, and whether it ended.
async fn read_for(body: &mut hyper::body::Incoming, wait: Duration) -> (Vec<u8>, bool) {
    use http_body_util::BodyExt;
    let mut got = Vec::new();
    let until = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(until, body.frame()).await {
            Err(_) => return (got, false),
            Ok(None) => return (got, true),
            Ok(Some(f)) => {
                if let Ok(d) = f.unwrap().into_data() {
                    got.extend_from_slice(&d);
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_streams_holding_big_arguments_stay_within_the_shared_budget() {
    const MIB: usize = 1 << 20;
    let go = Arc::new(tokio::sync::Notify::new());
    // A 1 MiB argument, held until its last fragment, which waits for `go`.
    let args = format!("{{\"blob\":\"{}\"", "x".repeat(MIB));
    let paused = Reply::Paused {
        before: chunk(0, call_delta(0, "call_a", "t", &args), None).into(),
        after: [
            chunk(
                0,
                serde_json::json!({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}),
                None,
            ),
            chunk(0, serde_json::json!({}), Some("tool_calls")),
            "data: [DONE]\n\n".into(),
        ]
        .concat()
        .into(),
        go: go.clone(),
    };
    let mock = start_mock(vec![paused]).await;
    let budget = 3 * MIB + MIB / 2;
    let extra = format!(
        "[limits]\nmax_body_bytes_in_flight = {budget}\nmax_tool_args_bytes = {}\nmax_held_args_bytes = {}\n",
        2 * MIB,
        2 * MIB
    );
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, &extra).await;
    let state = gate.running.as_ref().unwrap().state.clone();
    let mut streams = Vec::new();
    for _ in 0..6 {
        streams.push(
            open_stream(&gate, &chat_request(true, &["t"]), false)
                .await
                .1,
        );
    }
    // Three calls fit the budget and are held; the others end at once with
    // an error event, their calls dropped.
    let mut holding = Vec::new();
    for mut s in streams {
        let (got, ended) = read_for(&mut s, Duration::from_secs(1)).await;
        if ended {
            let acc = crate::accumulate::Acc::from_sse(&got);
            assert!(acc.error && acc.all_calls().is_empty());
        } else {
            assert!(got.is_empty(), "nothing goes out before the verdict");
            holding.push(s);
        }
    }
    assert_eq!(holding.len(), 3);
    let free = state.budget.available_bytes();
    assert!(free < budget - 3 * MIB, "{free}");
    let live = send("GET", &format!("{}/metrics", gate.admin), &[], "")
        .await
        .text();
    assert!(
        live.contains(&format!("toolgate_body_bytes_held {}", budget - free)),
        "{live}"
    );
    // Their calls are released once they finish; the budget comes back.
    go.notify_waiters();
    for mut s in holding {
        let (got, ended) = read_for(&mut s, Duration::from_secs(10)).await;
        assert!(ended);
        let acc = crate::accumulate::Acc::from_sse(&got);
        assert!(!acc.error, "{}", String::from_utf8_lossy(&got));
        assert_eq!(acc.all_calls().len(), 1);
    }
    assert_eq!(state.budget.available_bytes(), budget);
    let metrics = send("GET", &format!("{}/metrics", gate.admin), &[], "")
        .await
        .text();
    assert!(
        metrics.contains(r#"toolgate_overloads_total{limit="body_bytes"} 3"#),
        "{metrics}"
    );
}

/// Under `ulimit -n 1024`, 1,100 idle connections: new requests still get
/// an answer (a 503 while the slots are full, then a 200 once the idle ones
/// are cut), and failed accepts back off instead of logging every few ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_low_file_limit_idle_connections_do_not_starve_new_requests() {
    // This process needs room for its own 1,100 connections.
    rlimit::increase_nofile_limit(u64::MAX).unwrap();
    let mock = start_mock(vec![Reply::json(200, r#"{"object":"list","data":[]}"#)]).await;
    let policy = [("00-default.toml", toolgate::policy::DEFAULT_POLICY)];
    let extra = "limits.header_read_timeout_secs = 2";
    let bin = crate::bin::Bin::start_limited(&mock.base_url(), &policy, extra, 1024).await;
    let addr = bin.url.trim_start_matches("http://").to_string();
    let mut idle = Vec::new();
    for _ in 0..1100 {
        let c = tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(&addr)).await;
        if let Ok(Ok(c)) = c {
            idle.push(c);
        }
    }
    assert!(idle.len() > 1024, "{} connected", idle.len());
    let models = format!("{}/v1/models", bin.url);
    let auth = [("authorization", "Bearer agent-token")];
    let (mut statuses, started) = (Vec::new(), Instant::now());
    while started.elapsed() < Duration::from_secs(20) {
        let a = tokio::time::timeout(Duration::from_secs(5), send("GET", &models, &auth, "")).await;
        let status = a.map(|a| a.status.as_u16()).unwrap_or(0);
        statuses.push(status);
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        statuses.last(),
        Some(&200),
        "{statuses:?}\n{}",
        bin.stderr()
    );
    assert!(
        statuses.iter().all(|s| [200, 503].contains(s)),
        "an answer every time: {statuses:?}"
    );
    let log = bin.stderr();
    let failed = log.matches("accept failed").count();
    assert!(failed < 20, "{failed} accept failures logged:\n{log}");
    drop(idle);
}
