//! The mock provider for tests: toolgate's own scripted provider
//! ([`toolgate::mock`]) with what only tests need, replies computed from
//! the request's JSON and recorded fixtures replayed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::accumulate::Acc;

pub use toolgate::mock::{Provider as Mock, Reply, Seen};

use super::*;

/// Computes a mock answer (status, JSON body) from the request body.
pub type Responder = Arc<dyn Fn(&Value) -> (u16, String) + Send + Sync>;

/// Starts a mock provider answering with `replies` in turn (the last one repeats).
pub async fn start_mock(replies: Vec<Reply>) -> Mock {
    Mock::start(replies).await.unwrap()
}

/// The same over TLS (HTTP/1.1 or h2, as the handshake agreed).
pub async fn start_mock_tls(replies: Vec<Reply>, tls: Arc<rustls::ServerConfig>) -> Mock {
    Mock::start_tls(replies, tls).await.unwrap()
}

/// A reply computed by `f` from the request's JSON, after `delay`: a JSON
/// body with its status, or an event stream when the body starts with
/// `data:` or `event:`.
pub fn func(f: Responder, delay: Duration) -> Reply {
    let computed = Reply::computed(move |seen| {
        let (status, b) = f(&serde_json::from_slice(&seen.body).unwrap_or(Value::Null));
        match b.starts_with("data:") || b.starts_with("event:") {
            true => Reply::sse(b),
            false => Reply::json(status, b),
        }
    });
    match delay.is_zero() {
        true => computed,
        false => Reply::After(delay, Box::new(computed)),
    }
}

/// The recorded fixture named by the last user message `fixture:NAME`,
/// streamed in pieces of `chunk` bytes or whole, as the request asks.
pub fn fixture(chunk: usize) -> Reply {
    Reply::computed(move |seen| {
        fixture_reply(
            &serde_json::from_slice(&seen.body).unwrap_or(Value::Null),
            chunk,
        )
    })
}

fn fixture_reply(req: &Value, chunk: usize) -> Reply {
    let msgs = req["messages"]
        .as_array()
        .or(req["input"].as_array())
        .cloned()
        .unwrap_or_default();
    let name = msgs
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .or(req["input"].as_str())
        .and_then(|c| c.strip_prefix("fixture:"))
        .unwrap_or("missing")
        .to_string();
    let path = fixtures_dir().unwrap().join(&name);
    let body = Bytes::from(std::fs::read(&path).unwrap_or_else(|e| panic!("{name}: {e}")));
    let stream = req["stream"].as_bool().unwrap_or(false);
    if name.ends_with(".json") {
        return Reply::json(200, body);
    }
    if stream {
        return Reply::Sse {
            body,
            chunk,
            delay: Duration::ZERO,
            reset: false,
            gzip: false,
        };
    }
    if req.get("input").is_some() {
        // A Responses stream's non-streamed equivalent: its final response.
        return Reply::json(200, responses_final(&body).to_string());
    }
    if name.starts_with("anthropic-messages") {
        // A Messages stream's non-streamed equivalent: the message it builds.
        let r =
            crate::messages_reader::Reader::read(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
        return Reply::json(200, r.message().to_string());
    }
    let acc = Acc::from_sse(&body);
    if acc.error {
        // A provider that fails mid-stream fails a non-streaming call with a status.
        return Reply::json(
            400,
            r#"{"error":{"message":"tool_use_failed: get_something_by_name","code":"tool_use_failed"}}"#,
        );
    }
    Reply::json(200, acc.to_completion().to_string())
}

/// Twenty text deltas, one call `t`, finish and `[DONE]`, sent 200 bytes at a
/// time `delay` apart: a stream still in flight for a while.
pub fn slow_text_then_call(delay: Duration) -> Reply {
    let mut body = String::new();
    for i in 0..20 {
        body.push_str(&chunk(0, json!({"content": format!("{i} ")}), None));
    }
    body.push_str(&chunk(0, call_delta(0, "c", "t", "{}"), None));
    body.push_str(&chunk(0, json!({}), Some("tool_calls")));
    body.push_str("data: [DONE]\n\n");
    Reply::Sse {
        body: body.into(),
        chunk: 200,
        delay,
        reset: false,
        gzip: false,
    }
}
