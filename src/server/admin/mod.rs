//! The admin port: `/healthz`, `/readyz`, `/metrics`, `/audit/head` (the
//! audit trail's head, to check it against later), `POST /reload`
//! (load the policy files now, as SIGHUP does; it needs `[admin]
//! token_env`'s token) and the approvals API (`/approvals…`, in
//! `approvals.rs`, with its own token).
//!
//! As bounded as the data port, and never at its expense: at most `[admin]
//! max_connections` connections (the admin port cannot take the
//! descriptors the data port keeps room for), each given `[limits]
//! header_read_timeout_secs` (10 s at most) for every request head and a
//! minute in all. One over the cap ends the oldest idle connection and
//! takes its place ([`idle`]), so idle or slow connections cannot keep a
//! health probe out; with none idle it is closed at once. Every request's
//! `Host` must name this port ([`guard`]).

mod guard;
mod idle;

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::time::Duration;

use hyper_util::rt::TokioTimer;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::proxy::state::State;
use guard::{Guard, Refusal};

/// The longest an admin connection is served (its requests are short).
const LIFETIME: Duration = Duration::from_secs(60);

/// How long a connection over the cap waits for the slot of the idle
/// connection it ended.
const MAKE_ROOM: Duration = Duration::from_secs(1);

/// The longest wait for a request head on the admin port.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

fn refused(why: Refusal) -> (StatusCode, &'static str, Bytes) {
    let (status, text): (_, &'static [u8]) = match why {
        Refusal::Host => (
            StatusCode::MISDIRECTED_REQUEST,
            b"the Host header names no address of this port ([admin] hosts)\n",
        ),
        Refusal::NoToken => (
            StatusCode::FORBIDDEN,
            b"state changes need a token: set [admin] token_env's variable\n",
        ),
        Refusal::Token => (StatusCode::UNAUTHORIZED, b"a bearer token is required\n"),
    };
    (status, "text/plain", Bytes::from_static(text))
}

fn respond(
    req: &Request<Incoming>,
    state: &State,
    ready: &AtomicBool,
    guard: &Guard,
) -> Response<Full<Bytes>> {
    let (status, ctype, body) = match req.uri().path() {
        "/reload" if req.method() == http::Method::POST => match guard.token(req.headers()) {
            Ok(()) => {
                if req.uri().query() == Some("drops=apply") {
                    state
                        .reload_drops_asked
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                }
                state.reload_requested.notify_one();
                (
                    StatusCode::ACCEPTED,
                    "text/plain",
                    Bytes::from_static(b"reload requested\n"),
                )
            }
            Err(why) => refused(why),
        },
        "/healthz" => (StatusCode::OK, "text/plain", Bytes::from_static(b"ok\n")),
        "/audit/head" => {
            let head = state.audit.head();
            let v = serde_json::json!({"seq": head.seq, "hash": head.hash,
                "head": head.to_string(), "keyed": state.audit.keyed()});
            (
                StatusCode::OK,
                "application/json",
                Bytes::from(v.to_string()),
            )
        }
        "/readyz" if ready.load(Ordering::Acquire) => {
            (StatusCode::OK, "text/plain", Bytes::from_static(b"ready\n"))
        }
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            Bytes::from_static(b"not ready\n"),
        ),
        "/metrics" => {
            let limits = &state.config.limits;
            let streams = limits
                .max_streams
                .saturating_sub(state.streams.available_permits());
            let tasks = tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks();
            let held =
                (state.budget.capacity_bytes()).saturating_sub(state.budget.available_bytes());
            let text = state.metrics.render_live(streams, tasks, held);
            (
                StatusCode::OK,
                crate::metrics::CONTENT_TYPE,
                Bytes::from(text),
            )
        }
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            Bytes::from_static(b"not found\n"),
        ),
    };
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    if let Ok(v) = ctype.parse() {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

async fn answer(
    req: Request<Incoming>,
    state: &State,
    ready: &AtomicBool,
    guard: &Guard,
) -> Response<Full<Bytes>> {
    if let Err(why) = guard.host(req.headers()) {
        let (status, ctype, body) = refused(why);
        let mut r = Response::new(Full::new(body));
        *r.status_mut() = status;
        r.headers_mut()
            .insert(header::CONTENT_TYPE, http::HeaderValue::from_static(ctype));
        return r;
    }
    match super::approvals::owns(req.uri().path()) {
        true => super::approvals::handle(req, state).await,
        false => respond(&req, state, ready, guard),
    }
}

pub async fn serve(
    listener: TcpListener,
    state: Arc<State>,
    ready: Arc<AtomicBool>,
    mut shutdown: watch::Receiver<bool>,
) {
    let guard = Arc::new(Guard::new(&state.config.admin));
    let slots = Arc::new(Semaphore::new(state.config.admin.max_connections));
    let idle = Arc::new(idle::Idle::default());
    let head = state.config.limits.header_read_timeout.min(HEAD_TIMEOUT);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(head);
    let builder = Arc::new(builder);
    loop {
        tokio::select! {
            r = listener.accept() => {
                let Ok((stream, _)) = r else {
                    // Out of descriptors, say: let them come back.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let (slots, idle) = (slots.clone(), idle.clone());
                let (st, rd, g) = (state.clone(), ready.clone(), guard.clone());
                let builder = builder.clone();
                tokio::spawn(async move {
                    // Over the cap: the oldest idle connection makes room,
                    // or, with none idle, this one is closed at once.
                    let slot = match slots.clone().try_acquire_owned() {
                        Ok(s) => s,
                        Err(_) if idle.end_oldest() => {
                            match tokio::time::timeout(MAKE_ROOM, slots.acquire_owned()).await {
                                Ok(Ok(s)) => s,
                                _ => return,
                            }
                        }
                        Err(_) => return,
                    };
                    let place = Arc::new(idle.join());
                    let ended = place.ended.clone();
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let (st, rd, g, place) = (st.clone(), rd.clone(), g.clone(), place.clone());
                        place.busy();
                        async move {
                            let r = answer(req, &st, &rd, &g).await;
                            place.idle();
                            Ok::<_, Infallible>(r)
                        }
                    });
                    let conn = builder.serve_connection(TokioIo::new(stream), svc);
                    tokio::select! {
                        _ = tokio::time::timeout(LIFETIME, conn) => {}
                        () = ended.notified() => {}
                    }
                    drop(slot);
                });
            }
            _ = shutdown.changed() => {
                ready.store(false, Ordering::Release);
                break;
            }
        }
    }
}
