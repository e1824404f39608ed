//! The data port: HTTP/1.1 and h2c, or TLS with ALPN `h2`/`http/1.1`, on one
//! listener, with graceful drain.
//!
//! Bounded against slow and many peers: a request head (the first one of a
//! new connection that sends nothing included, and an idle keep-alive
//! connection) gets `[limits] header_read_timeout_secs`; at most
//! `max_connections` connections are served (lowered to what the open-file
//! limit allows, raised at start to its hard limit), and one over it is
//! answered 503 with `Retry-After` and closed (given a second for its
//! head); a failing accept (out of file descriptors) backs off, up to a
//! second, and is logged at most every ten seconds. A request head is at
//! most [`MAX_HEAD`] bytes (a longer one is a 431),
//! and until its first head is read a connection is charged that much of
//! `[limits] max_body_bytes_in_flight`: unfinished heads cannot hold more
//! memory than the budget allows (a connection the budget cannot take is
//! answered as one over the cap).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::sniff::{sniff, Proto};
use crate::net::defer::Deferred;
use crate::net::peer::PeerNames;
use crate::net::tls::Certs;
use crate::proxy;
use crate::proxy::state::State;

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest HTTP/1 request head (hyper's `max_header_size`, a 431 past
/// it, and its read buffer's `max_buf_size`; HTTP/2's header list is
/// bounded at 16 KiB by hyper's default).
pub const MAX_HEAD: usize = 32 * 1024;

/// How long a connection over the cap may take to send its request head.
const BUSY_HEAD_TIMEOUT: Duration = Duration::from_secs(1);

/// File descriptors kept for everything but client connections (the
/// audit file, policy files, the admin port, the judge).
const RESERVED_FDS: u64 = 128;

/// Failed accepts are logged at most this often.
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);

/// How connections are served, and how long one may take to send its
/// first request head (hyper's own timeout covers the heads after it, but
/// not the wait for the first bytes, where HTTP/1 and h2 are told apart).
#[derive(Clone)]
struct Builder {
    h1: Arc<http1::Builder>,
    h2: Arc<http2::Builder<TokioExecutor>>,
    first_head: Duration,
}

/// Serves one connection until it ends or the drain cuts it. Without a
/// permit (over `max_connections`) every request is answered 503 and the
/// connection closed.
async fn serve_conn<I>(
    io: I,
    builder: Builder,
    state: Arc<State>,
    watcher: Watcher,
    admitted: Admitted,
    peer: Option<Arc<PeerNames>>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Admitted { permit, head } = admitted;
    let full = permit.is_none();
    let open = state.metrics.open_connections.clone();
    open.inc();
    let asked = Arc::new(AtomicBool::new(false));
    let heard = asked.clone();
    // Given back once the first head is read.
    let head = std::sync::Mutex::new(Some(head));
    let svc = service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
        // The first request gives the head's charge back; later ones find
        // the flag set and take no lock.
        if !heard.swap(true, Ordering::Relaxed) {
            if let Ok(mut h) = head.lock() {
                h.take();
            }
        }
        // The connection's client certificate names, for authentication.
        if let Some(p) = &peer {
            req.extensions_mut().insert(p.clone());
        }
        let st = state.clone();
        // Boxed: hyper keeps a request's handler future in place (the
        // connection's HTTP/1 slot, an HTTP/2 stream's task) for as long
        // as its response streams. Inline, its state (2.9 KiB) would stay
        // allocated through a long stream or a wait for approval; boxed,
        // it is freed once the handler has returned the response. Mapped,
        // not awaited in an `async` block, which would keep the request a
        // second time beside the handler's future.
        let handler: Pin<Box<dyn Future<Output = Result<_, Infallible>> + Send>> = match full {
            false => Box::pin(proxy::handle(st, req).map(Ok::<_, Infallible>)),
            true => Box::pin(std::future::ready(Ok(proxy::busy(req, "connections")))),
        };
        handler
    });
    let deadline = Instant::now() + builder.first_head;
    let sniffed = match tokio::time::timeout_at(deadline, sniff(io)).await {
        Ok(Ok(Some(sniffed))) => Some(sniffed),
        // Closed, failed or silent before its first bytes.
        Ok(Ok(None)) | Ok(Err(_)) | Err(_) => None,
    };
    let ended = match sniffed {
        Some((Proto::H1, io)) => {
            // Pinned here and lent to `drive`: moved into it, the connection
            // (about 900 bytes) would be stored twice in this task, as
            // `drive`'s argument and as its pinned local.
            let conn = std::pin::pin!(watcher.watch(
                builder
                    .h1
                    .serve_connection(TokioIo::new(Deferred::new(io)), svc)
            ));
            drive(conn, deadline, &asked).await
        }
        // Boxed: an h2 connection's state is larger than an HTTP/1 one's,
        // and there are few of them (each carries many streams).
        Some((Proto::H2, io)) => {
            let mut conn = Box::pin(
                watcher.watch(
                    builder
                        .h2
                        .serve_connection(TokioIo::new(Deferred::new(io)), svc),
                ),
            );
            drive(conn.as_mut(), deadline, &asked).await
        }
        None => None,
    };
    if let Some(Err(e)) = ended {
        tracing::debug!(error = %e, "connection ended with an error");
    }
    open.dec();
    drop(permit);
}

/// What a new connection was admitted with: a connection slot (none: over
/// the cap, or the budget could not take its head), and its head's charge
/// to the body budget.
struct Admitted {
    permit: Option<OwnedSemaphorePermit>,
    head: crate::proxy::budget::Charge,
}

impl Admitted {
    fn new(state: &State, slots: &Arc<Semaphore>) -> Admitted {
        let mut head = state.budget.charge();
        let permit = match slots.clone().try_acquire_owned() {
            Err(_) => {
                state.metrics.overloaded("connections");
                None
            }
            Ok(p) if head.grow_to(MAX_HEAD).is_err() => {
                drop(p);
                state.metrics.overloaded("body_bytes");
                None
            }
            Ok(p) => Some(p),
        };
        Admitted { permit, head }
    }
}

/// Serves a connection until it ends; `None` when no request head began by
/// the deadline (the connection is then dropped, which closes it).
async fn drive<C, E>(
    mut conn: Pin<&mut C>,
    deadline: Instant,
    asked: &AtomicBool,
) -> Option<Result<(), E>>
where
    C: Future<Output = Result<(), E>> + ?Sized,
{
    tokio::select! {
        r = conn.as_mut() => Some(r),
        () = tokio::time::sleep_until(deadline) => match asked.load(Ordering::Relaxed) {
            true => Some(conn.await),
            false => None,
        },
    }
}

/// The connection cap: `max_connections`, or fewer when the open-file limit
/// (raised to its hard limit first) leaves room for fewer: each connection
/// may need a second descriptor for its upstream exchange.
fn connection_cap(configured: usize) -> usize {
    let Ok(files) = rlimit::increase_nofile_limit(u64::MAX) else {
        return configured;
    };
    let room = usize::try_from(files.saturating_sub(RESERVED_FDS) / 2).unwrap_or(usize::MAX);
    if room < configured {
        tracing::warn!(
            open_files = files,
            max_connections = room.max(1),
            "the open-file limit allows fewer connections than limits.max_connections"
        );
    }
    configured.min(room).max(1)
}

/// The builder every connection is served with: HTTP/1 head and idle
/// timeouts, HTTP/2 keep-alive pings.
fn conn_builder(header_read_timeout: Duration) -> Builder {
    let mut h1 = http1::Builder::new();
    h1.timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .max_header_size(MAX_HEAD)
        .max_buf_size(MAX_HEAD);
    let mut h2 = http2::Builder::new(TokioExecutor::new());
    h2.timer(TokioTimer::new())
        .keep_alive_interval(header_read_timeout)
        .keep_alive_timeout(Duration::from_secs(20));
    Builder {
        h1: Arc::new(h1),
        h2: Arc::new(h2),
        first_head: header_read_timeout,
    }
}

/// Completes the TLS handshake (bounded), then serves the connection.
async fn serve_tls(
    stream: TcpStream,
    certs: Arc<Certs>,
    builder: Builder,
    state: Arc<State>,
    watcher: Watcher,
    admitted: Admitted,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(certs.config());
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => {
            let peer = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(PeerNames::of)
                .map(Arc::new);
            serve_conn(tls, builder, state, watcher, admitted, peer).await
        }
        Ok(Err(e)) => {
            state.metrics.tls_handshake_failures.inc();
            tracing::debug!(error = %e, "TLS handshake failed");
        }
        Err(_) => tracing::debug!("TLS handshake timed out"),
    }
}

pub async fn serve(
    listener: TcpListener,
    state: Arc<State>,
    certs: Option<Arc<Certs>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let limits = &state.config.limits;
    let builder = conn_builder(limits.header_read_timeout);
    // A connection over the cap gets a second to ask, then its answer.
    let busy = conn_builder(limits.header_read_timeout.min(BUSY_HEAD_TIMEOUT));
    let slots = Arc::new(Semaphore::new(connection_cap(limits.max_connections)));
    let mut backoff = Duration::ZERO;
    let (mut warned, mut failed) = (None::<tokio::time::Instant>, 0u64);
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    backoff = Duration::ZERO;
                    let _ = stream.set_nodelay(true);
                    let admitted = Admitted::new(&state, &slots);
                    let b = match admitted.permit {
                        Some(_) => builder.clone(),
                        None => busy.clone(),
                    };
                    let (st, w) = (state.clone(), graceful.watcher());
                    match &certs {
                        Some(c) => tokio::spawn(serve_tls(stream, c.clone(), b, st, w, admitted)),
                        None => tokio::spawn(serve_conn(stream, b, st, w, admitted, None)),
                    };
                }
                Err(e) => {
                    // Out of descriptors, most likely: wait for some to close
                    // instead of spinning, and say so at most every
                    // ACCEPT_WARN_EVERY (with how many failed meanwhile).
                    failed += 1;
                    if warned.is_none_or(|t| t.elapsed() >= ACCEPT_WARN_EVERY) {
                        tracing::warn!(error = %e, failed, "accept failed; backing off");
                        (warned, failed) = (Some(tokio::time::Instant::now()), 0);
                    }
                    backoff = (backoff * 2).clamp(Duration::from_millis(5), Duration::from_secs(1));
                    tokio::time::sleep(backoff).await;
                }
            },
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    let drain = state.config.listen.drain;
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all connections drained"),
        _ = tokio::time::sleep(drain) => tracing::warn!(secs = drain.as_secs(), "drain timeout; closing remaining connections"),
    }
}
