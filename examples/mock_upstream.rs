//! A fast local mock provider for load tests: `POST …/chat/completions` answers
//! a fixed stream (`"stream":true`) or a fixed JSON body, from memory.
//!
//! Usage: cargo run --release --example mock_upstream -- 127.0.0.1:9901
//! With `MOCK_EVENT_DELAY_MS=N` the stream's events are sent N ms apart (a
//! slow provider, for `bench/slow_streams.sh`); otherwise all at once.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::convert::Infallible;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> String {
    let v = json!({"id": "chatcmpl-load", "object": "chat.completion.chunk", "created": 1, "model": "mock",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {v}\n\n")
}

/// Ten text deltas, one tool call in three fragments, finish, usage, [DONE].
fn stream_body() -> Bytes {
    let mut s = chunk(json!({"role": "assistant", "content": ""}), None);
    for i in 0..10 {
        s.push_str(&chunk(json!({"content": format!("word{i} ")}), None));
    }
    s.push_str(&chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}), None));
    for a in ["{\"city\":", "\"Paris\"", "}"] {
        s.push_str(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}),
            None,
        ));
    }
    s.push_str(&chunk(json!({}), Some("tool_calls")));
    s.push_str("data: {\"id\":\"chatcmpl-load\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":15,\"total_tokens\":20}}\n\n");
    s.push_str("data: [DONE]\n\n");
    Bytes::from(s)
}

fn json_body() -> Bytes {
    Bytes::from(json!({"id": "chatcmpl-load", "object": "chat.completion", "created": 1, "model": "mock",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Checking.",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 15, "total_tokens": 20}}).to_string())
}

/// The stream's events one by one, `delay` apart.
fn slow(sse: Bytes, delay: Duration) -> BoxBody<Bytes, Infallible> {
    let events: Vec<Bytes> = sse
        .split_inclusive(|&b| b == b'\n')
        .collect::<Vec<_>>()
        .chunks(2)
        .map(|lines| Bytes::from(lines.concat()))
        .collect();
    let s = futures_util::stream::unfold((events, 0usize), move |(ev, i)| async move {
        let next = ev.get(i)?.clone();
        if i > 0 {
            tokio::time::sleep(delay).await;
        }
        Some((Ok::<_, Infallible>(Frame::data(next)), (ev, i + 1)))
    });
    StreamBody::new(s).boxed()
}

#[tokio::main]
async fn main() {
    let delay = std::env::var("MOCK_EVENT_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis);
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9901".into());
    let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
    eprintln!("mock upstream on {}", listener.local_addr().unwrap());
    let (sse, js) = (stream_body(), json_body());
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        let _ = stream.set_nodelay(true);
        let (sse, js) = (sse.clone(), js.clone());
        let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
            let (sse, js) = (sse.clone(), js.clone());
            async move {
                let body = req
                    .into_body()
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let streaming = memchr::memmem::find(&body, b"\"stream\":true").is_some();
                let (ctype, b) = match (streaming, delay) {
                    (true, Some(d)) => ("text/event-stream", slow(sse, d)),
                    (true, None) => ("text/event-stream", Full::new(sse).boxed()),
                    (false, _) => ("application/json", Full::new(js).boxed()),
                };
                let mut r = Response::new(b);
                r.headers_mut()
                    .insert("content-type", ctype.parse().unwrap());
                Ok::<_, Infallible>(r)
            }
        });
        tokio::spawn(async move {
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
