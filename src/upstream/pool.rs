//! Upstream connections kept for reuse.
//!
//! An HTTP/1.1 connection ([`h1`], hyper's client connection) is driven by
//! the request that holds it, in the agent's own task: while its response
//! head is awaited, and then by its body ([`ResponseBody`]). When the body has ended exactly the connection goes
//! back to the idle list; a body dropped early drops its connection, which
//! cancels the upstream request. An HTTP/2 connection (chosen by TLS ALPN)
//! is hyper's, runs on its own task and is shared by all requests.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Request, Response, Version};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};

use super::h1::{self, Conn};
use super::response::ResponseBody;
use super::stream::Target;
use super::{fault, UpstreamBody};
use crate::error::Error;

/// How long an idle connection is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How many idle connections are kept unless told otherwise
/// ([`Pool::keep`]); the oldest go first.
const MAX_IDLE: usize = 256;

/// How many of the newest idle connections are kept for [`IDLE_TIMEOUT`];
/// older ones, left over from a burst, only for [`EXCESS_TIMEOUT`]: each
/// holds its socket and an 8 KiB read buffer, and a burst of calls waiting
/// for a person left 256 of them in the pool.
const WARM: usize = 32;

/// How long an idle connection beyond the [`WARM`] newest is kept.
const EXCESS_TIMEOUT: Duration = Duration::from_secs(5);

type H2 = http2::SendRequest<UpstreamBody>;

/// Streams one HTTP/2 connection carries at once; more open another
/// connection. A server must allow at least 100 (RFC 9113 §6.5.2) and may
/// allow no more: hyper's client queues a request over the server's limit
/// until a stream ends, and a paced stream lasts as long as the model
/// writes. hyper does not say what the server announced, so this is the
/// number every server allows.
const H2_STREAMS: usize = 100;

/// A shared HTTP/2 connection and how many of its streams are open.
struct Shared {
    tx: H2,
    open: Arc<AtomicUsize>,
}

/// One open stream of a shared HTTP/2 connection, counted until dropped
/// (with the response body, or with a request that failed).
pub(super) struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

struct Idle {
    conn: Box<Conn>,
    since: Instant,
}

enum Lease {
    H1(Box<Conn>),
    H2 { tx: H2, reused: bool, slot: Slot },
}

/// A failed send, with the request when it was never written.
type Unsent = (Option<Request<UpstreamBody>>, hyper::Error);

pub struct Pool {
    target: Target,
    /// Most idle connections kept.
    max_idle: AtomicUsize,
    idle: Mutex<VecDeque<Idle>>,
    h2: Mutex<Vec<Shared>>,
    /// Held while a connection that may speak HTTP/2 is opened.
    opening: tokio::sync::Mutex<()>,
    /// A TLS connection chose HTTP/1.1, or HTTP/2 is not offered:
    /// connections open side by side.
    only_h1: AtomicBool,
    /// The last connection opened in turn failed.
    open_failed: AtomicBool,
}

impl Pool {
    pub fn new(target: Target) -> Pool {
        // Without HTTP/2 offered, every connection is HTTP/1.1.
        let only_h1 = !target.offers_h2();
        Pool {
            target,
            max_idle: AtomicUsize::new(MAX_IDLE),
            idle: Mutex::new(VecDeque::new()),
            h2: Mutex::new(Vec::new()),
            opening: tokio::sync::Mutex::new(()),
            only_h1: AtomicBool::new(only_h1),
            open_failed: AtomicBool::new(false),
        }
    }

    /// Keeps up to `n` idle connections (at least [`WARM`]). Streams that
    /// start together end together: when a thousand end within a few
    /// milliseconds, each connection must wait in the pool until the
    /// agent's next request takes it, or that request opens a new one.
    /// With the cap under the streams in flight, a cohort of paced streams
    /// reopened three in four of its connections on every turn, and the
    /// opening was most of the added tail (`docs/PERFORMANCE.md`). Those
    /// beyond the [`WARM`] newest still close after [`EXCESS_TIMEOUT`].
    pub fn keep(&self, n: usize) {
        self.max_idle.store(n.max(WARM), Ordering::Relaxed);
    }

    /// Sends a request and waits for the response head. HTTP/2 connections
    /// are shared, [`H2_STREAMS`] streams each. A request the
    /// shared HTTP/2 connection could not take (going away, closed) is sent
    /// once more on a new connection; one that was written is never sent
    /// twice. A kept HTTP/1.1 connection is checked before it is used.
    pub async fn send(
        self: &Arc<Self>,
        mut req: Request<UpstreamBody>,
    ) -> Result<Response<ResponseBody>, Error> {
        let mut fresh = false;
        loop {
            let (tx, reused, slot) = match self.lease(fresh).await? {
                Lease::H1(conn) => return self.send_h1(conn, req).await,
                Lease::H2 { tx, reused, slot } => (tx, reused, slot),
            };
            let open = slot.0.clone();
            match send_h2(tx, req, slot).await {
                Ok(r) => return Ok(r),
                Err((Some(back), e)) if reused => {
                    tracing::debug!(error = %e, "the shared upstream HTTP/2 connection had closed; opening a new one");
                    self.forget_h2(&open);
                    req = back;
                    fresh = true;
                }
                Err((_, e)) => return Err(Error::UpstreamConnect(fault::of(&e), e.to_string())),
            }
        }
    }

    /// An idle connection or a shared HTTP/2 one (unless `fresh`), or a
    /// new one. Where HTTP/2 may be spoken (not [`Pool::only_h1`]: TLS with
    /// HTTP/2 offered, until a connection chose HTTP/1.1), connections open
    /// one at a time and a request that waited for its turn looks again
    /// first: a burst of requests shares the connection the first of them
    /// opened, instead of each opening its own.
    async fn lease(&self, fresh: bool) -> Result<Lease, Error> {
        if !fresh {
            if let Some(lease) = self.kept() {
                return Ok(lease);
            }
        }
        let turn = match !self.only_h1.load(Ordering::Relaxed) {
            true => Some(self.opening.lock().await),
            false => None,
        };
        if !fresh && turn.is_some() {
            if let Some(lease) = self.kept() {
                return Ok(lease);
            }
        }
        // After a failed open the others do not queue behind each other's
        // connect timeouts, and once a connection chose HTTP/1.1 those that
        // waited meanwhile need one each: both open side by side.
        let _turn = turn.filter(|_| {
            !self.open_failed.load(Ordering::Relaxed) && !self.only_h1.load(Ordering::Relaxed)
        });
        let opened = self.target.open().await;
        self.open_failed.store(opened.is_err(), Ordering::Relaxed);
        let opened = opened?;
        if !opened.h2 {
            self.only_h1.store(true, Ordering::Relaxed);
        }
        if opened.h2 {
            let failed = |e: hyper::Error| Error::UpstreamConnect(fault::of(&e), e.to_string());
            let (tx, conn) = http2::Builder::new(TokioExecutor::new())
                .handshake(TokioIo::new(opened.stream))
                .await
                .map_err(failed)?;
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "upstream HTTP/2 connection ended");
                }
            });
            let open = Arc::new(AtomicUsize::new(1));
            if let Ok(mut shared) = self.h2.lock() {
                shared.push(Shared {
                    tx: tx.clone(),
                    open: open.clone(),
                });
            }
            return Ok(Lease::H2 {
                tx,
                reused: false,
                slot: Slot(open),
            });
        }
        Ok(Lease::H1(Conn::new(opened.stream).await?))
    }

    /// An idle HTTP/1.1 connection or a shared HTTP/2 one.
    fn kept(&self) -> Option<Lease> {
        if let Some(conn) = self.take_idle() {
            return Some(Lease::H1(conn));
        }
        let (tx, slot) = self.shared_h2()?;
        Some(Lease::H2 {
            tx,
            reused: true,
            slot,
        })
    }

    fn take_idle(&self) -> Option<Box<Conn>> {
        let mut idle = self.idle.lock().ok()?;
        while let Some(mut i) = idle.pop_back() {
            if i.since.elapsed() < IDLE_TIMEOUT && i.conn.alive() {
                return Some(i.conn);
            }
        }
        None
    }

    /// Drops a shared HTTP/2 connection (it is going away), known by its
    /// stream count.
    fn forget_h2(&self, open: &Arc<AtomicUsize>) {
        if let Ok(mut shared) = self.h2.lock() {
            shared.retain(|c| !Arc::ptr_eq(&c.open, open));
        }
    }

    /// A shared HTTP/2 connection with a stream to spare, the stream
    /// counted; closed connections are dropped on the way.
    fn shared_h2(&self) -> Option<(H2, Slot)> {
        let mut shared = self.h2.lock().ok()?;
        shared.retain(|c| !c.tx.is_closed());
        let c = shared
            .iter()
            .find(|c| c.open.load(Ordering::Relaxed) < H2_STREAMS)?;
        c.open.fetch_add(1, Ordering::Relaxed);
        Some((c.tx.clone(), Slot(c.open.clone())))
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
            now.saturating_duration_since(i.since) < limit && i.conn.alive()
        });
        idle.len()
    }

    /// Takes back a connection whose response has been read to its end.
    pub fn put_back(&self, mut conn: Box<Conn>) {
        if !conn.alive() {
            return;
        }
        let max = self.max_idle.load(Ordering::Relaxed);
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        while idle
            .front()
            .is_some_and(|i| i.since.elapsed() >= IDLE_TIMEOUT || idle.len() >= max)
        {
            idle.pop_front();
        }
        idle.push_back(Idle {
            conn,
            since: Instant::now(),
        });
    }

    /// Sends on an HTTP/1.1 connection and reads the response head.
    async fn send_h1(
        self: &Arc<Self>,
        conn: Box<Conn>,
        req: Request<UpstreamBody>,
    ) -> Result<Response<ResponseBody>, Error> {
        let (head, reader) = h1::send(conn, req).await?;
        let body = ResponseBody::h1(reader, self.clone());
        Ok(head.map(|()| body))
    }
}

/// Sends on the shared HTTP/2 connection. A request the connection did not
/// take (it had received a GOAWAY or closed) comes back to be sent on a new
/// one.
async fn send_h2(
    mut tx: H2,
    mut req: Request<UpstreamBody>,
    slot: Slot,
) -> Result<Response<ResponseBody>, Unsent> {
    if let Err(e) = tx.ready().await {
        return Err((Some(req), e));
    }
    *req.version_mut() = Version::HTTP_2;
    match tx.try_send_request(req).await {
        Ok(resp) => Ok(resp.map(|b| ResponseBody::shared(b, slot))),
        Err(mut e) => {
            let back = e.take_message();
            Err((back, e.into_error()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A pool to a local listener that accepts and keeps every connection.
    async fn pool() -> (Pool, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                open.push(s);
            }
        });
        let authority: http::uri::Authority = addr.to_string().parse().unwrap();
        let target = Target::new(&authority, None, Duration::from_secs(5), true).unwrap();
        (Pool::new(target), held)
    }

    /// Opens `n` new connections, each put back; how many are kept.
    async fn fill(pool: &Pool, n: usize) -> usize {
        for _ in 0..n {
            let Lease::H1(conn) = pool.lease(true).await.unwrap() else {
                unreachable!("plain TCP is HTTP/1.1")
            };
            pool.put_back(conn);
        }
        pool.sweep()
    }

    #[tokio::test]
    async fn keeps_as_many_idle_connections_as_it_is_told() {
        let (p, held) = pool().await;
        // Returned together, as a cohort of streams that ended at once:
        // all are kept for the requests that follow.
        p.keep(300);
        let mut conns = Vec::new();
        for _ in 0..300 {
            let Lease::H1(c) = p.lease(true).await.unwrap() else {
                unreachable!()
            };
            conns.push(c);
        }
        for c in conns {
            p.put_back(c);
        }
        assert_eq!(p.sweep(), 300);
        // Beyond the cap the oldest go.
        assert_eq!(fill(&p, 20).await, 300);
        held.abort();
        // Never fewer than the warm ones.
        let (p, held) = pool().await;
        p.keep(0);
        assert_eq!(fill(&p, WARM + 5).await, WARM);
        held.abort();
    }
}
