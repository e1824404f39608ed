//! How a wait for approval ends besides an answer: the agent leaving, a
//! shutdown, too many waiting, monitor mode; and the upstream connection a
//! waiting call gives back.

use std::time::Duration;

use serde_json::{json, Value};

use crate::accumulate::Acc;
use crate::approval::*;
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_shutting_down_and_overflow_end_in_neutral_failures() {
    let mock = start_mock(vec![answer_with(&[("pay", "call_1", ARGS)])]).await;
    let extra = format!("{}max_pending = 1\n", approval_config(30.0));
    let gate = start_gate(&mock.base_url(), ASK, &extra).await;
    // The agent leaves: its question is withdrawn and audited as `left`.
    let (_, body) = open_stream(&gate, &request(true), false).await;
    let q = pending(&gate, 1).await;
    drop(body);
    for _ in 0..200 {
        if list(&gate).await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        list(&gate).await.is_empty(),
        "the question outlived its agent"
    );
    assert_eq!(approve(&gate, &q[0]).await, 409);
    // One waits; a second over max_pending fails closed at once.
    let waiting = spawn_chat(&gate, request(false));
    pending(&gate, 1).await;
    let over = post(&gate, &request(false)).await;
    assert!(
        Acc::from_json(&over.body).all_calls().is_empty(),
        "{}",
        over.text()
    );
    // Shutdown ends the waiting call with a neutral turn.
    let stopping = tokio::spawn(gate.stop());
    let a = waiting.await.unwrap();
    assert_eq!(a.status, 200);
    assert!(
        Acc::from_json(&a.body).all_calls().is_empty(),
        "{}",
        a.text()
    );
    let dir = stopping.await.unwrap();
    let audit: Vec<Value> = std::fs::read_to_string(dir.0.join("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r| !crate::support::trail_record(r))
        .collect();
    let mut ends: Vec<String> = approval_records(&audit)
        .iter()
        .map(|r| r["approval"]["decision"].as_str().unwrap().to_string())
        .collect();
    ends.sort_unstable();
    assert_eq!(ends, ["full", "left", "shutdown"], "{audit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_mode_audits_the_ask_and_releases_at_once() {
    let mock = start_mock(vec![answer_with(&[("pay", "call_1", ARGS)])]).await;
    let extra = format!("{}[policy]\nmode = \"monitor\"\n", approval_config(30.0));
    let gate = start_gate(&mock.base_url(), ASK, &extra).await;
    let a = post(&gate, &request(false)).await;
    assert_eq!(Acc::from_json(&a.body).all_calls().len(), 1, "{}", a.text());
    let audit = gate.audit_flushed().await;
    assert!(
        audit
            .iter()
            .any(|r| r["verdict"] == "ask" && r["mode"] == "monitor"),
        "{audit:?}"
    );
    assert!(approval_records(&audit).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_gives_its_upstream_connection_back() {
    let mock = start_mock(vec![
        answer_with(&[("pay", "call_1", ARGS)]),
        answer_with(&[("lookup", "call_2", "{}")]),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), ASK, &approval_config(30.0)).await;
    let (_, mut body) = open_stream(&gate, &request(true), false).await;
    let q = pending(&gate, 1).await;
    // The rest of upstream's answer is read while the call waits, so its
    // connection serves the next request instead of waiting with the call.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let other = post(&gate, &request(false)).await;
    assert_eq!(Acc::from_json(&other.body).all_calls()[0].name, "lookup");
    assert_eq!(
        mock.connections.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the waiting call kept its upstream connection"
    );
    assert_eq!(approve(&gate, &q[0]).await, 200);
    let mut wire = Vec::new();
    while let Some(f) = try_frame(&mut body).await {
        wire.extend(f);
    }
    assert_eq!(Acc::from_sse(&wire).all_calls()[0].id, "call_1");
    assert!(String::from_utf8_lossy(&wire).ends_with("data: [DONE]\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_leaving_a_whole_response_withdraws_its_question() {
    use tokio::io::AsyncWriteExt;
    let mock = start_mock(vec![answer_with(&[("pay", "call_1", ARGS)])]).await;
    let gate = start_gate(&mock.base_url(), ASK, &approval_config(30.0)).await;
    let body = request(false).to_string();
    let addr = gate.url.trim_start_matches("http://").to_string();
    let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!("POST /v1/chat/completions HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
    sock.write_all(format!("{head}{body}").as_bytes())
        .await
        .unwrap();
    pending(&gate, 1).await;
    drop(sock);
    for _ in 0..200 {
        if list(&gate).await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        list(&gate).await.is_empty(),
        "the question outlived its agent"
    );
    // The record of a wait the agent abandoned is written beside it.
    let mut ends = Vec::new();
    for _ in 0..100 {
        let audit = gate.audit_flushed().await;
        ends = approval_records(&audit)
            .iter()
            .map(|r| r["approval"]["decision"].clone())
            .collect();
        if !ends.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(ends, [json!("left")]);
}
