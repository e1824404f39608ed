//! The provider's HTTP server: answers each request with the next reply (the
//! last one repeats) and records what it was sent.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::Write as _;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_ENCODING, CONTENT_TYPE};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::mpsc;

use super::reply::Reply;
use crate::error::Error;

/// One request the provider received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The request target (path and query).
    pub path: String,
    pub method: http::Method,
    pub version: http::Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// A running provider; it stops accepting connections when dropped.
pub struct Provider {
    pub addr: SocketAddr,
    /// Every request received, in order.
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Set when a streamed body noticed its client had gone.
    pub cancelled: Arc<AtomicBool>,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
    accepting: tokio::task::AbortHandle,
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A response body fed by a task.
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

/// What the provider shares between its connections.
struct Shared {
    seen: Arc<Mutex<Vec<Seen>>>,
    replies: Mutex<VecDeque<Reply>>,
    cancelled: Arc<AtomicBool>,
    keep: usize,
}

impl Provider {
    /// Starts a provider on 127.0.0.1 (a free port) answering with
    /// `replies`; it keeps every request.
    pub async fn start(replies: Vec<Reply>) -> Result<Provider, Error> {
        Provider::serve("127.0.0.1:0", replies, None, usize::MAX).await
    }

    /// The same over TLS (HTTP/1.1 or h2, as the handshake agrees).
    pub async fn start_tls(
        replies: Vec<Reply>,
        tls: Arc<rustls::ServerConfig>,
    ) -> Result<Provider, Error> {
        Provider::serve(
            "127.0.0.1:0",
            replies,
            Some(tokio_rustls::TlsAcceptor::from(tls)),
            usize::MAX,
        )
        .await
    }

    /// Starts a provider on `addr`, over TLS when `tls` is given, keeping
    /// the last `keep` requests.
    pub async fn serve(
        addr: &str,
        replies: Vec<Reply>,
        tls: Option<tokio_rustls::TlsAcceptor>,
        keep: usize,
    ) -> Result<Provider, Error> {
        let listener = crate::net::listen::bind(addr)
            .await
            .map_err(|e| Error::io(format!("mock provider: cannot listen on {addr}"), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("mock provider: local address", e))?;
        let shared = Arc::new(Shared {
            seen: Arc::default(),
            replies: Mutex::new(VecDeque::from(replies)),
            cancelled: Arc::default(),
            keep,
        });
        let connections = Arc::new(AtomicUsize::new(0));
        let (seen, cancelled) = (shared.seen.clone(), shared.cancelled.clone());
        let counted = connections.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                let svc = service_fn(move |req: Request<Incoming>| {
                    let shared = shared.clone();
                    async move { Ok::<_, Infallible>(answer(req, &shared).await) }
                });
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => {
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        }
                        Some(tls) => {
                            let Ok(stream) = tls.accept(stream).await else {
                                return;
                            };
                            let _ =
                                hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                                    .serve_connection(TokioIo::new(stream), svc)
                                    .await;
                        }
                    }
                });
            }
        });
        Ok(Provider {
            addr,
            seen,
            cancelled,
            connections,
            accepting: accepting.abort_handle(),
        })
    }

    /// The base URL an OpenAI-style client is given (`http://ADDR/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Seen> {
        lock(&self.seen).clone()
    }
}

fn gzip(b: &[u8]) -> Option<Bytes> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).ok()?;
    e.finish().ok().map(Bytes::from)
}

/// Follows headers, waits and computations down to a reply that sends bytes.
async fn resolve(mut reply: Reply, seen: &Seen) -> (Reply, Vec<(&'static str, String)>) {
    let mut extra = Vec::new();
    loop {
        reply = match reply {
            Reply::Headed(h, r) => {
                extra.extend(h);
                *r
            }
            Reply::After(d, r) => {
                tokio::time::sleep(d).await;
                *r
            }
            Reply::Computed(f) => f(seen),
            r => return (r, extra),
        }
    }
}

fn set(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let (Ok(k), Ok(v)) = (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(value),
    ) {
        headers.append(k, v);
    }
}

async fn answer(req: Request<Incoming>, shared: &Shared) -> Response<ChanBody> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let seen = Seen {
        path: parts.uri.to_string(),
        method: parts.method,
        version: parts.version,
        headers: parts.headers,
        body,
    };
    if shared.keep > 0 {
        let mut kept = lock(&shared.seen);
        if kept.len() >= shared.keep {
            kept.remove(0);
        }
        kept.push(seen.clone());
    }
    let next = {
        let mut q = lock(&shared.replies);
        match q.len() {
            0 | 1 => q.front().cloned(),
            _ => q.pop_front(),
        }
    };
    let next = next.unwrap_or_else(|| Reply::json(500, r#"{"error":{"message":"no reply"}}"#));
    let (reply, extra) = resolve(next, &seen).await;
    let (tx, rx) = mpsc::channel(16);
    let mut resp = Response::new(ChanBody(rx));
    let sse = HeaderValue::from_static("text/event-stream");
    match reply {
        Reply::Sse {
            body,
            chunk,
            delay,
            reset,
            gzip: gz,
        } => {
            resp.headers_mut().insert(CONTENT_TYPE, sse);
            let body = match gz.then(|| gzip(&body)).flatten() {
                Some(z) => {
                    resp.headers_mut()
                        .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                    z
                }
                None => body,
            };
            let cancelled = shared.cancelled.clone();
            tokio::spawn(async move {
                for piece in body.chunks(chunk.max(1)) {
                    if !delay.is_zero() && !wait_open(&tx, delay).await {
                        cancelled.store(true, Ordering::SeqCst);
                        return;
                    }
                    if tx
                        .send(Ok(Frame::data(body.slice_ref(piece))))
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
            *resp.status_mut() =
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
            let body = match gz.then(|| gzip(&body)).flatten() {
                Some(z) => {
                    resp.headers_mut()
                        .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                    z
                }
                None => body,
            };
            if let Some(e) = encoding {
                resp.headers_mut()
                    .insert(CONTENT_ENCODING, HeaderValue::from_static(e));
            }
            tokio::spawn(async move {
                let _ = tx.send(Ok(Frame::data(body))).await;
            });
        }
        Reply::Paused { before, after, go } => {
            resp.headers_mut().insert(CONTENT_TYPE, sse);
            tokio::spawn(async move {
                let _ = tx.send(Ok(Frame::data(before))).await;
                go.notified().await;
                let _ = tx.send(Ok(Frame::data(after))).await;
            });
        }
        Reply::Paced { body, delay } => {
            resp.headers_mut().insert(CONTENT_TYPE, sse);
            let cancelled = shared.cancelled.clone();
            tokio::spawn(async move {
                let mut rest = body;
                let mut first = true;
                while !rest.is_empty() {
                    let end = memchr::memmem::find(&rest, b"\n\n").map_or(rest.len(), |i| i + 2);
                    let event = rest.split_to(end);
                    if !first && !wait_open(&tx, delay).await {
                        cancelled.store(true, Ordering::SeqCst);
                        return;
                    }
                    first = false;
                    if tx.send(Ok(Frame::data(event))).await.is_err() {
                        cancelled.store(true, Ordering::SeqCst);
                        return;
                    }
                }
            });
        }
        Reply::Headed(..) | Reply::After(..) | Reply::Computed(_) => {
            *resp.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        }
    }
    for (k, v) in extra {
        set(resp.headers_mut(), k, &v);
    }
    resp
}

/// Waits `delay`; false when the body's reader went away meanwhile (the
/// client closed its connection), so that is noticed at once, not at the
/// next send.
async fn wait_open<T>(tx: &mpsc::Sender<T>, delay: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(delay) => true,
        () = tx.closed() => false,
    }
}
