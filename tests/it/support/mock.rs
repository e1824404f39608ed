//! The mock provider on 127.0.0.1:0: replays recorded bodies, or what a
//! test scripts ([`Reply`]), and records what it was sent.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::accumulate::Acc;

use super::*;

/// Computes a mock answer (status, JSON body) from the request body.
pub type Responder = Arc<dyn Fn(&Value) -> (u16, String) + Send + Sync>;

/// What the mock provider answers.
#[derive(Clone)]
pub enum Reply {
    /// An SSE body sent in pieces of `chunk` bytes, `delay` apart; `reset` ends it with a broken connection.
    Sse {
        body: Bytes,
        chunk: usize,
        delay: Duration,
        reset: bool,
        gzip: bool,
    },
    /// A body with a status and content type.
    Body {
        status: u16,
        content_type: &'static str,
        body: Bytes,
        gzip: bool,
        encoding: Option<&'static str>,
    },
    /// The fixture named by the last user message `fixture:NAME` (SSE or JSON by the request's `stream`).
    Fixture { chunk: usize },
    /// Computed from the request body: (status, JSON body, or an SSE body
    /// when it starts with `data:` or `event:`), after a delay.
    Func(Responder, Duration),
    /// An SSE body sent in two parts: `after` only once `go` is notified.
    Paused {
        before: Bytes,
        after: Bytes,
        go: Arc<tokio::sync::Notify>,
    },
    /// Another reply with these response headers added.
    Headed(Vec<(&'static str, String)>, Box<Reply>),
}

impl Reply {
    pub fn sse(body: impl Into<Bytes>) -> Reply {
        Reply::Sse {
            body: body.into(),
            chunk: 64,
            delay: Duration::ZERO,
            reset: false,
            gzip: false,
        }
    }
    pub fn json(status: u16, body: impl Into<Bytes>) -> Reply {
        Reply::Body {
            status,
            content_type: "application/json",
            body: body.into(),
            gzip: false,
            encoding: None,
        }
    }
}

/// One request the mock received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub version: http::Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

pub struct Mock {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Set when a streamed body noticed its client had gone.
    pub cancelled: Arc<AtomicBool>,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
}

struct ChanBody(mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>);

impl Body for ChanBody {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx)
    }
}

fn gzip(b: &[u8]) -> Bytes {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    Bytes::from(e.finish().unwrap())
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

impl Mock {
    /// Starts a mock that answers every request with `reply` (or the queued replies in turn).
    pub async fn start(replies: Vec<Reply>) -> Mock {
        Mock::start_on(replies, None).await
    }

    /// The same over TLS (HTTP/1.1 or h2, as the handshake agreed).
    pub async fn start_tls(replies: Vec<Reply>, tls: Arc<rustls::ServerConfig>) -> Mock {
        Mock::start_on(replies, Some(tokio_rustls::TlsAcceptor::from(tls))).await
    }

    async fn start_on(replies: Vec<Reply>, tls: Option<tokio_rustls::TlsAcceptor>) -> Mock {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let cancelled = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicUsize::new(0));
        let (s, r, c, n) = (
            seen.clone(),
            replies.clone(),
            cancelled.clone(),
            connections.clone(),
        );
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = l.accept().await else {
                    return;
                };
                n.fetch_add(1, Ordering::SeqCst);
                let (s, r, c) = (s.clone(), r.clone(), c.clone());
                let svc = service_fn(move |req: Request<Incoming>| {
                    let (s, r, c) = (s.clone(), r.clone(), c.clone());
                    async move { Ok::<_, Infallible>(Mock::answer(req, s, r, c).await) }
                });
                let tls = tls.clone();
                tokio::spawn(async move {
                    let Some(tls) = tls else {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                        return;
                    };
                    let Ok(stream) = tls.accept(stream).await else {
                        return;
                    };
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
                });
            }
        });
        Mock {
            addr,
            seen,
            cancelled,
            connections,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    async fn answer(
        req: Request<Incoming>,
        seen: Arc<Mutex<Vec<Seen>>>,
        replies: Arc<Mutex<VecDeque<Reply>>>,
        cancelled: Arc<AtomicBool>,
    ) -> Response<ChanBody> {
        let (parts, body) = req.into_parts();
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        seen.lock().unwrap().push(Seen {
            path: parts.uri.to_string(),
            version: parts.version,
            headers: parts.headers,
            body: body.clone(),
        });
        let reply = {
            let mut q = replies.lock().unwrap();
            if q.len() > 1 {
                q.pop_front().unwrap()
            } else {
                q.front().cloned().unwrap()
            }
        };
        let (reply, extra) = match reply {
            Reply::Headed(h, r) => (*r, h),
            r => (r, Vec::new()),
        };
        let reply = match reply {
            Reply::Fixture { chunk } => {
                fixture_reply(&serde_json::from_slice(&body).unwrap_or(Value::Null), chunk)
            }
            Reply::Func(f, delay) => {
                tokio::time::sleep(delay).await;
                let (status, b) = f(&serde_json::from_slice(&body).unwrap_or(Value::Null));
                // A computed event stream goes out as one.
                match b.starts_with("data:") || b.starts_with("event:") {
                    true => Reply::sse(b),
                    false => Reply::json(status, b),
                }
            }
            r => r,
        };
        let (tx, rx) = mpsc::channel(16);
        let mut resp = Response::new(ChanBody(rx));
        match reply {
            Reply::Sse {
                body,
                chunk,
                delay,
                reset,
                gzip: gz,
            } => {
                resp.headers_mut()
                    .insert("content-type", "text/event-stream".parse().unwrap());
                let body = if gz {
                    resp.headers_mut()
                        .insert("content-encoding", "gzip".parse().unwrap());
                    gzip(&body)
                } else {
                    body
                };
                tokio::spawn(async move {
                    for piece in body.chunks(chunk.max(1)) {
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        if tx
                            .send(Ok(Frame::data(Bytes::copy_from_slice(piece))))
                            .await
                            .is_err()
                        {
                            cancelled.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                    if reset {
                        // Let what was sent reach the wire before the connection breaks.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let _ = tx.send(Err(std::io::Error::other("reset"))).await;
                    }
                });
            }
            Reply::Body {
                status,
                content_type,
                body,
                gzip: gz,
                encoding,
            } => {
                *resp.status_mut() = StatusCode::from_u16(status).unwrap();
                resp.headers_mut()
                    .insert("content-type", content_type.parse().unwrap());
                let body = if gz { gzip(&body) } else { body };
                if gz {
                    resp.headers_mut()
                        .insert("content-encoding", "gzip".parse().unwrap());
                }
                if let Some(e) = encoding {
                    resp.headers_mut()
                        .insert("content-encoding", e.parse().unwrap());
                }
                tokio::spawn(async move {
                    let _ = tx.send(Ok(Frame::data(body))).await;
                });
            }
            Reply::Paused { before, after, go } => {
                resp.headers_mut()
                    .insert("content-type", "text/event-stream".parse().unwrap());
                tokio::spawn(async move {
                    let _ = tx.send(Ok(Frame::data(before))).await;
                    go.notified().await;
                    let _ = tx.send(Ok(Frame::data(after))).await;
                });
            }
            Reply::Fixture { .. } | Reply::Func(..) | Reply::Headed(..) => unreachable!(),
        }
        for (k, v) in extra {
            resp.headers_mut().append(k, v.parse().unwrap());
        }
        resp
    }
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
