//! A small HTTP client for the tests: requests to a toolgate, answers
//! read whole or as a stream.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use super::*;

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub async fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Answer {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut req = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(body.into())).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(30), client.request(req))
        .await
        .expect("timed out")
        .unwrap();
    let (parts, body) = resp.into_parts();
    let body = tokio::time::timeout(Duration::from_secs(30), body.collect())
        .await
        .expect("body timed out")
        .unwrap()
        .to_bytes();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

pub async fn post_chat(gate: &Gate, body: &Value) -> Answer {
    send(
        "POST",
        &format!("{}/v1/chat/completions", gate.url),
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer agent-token"),
        ],
        body.to_string(),
    )
    .await
}

/// Posts a streaming chat request and returns the response body unread, for
/// tests that watch frames arrive (or stop reading).
pub async fn open_stream(gate: &Gate, body: &Value, http2: bool) -> (http::Version, Incoming) {
    open_stream_at(gate, "/v1/chat/completions", body, http2).await
}

/// The same at `path`.
pub async fn open_stream_at(
    gate: &Gate,
    path: &str,
    body: &Value,
    http2: bool,
) -> (http::Version, Incoming) {
    let mut b = Client::builder(TokioExecutor::new());
    b.http2_only(http2);
    let client: Client<_, Full<Bytes>> = b.build_http();
    let req = Request::post(format!("{}{path}", gate.url))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    (resp.version(), resp.into_body())
}

/// Posts a chat request to `path` (e.g. `/v1/chat/completions`) with extra headers.
pub async fn post_chat_at(
    gate: &Gate,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> Answer {
    let mut h = vec![("content-type", "application/json")];
    h.extend_from_slice(headers);
    send("POST", &format!("{}{path}", gate.url), &h, body.to_string()).await
}

/// The status of a GET, or `None` when nothing answers (yet).
pub async fn try_get(url: &str) -> Option<u16> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let req = client.get(url.parse().ok()?);
    match tokio::time::timeout(Duration::from_secs(2), req).await {
        Ok(Ok(r)) => Some(r.status().as_u16()),
        _ => None,
    }
}
