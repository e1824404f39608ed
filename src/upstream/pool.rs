//! Upstream connections kept for reuse.
//!
//! An HTTP/1.1 connection is driven by the request that holds it, in the
//! agent's own task: while the response head is awaited, and then by the
//! response body ([`ResponseBody`]), so the frames already in the socket are
//! read in one go instead of one task hop per frame. When the body has ended
//! the connection goes back to the idle list; a body dropped early drops its
//! connection, which cancels the upstream request. An HTTP/2 connection
//! (chosen by TLS ALPN) runs on its own task and is shared by all requests.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use http::{header, HeaderValue, Request, Response, Version};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};

use super::response::ResponseBody;
use super::stream::{Stream, Target};
use super::{fault, UpstreamBody};
use crate::error::Error;

/// How long an idle connection is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How many idle connections are kept; the oldest go first.
const MAX_IDLE: usize = 256;

/// How many of the newest idle connections are kept for [`IDLE_TIMEOUT`];
/// older ones, left over from a burst, only for [`EXCESS_TIMEOUT`]: each
/// holds about 28 KiB of hyper's buffers and channel (heaptrack), and a
/// burst of calls waiting for a person left 256 of them in the pool.
const WARM: usize = 32;

/// How long an idle connection beyond the [`WARM`] newest is kept.
const EXCESS_TIMEOUT: Duration = Duration::from_secs(5);

pub type H1Conn = http1::Connection<TokioIo<Stream>, UpstreamBody>;
type H2 = http2::SendRequest<UpstreamBody>;

/// An HTTP/1.1 connection checked out by one request.
pub struct Held {
    pub tx: http1::SendRequest<UpstreamBody>,
    /// Boxed once per connection: it moves with each request that holds it.
    pub conn: Box<H1Conn>,
}

struct Idle {
    held: Held,
    since: Instant,
}

enum Lease {
    H1 { held: Held, reused: bool },
    H2 { tx: H2, reused: bool },
}

/// A failed send, with the request when it was never written.
type Unsent = (Option<Request<UpstreamBody>>, hyper::Error);

pub struct Pool {
    target: Target,
    idle: Mutex<VecDeque<Idle>>,
    h2: Mutex<Option<H2>>,
}

/// Polls an HTTP/1.1 connection once; one that has ended (closed or failed)
/// is dropped, and whatever waited on it learns why from hyper.
fn drive(conn: &mut Option<Box<H1Conn>>, cx: &mut Context<'_>) {
    if let Some(c) = conn {
        if Pin::new(c.as_mut()).poll(cx).is_ready() {
            *conn = None;
        }
    }
}

/// Whether an idle connection is still open: it has not seen the server
/// close it, and it can take a request.
fn alive(held: &mut Held) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(held.conn.as_mut()).poll(&mut cx).is_pending() && !held.tx.is_closed()
}

impl Pool {
    pub fn new(target: Target) -> Pool {
        Pool {
            target,
            idle: Mutex::new(VecDeque::new()),
            h2: Mutex::new(None),
        }
    }

    /// Sends a request and waits for the response head. A request that a
    /// reused connection could not take (closed meanwhile) is sent once more
    /// on a new connection; one that was written is never sent twice.
    pub async fn send(
        self: &Arc<Self>,
        mut req: Request<UpstreamBody>,
    ) -> Result<Response<ResponseBody>, Error> {
        let mut fresh = false;
        loop {
            let (sent, reused, h2) = match self.lease(fresh).await? {
                Lease::H2 { tx, reused } => (send_h2(tx, req).await, reused, true),
                Lease::H1 { held, reused } => (self.send_h1(held, req).await, reused, false),
            };
            match sent {
                Ok(r) => return Ok(r),
                Err((Some(back), e)) if reused => {
                    tracing::debug!(error = %e, "a kept upstream connection had closed; opening a new one");
                    if h2 {
                        self.forget_h2();
                    }
                    req = back;
                    fresh = true;
                }
                Err((_, e)) => return Err(Error::UpstreamConnect(fault::of(&e), e.to_string())),
            }
        }
    }

    /// An idle connection or the shared HTTP/2 one (unless `fresh`), or a
    /// new one.
    async fn lease(&self, fresh: bool) -> Result<Lease, Error> {
        if !fresh {
            if let Some(held) = self.take_idle() {
                return Ok(Lease::H1 { held, reused: true });
            }
            if let Some(tx) = self.shared_h2() {
                return Ok(Lease::H2 { tx, reused: true });
            }
        }
        let opened = self.target.open().await?;
        let io = TokioIo::new(opened.stream);
        let failed = |e: hyper::Error| Error::UpstreamConnect(fault::of(&e), e.to_string());
        if opened.h2 {
            let (tx, conn) = http2::Builder::new(TokioExecutor::new())
                .handshake(io)
                .await
                .map_err(failed)?;
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "upstream HTTP/2 connection ended");
                }
            });
            if let Ok(mut shared) = self.h2.lock() {
                *shared = Some(tx.clone());
            }
            return Ok(Lease::H2 { tx, reused: false });
        }
        let (tx, conn) = http1::Builder::new().handshake(io).await.map_err(failed)?;
        Ok(Lease::H1 {
            held: Held {
                tx,
                conn: Box::new(conn),
            },
            reused: false,
        })
    }

    fn take_idle(&self) -> Option<Held> {
        let mut idle = self.idle.lock().ok()?;
        while let Some(mut i) = idle.pop_back() {
            if i.since.elapsed() < IDLE_TIMEOUT && alive(&mut i.held) {
                return Some(i.held);
            }
        }
        None
    }

    /// Drops the shared HTTP/2 connection (it is going away).
    fn forget_h2(&self) {
        if let Ok(mut shared) = self.h2.lock() {
            *shared = None;
        }
    }

    fn shared_h2(&self) -> Option<H2> {
        let mut shared = self.h2.lock().ok()?;
        match shared.as_ref() {
            Some(tx) if !tx.is_closed() => Some(tx.clone()),
            _ => {
                *shared = None;
                None
            }
        }
    }

    /// Closes idle connections past [`IDLE_TIMEOUT`] (beyond the [`WARM`]
    /// newest: [`EXCESS_TIMEOUT`]) or closed by the server: without traffic
    /// nothing else would (their sockets and
    /// buffers stayed until the next request). Returns how many are left.
    pub fn sweep(&self) -> usize {
        self.sweep_at(Instant::now())
    }

    /// [`Pool::sweep`] as it would be at `now`.
    pub fn sweep_at(&self, now: Instant) -> usize {
        let Ok(mut idle) = self.idle.lock() else {
            return 0;
        };
        let mut excess = idle.len().saturating_sub(WARM);
        idle.retain_mut(|i| {
            let limit = match excess {
                0 => IDLE_TIMEOUT,
                _ => EXCESS_TIMEOUT,
            };
            excess = excess.saturating_sub(1);
            now.saturating_duration_since(i.since) < limit && alive(&mut i.held)
        });
        idle.len()
    }

    /// Takes back a connection whose response has been read to its end.
    pub fn put_back(&self, mut held: Held) {
        if !alive(&mut held) {
            return;
        }
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        while idle
            .front()
            .is_some_and(|i| i.since.elapsed() >= IDLE_TIMEOUT || idle.len() >= MAX_IDLE)
        {
            idle.pop_front();
        }
        idle.push_back(Idle {
            held,
            since: Instant::now(),
        });
    }

    /// Sends on an HTTP/1.1 connection, driving it until the head arrives.
    /// On failure the request comes back if it was never written.
    async fn send_h1(
        self: &Arc<Self>,
        held: Held,
        mut req: Request<UpstreamBody>,
    ) -> Result<Response<ResponseBody>, Unsent> {
        let Held { mut tx, conn } = held;
        let mut conn = Some(conn);
        let ready = poll_fn(|cx| {
            drive(&mut conn, cx);
            tx.poll_ready(cx)
        })
        .await;
        if let Err(e) = ready {
            return Err((Some(req), e));
        }
        origin_form(&mut req);
        let sent = tx.try_send_request(req);
        let mut sent = std::pin::pin!(sent);
        let resp = poll_fn(|cx| {
            drive(&mut conn, cx);
            sent.as_mut().poll(cx)
        })
        .await;
        match resp {
            Ok(resp) => {
                let held = conn.map(|conn| Held { tx, conn });
                Ok(resp.map(|body| ResponseBody::new(body, held, self.clone())))
            }
            Err(mut e) => {
                let back = e.take_message();
                Err((back, e.into_error()))
            }
        }
    }
}

/// Sends on the shared HTTP/2 connection. A request the connection did not
/// take (it had received a GOAWAY or closed) comes back to be sent on a new
/// one.
async fn send_h2(
    mut tx: H2,
    mut req: Request<UpstreamBody>,
) -> Result<Response<ResponseBody>, Unsent> {
    if let Err(e) = tx.ready().await {
        return Err((Some(req), e));
    }
    *req.version_mut() = Version::HTTP_2;
    match tx.try_send_request(req).await {
        Ok(resp) => Ok(resp.map(ResponseBody::shared)),
        Err(mut e) => {
            let back = e.take_message();
            Err((back, e.into_error()))
        }
    }
}

/// HTTP/1.1 wants the path in the request line and the authority in `Host`.
fn origin_form(req: &mut Request<UpstreamBody>) {
    let host = req
        .uri()
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok());
    if let Some(h) = host {
        req.headers_mut().insert(header::HOST, h);
    }
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    if let Ok(uri) = path.parse() {
        *req.uri_mut() = uri;
    }
}
