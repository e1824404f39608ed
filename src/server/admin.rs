//! The admin port: `/healthz`, `/readyz`, `/metrics`, `POST /reload`
//! (load the policy files now, as SIGHUP does) and the approvals API
//! (`/approvals…`, in `approvals.rs`).

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::proxy::state::State;

fn respond(req: &Request<Incoming>, state: &State, ready: &AtomicBool) -> Response<Full<Bytes>> {
    let (status, ctype, body) = match req.uri().path() {
        "/reload" if req.method() == http::Method::POST => {
            state.reload_requested.notify_one();
            (
                StatusCode::ACCEPTED,
                "text/plain",
                Bytes::from_static(b"reload requested\n"),
            )
        }
        "/healthz" => (StatusCode::OK, "text/plain", Bytes::from_static(b"ok\n")),
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

pub async fn serve(
    listener: TcpListener,
    state: Arc<State>,
    ready: Arc<AtomicBool>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            r = listener.accept() => {
                let Ok((stream, _)) = r else { continue };
                let (st, rd) = (state.clone(), ready.clone());
                let svc = service_fn(move |req: Request<Incoming>| {
                    let (st, rd) = (st.clone(), rd.clone());
                    async move {
                        let resp = match super::approvals::owns(req.uri().path()) {
                            true => super::approvals::handle(req, &st).await,
                            false => respond(&req, &st, &rd),
                        };
                        Ok::<_, Infallible>(resp)
                    }
                });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
            _ = shutdown.changed() => {
                ready.store(false, Ordering::Release);
                break;
            }
        }
    }
}
