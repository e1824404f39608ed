//! The data port: HTTP/1.1 and h2c, or TLS with ALPN `h2`/`http/1.1`, on one
//! listener, with graceful drain.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::rt::{Read, Write};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::proxy;
use crate::state::State;
use crate::tls::Certs;

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

type Builder = Arc<auto::Builder<TokioExecutor>>;

/// Serves one connection until it ends or the drain cuts it.
async fn serve_conn<I>(io: I, builder: Builder, state: Arc<State>, watcher: Watcher)
where
    I: Read + Write + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| {
        let st = state.clone();
        async move { Ok::<_, Infallible>(proxy::handle(st, req).await) }
    });
    let conn = builder.serve_connection(io, svc).into_owned();
    if let Err(e) = watcher.watch(conn).await {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// Completes the TLS handshake (bounded), then serves the connection.
async fn serve_tls(
    stream: TcpStream,
    certs: Arc<Certs>,
    builder: Builder,
    state: Arc<State>,
    watcher: Watcher,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(certs.config());
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => serve_conn(TokioIo::new(tls), builder, state, watcher).await,
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
    let builder: Builder = Arc::new(auto::Builder::new(TokioExecutor::new()));
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let (st, b, w) = (state.clone(), builder.clone(), graceful.watcher());
                    match &certs {
                        Some(c) => tokio::spawn(serve_tls(stream, c.clone(), b, st, w)),
                        None => tokio::spawn(serve_conn(TokioIo::new(stream), b, st, w)),
                    };
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
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
