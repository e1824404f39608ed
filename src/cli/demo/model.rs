//! The demo's scripted model: an OpenAI-compatible endpoint on loopback that
//! answers each request by a cue in the last user message, and remembers the
//! tool results it was sent so the demo can show what a model really receives.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::error::Error;

/// What the scripted model says for a cue: text, then at most one tool call.
pub struct Script {
    pub cue: &'static str,
    pub text: &'static str,
    pub call: Option<(&'static str, Value)>,
}

/// The tool results the model received, in order.
#[derive(Clone, Default)]
pub struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    pub fn tool_results(&self) -> Vec<String> {
        match self.0.lock() {
            Ok(v) => v.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
    fn push(&self, s: String) {
        match self.0.lock() {
            Ok(mut v) => v.push(s),
            Err(p) => p.into_inner().push(s),
        }
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let c = json!({
        "id": "chatcmpl-demo", "object": "chat.completion.chunk", "created": 0,
        "model": "scripted-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    format!("data: {c}\n\n")
}

/// The stream a provider would send for this script: role, text in a few
/// pieces, the call's name then its arguments in two fragments, finish, `[DONE]`.
fn stream(s: &Script) -> String {
    let mut out = chunk(json!({"role": "assistant", "content": ""}), None);
    for word in s.text.split_inclusive(' ') {
        out.push_str(&chunk(json!({"content": word}), None));
    }
    let finish = match &s.call {
        Some((name, args)) => {
            let args = args.to_string();
            let (a, b) = args.split_at(args.len() / 2);
            out.push_str(&chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_demo", "type": "function",
                    "function": {"name": name, "arguments": a}}]}),
                None,
            ));
            out.push_str(&chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
                None,
            ));
            "tool_calls"
        }
        None => "stop",
    };
    out.push_str(&chunk(json!({}), Some(finish)));
    out.push_str("data: [DONE]\n\n");
    out
}

fn answer(scripts: &[Script], seen: &Seen, body: &[u8]) -> (u16, &'static str, String) {
    let Ok(req) = serde_json::from_slice::<Value>(body) else {
        return (
            400,
            "application/json",
            r#"{"error":{"message":"bad JSON"}}"#.into(),
        );
    };
    let messages = req["messages"].as_array().cloned().unwrap_or_default();
    for m in &messages {
        if m["role"] == "tool" {
            seen.push(m["content"].as_str().unwrap_or_default().to_string());
        }
    }
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    match scripts.iter().find(|s| last_user.contains(s.cue)) {
        Some(s) => (200, "text/event-stream", stream(s)),
        None => (
            400,
            "application/json",
            r#"{"error":{"message":"no script"}}"#.into(),
        ),
    }
}

/// Serves the scripts on a loopback port until the task is dropped.
pub async fn start(
    scripts: Vec<Script>,
) -> Result<(SocketAddr, Seen, tokio::task::JoinHandle<()>), Error> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::io("demo model: cannot listen", e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("demo model: local addr", e))?;
    let seen = Seen::default();
    let (scripts, seen2) = (Arc::new(scripts), seen.clone());
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (scripts, seen) = (scripts.clone(), seen2.clone());
            let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let (scripts, seen) = (scripts.clone(), seen.clone());
                async move {
                    let body = req
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let (status, ct, text) = answer(&scripts, &seen, &body);
                    let mut resp = hyper::Response::new(Full::new(Bytes::from(text)));
                    *resp.status_mut() =
                        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::BAD_REQUEST);
                    resp.headers_mut().insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static(ct),
                    );
                    Ok::<_, Infallible>(resp)
                }
            });
            tokio::spawn(async move {
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok((addr, seen, task))
}
