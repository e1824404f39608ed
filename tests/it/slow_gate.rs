//! A gate that takes its time: text is not held back by it, keep-alive comments
//! flow while it works, and the calls of a choice are judged concurrently.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde_json::{json, Value};
use toolgate::call::Call;
use toolgate::context::Context;
use toolgate::gate::{BoxFuture, Gate, Outcome};

use crate::accumulate::Acc;
use crate::support::*;

const DELAY: Duration = Duration::from_millis(400);

struct Slow {
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl Gate for Slow {
    fn name(&self) -> &'static str {
        "slow"
    }
    fn check<'a>(&'a self, call: &'a Call, _ctx: &'a Context) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(DELAY).await;
            self.running.fetch_sub(1, Ordering::SeqCst);
            if call.name == "bad" {
                Outcome::reject("slow_no")
            } else {
                Outcome::allow("slow_ok")
            }
        })
    }
}

/// "Let me look.", then `calls` (id, name, arguments), the finish and `[DONE]`.
fn text_then_calls(calls: &[(&str, &str, &str)]) -> String {
    let mut body = chunk(
        0,
        json!({"role": "assistant", "content": "Let me look."}),
        None,
    );
    for (i, (id, name, args)) in calls.iter().enumerate() {
        body.push_str(&chunk(0, call_delta(i as u32, id, name, args), None));
    }
    body.push_str(&chunk(0, json!({}), Some("tool_calls")));
    body.push_str("data: [DONE]\n\n");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_flows_and_keepalives_are_sent_while_a_slow_gate_works() {
    let body = text_then_calls(&[
        ("c1", "good", "{}"),
        ("c2", "bad", "{}"),
        ("c3", "good", "{\"n\":3}"),
    ]);
    let mock = start_mock(vec![Reply::sse(body)]).await;
    let peak = Arc::new(AtomicUsize::new(0));
    let slow = Slow {
        running: Arc::new(AtomicUsize::new(0)),
        peak: peak.clone(),
    };
    let gate = start_gate_with(
        &mock.base_url(),
        ALLOW_ALL,
        "[stream]\nkeepalive_ms = 100\n",
        vec![Arc::new(slow)],
    )
    .await;

    let start = Instant::now();
    let (_, mut body) = open_stream(&gate, &chat_request(true, &["good", "bad"]), false).await;
    let mut pieces: Vec<(Duration, bytes::Bytes)> = Vec::new();
    while let Some(f) = body.frame().await {
        if let Ok(d) = f.unwrap().into_data() {
            pieces.push((start.elapsed(), d));
        }
    }
    let all: Vec<u8> = pieces.iter().flat_map(|(_, d)| d.to_vec()).collect();
    let text_at = pieces
        .iter()
        .find(|(_, d)| String::from_utf8_lossy(d).contains("Let me look."))
        .unwrap()
        .0;
    let calls_at = pieces
        .iter()
        .find(|(_, d)| String::from_utf8_lossy(d).contains("tool_calls"))
        .unwrap()
        .0;
    assert!(text_at < DELAY / 2, "text waited for the gate: {text_at:?}");
    assert!(
        calls_at >= DELAY,
        "calls released before the gate answered: {calls_at:?}"
    );
    let keepalives = String::from_utf8_lossy(&all).matches(": keepalive").count();
    assert!(
        keepalives >= 2,
        "{keepalives} keep-alives in {}",
        String::from_utf8_lossy(&all)
    );
    let acc = Acc::from_sse(&all);
    let ids: Vec<String> = acc.all_calls().into_iter().map(|c| c.id).collect();
    assert_eq!(ids, ["c1", "c3"]);
    assert_eq!(
        peak.load(Ordering::SeqCst),
        3,
        "the three calls were not judged concurrently"
    );
    assert!(
        calls_at < DELAY * 2,
        "concurrent judging should take about one delay: {calls_at:?}"
    );
    let audit = gate.audit_flushed().await;
    let bad = audit.iter().find(|r| r["call_id"] == "c2").unwrap();
    assert_eq!(
        (bad["gate"].as_str(), bad["reason"].as_str()),
        (Some("slow"), Some("slow_no"))
    );
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_leaves_during_the_gate_still_leaves_a_whole_audit_trail() {
    let body = text_then_calls(&[("c1", "good", "{}"), ("c2", "bad", "{}")]);
    let mock = start_mock(vec![Reply::sse(body)]).await;
    let running = Arc::new(AtomicUsize::new(0));
    let slow = Slow {
        running: running.clone(),
        peak: Arc::new(AtomicUsize::new(0)),
    };
    let gate = start_gate_with(&mock.base_url(), ALLOW_ALL, "", vec![Arc::new(slow)]).await;
    let (_, mut body) = open_stream(&gate, &chat_request(true, &["good", "bad"]), false).await;
    // Read until the text arrives, wait until the gate is at work, and leave.
    loop {
        let f = body.frame().await.unwrap().unwrap();
        if String::from_utf8_lossy(f.data_ref().unwrap()).contains("Let me look.") {
            break;
        }
    }
    for _ in 0..100 {
        if running.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(running.load(Ordering::SeqCst) > 0, "the gate started");
    drop(body);
    tokio::time::sleep(DELAY * 2).await;
    let audit = gate.audit_flushed().await;
    let decided: Vec<(&str, &str)> = audit
        .iter()
        .map(|r| {
            (
                r["call_id"].as_str().unwrap(),
                r["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(decided, [("c1", "allow"), ("c2", "reject")], "{audit:?}");
    gate.stop().await;
}

/// Reads the agent's stream until `want` has arrived, and fails if it would
/// take the upstream's next part to get there (the timeout is only a guard
/// against a hang: `after` is sent only once this returns).
async fn read_until(body: &mut hyper::body::Incoming, seen: &mut Vec<u8>, want: &str) {
    let found = tokio::time::timeout(Duration::from_secs(15), async {
        while !String::from_utf8_lossy(seen).contains(want) {
            match body.frame().await {
                Some(Ok(f)) => seen.extend_from_slice(&f.into_data().unwrap_or_default()),
                _ => return false,
            }
        }
        true
    })
    .await;
    assert_eq!(
        found,
        Ok(true),
        "{want:?} did not arrive before the upstream went on: {}",
        String::from_utf8_lossy(seen)
    );
}

/// Text that arrives while a call is held, or right behind a gated one, goes
/// out at once: the agent sees it before the upstream sends anything more.
/// A chat call is gated at the fragment that completes it, and a Messages
/// call when the next block begins: both come before the text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_after_a_held_call_is_not_held_with_it() {
    let ev = |t: &str, v: Value| format!("event: {t}\ndata: {v}\n\n");
    let cases: Vec<(&str, Value, String, String, &str, bool)> = vec![
        (
            "/v1/chat/completions",
            chat_request(true, &["get_weather"]),
            [
                chunk(0, json!({"role": "assistant", "content": "Checking."}), None),
                chunk(0, call_delta(0, "call_1", "get_weather", "{\"q\":"), None),
                chunk(0, json!({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}), None),
                chunk(0, json!({"content": " Still typing."}), None),
            ]
            .concat(),
            [chunk(0, json!({}), Some("tool_calls")), "data: [DONE]\n\n".into()].concat(),
            "get_weather",
            true,
        ),
        (
            "/v1/messages",
            json!({"model": "claude-test", "max_tokens": 64, "stream": true,
                   "messages": [{"role": "user", "content": "hi"}],
                   "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}]}),
            [
                ev("message_start", json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 1}}})),
                ev("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}})),
                ev("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"q\":1}"}})),
                ev("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
                ev("content_block_start", json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}})),
                ev("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": " Still typing."}})),
            ]
            .concat(),
            [
                ev("content_block_stop", json!({"type": "content_block_stop", "index": 1})),
                ev("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}})),
                ev("message_stop", json!({"type": "message_stop"})),
            ]
            .concat(),
            "toolu_1",
            true,
        ),
    ];
    for (path, req, before, after, call, call_first) in cases {
        let go = Arc::new(tokio::sync::Notify::new());
        let mock = start_mock(vec![Reply::Paused {
            before: before.into(),
            after: after.into(),
            go: go.clone(),
        }])
        .await;
        let extra = if path == "/v1/messages" {
            messages_upstream(&mock.base_url())
        } else {
            String::new()
        };
        let gate = start_gate(&mock.base_url(), ALLOW_ALL, &extra).await;
        let (_, mut body) = open_stream_at(&gate, path, &req, false).await;
        let mut seen = Vec::new();
        read_until(&mut body, &mut seen, "Still typing.").await;
        assert_eq!(
            String::from_utf8_lossy(&seen).contains(call),
            call_first,
            "{path}: {}",
            String::from_utf8_lossy(&seen)
        );
        go.notify_one();
        read_until(&mut body, &mut seen, call).await;
        let all = String::from_utf8_lossy(&seen).into_owned();
        let text_at = all.find("Still typing.").unwrap();
        assert_eq!(
            all.find(call).unwrap() < text_at,
            call_first,
            "{path}: {all}"
        );
        while let Some(Ok(_)) = body.frame().await {}
        gate.stop().await;
    }
}
