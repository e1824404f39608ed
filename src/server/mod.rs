//! Listeners: the data port (HTTP/1.1 and h2c, or TLS), the admin port, and shutdown.

mod admin;
mod approvals;
mod fs_events;
mod listener;
pub mod reload;
pub mod signal;
mod sniff;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::Error;
use crate::net::tls::Certs;
use crate::proxy::state::State;

/// A started toolgate: its bound addresses and a way to stop it.
pub struct Running {
    pub addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub state: Arc<State>,
    shutdown: watch::Sender<bool>,
    data: JoinHandle<()>,
    admin: JoinHandle<()>,
}

/// Binds both ports and serves with a built state ([`crate::app::build`]).
pub async fn start(state: State) -> Result<Running, Error> {
    let state = Arc::new(state);
    let l = &state.config.listen;
    let certs = match &l.tls {
        Some(t) => Some(Arc::new(Certs::load(t)?)),
        None => None,
    };
    let data_l = crate::net::listen::bind(l.addr)
        .await
        .map_err(|e| Error::io(format!("cannot listen on {}", l.addr), e))?;
    let admin_l = TcpListener::bind(l.admin)
        .await
        .map_err(|e| Error::io(format!("cannot listen on {}", l.admin), e))?;
    let addr = data_l
        .local_addr()
        .map_err(|e| Error::io("local addr", e))?;
    let admin_addr = admin_l
        .local_addr()
        .map_err(|e| Error::io("local addr", e))?;
    let (shutdown, rx) = watch::channel(false);
    let ready = Arc::new(AtomicBool::new(false));
    let admin = tokio::spawn(admin::serve(
        admin_l,
        state.clone(),
        ready.clone(),
        rx.clone(),
    ));
    let data = tokio::spawn(listener::serve(
        data_l,
        state.clone(),
        certs.clone(),
        rx.clone(),
    ));
    if let Some(b) = state.config.bridge.clone() {
        tokio::spawn(crate::facts::bridge::watch(b, rx.clone()));
    }
    tokio::spawn(reload::watch(state.clone(), certs, rx));
    ready.store(true, Ordering::Release);
    Ok(Running {
        addr,
        admin_addr,
        state,
        shutdown,
        data,
        admin,
    })
}

impl Running {
    /// Stops accepting, lets in-flight requests finish up to `[listen] drain_secs`,
    /// then flushes the audit trail.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        // Calls waiting for a person end now (a neutral failure), so the
        // drain does not wait out their time-outs.
        self.state.approvals.close();
        let _ = self.data.await;
        let _ = self.admin.await;
        // The trail's end, sealed: a reader can tell nothing was cut from it.
        self.state.audit.seal("shutdown");
        let head = self.state.audit.head();
        tracing::info!(target: crate::audit::HEAD_TARGET, audit_head = %head, "audit trail sealed");
        if let Err(e) = self.state.audit.flush().await {
            tracing::error!(error = %e, "audit flush failed at shutdown");
        }
        // The last spans are sent (a blocking wait, off the request workers).
        let state = self.state.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(t) = &state.telemetry {
                t.shutdown();
            }
        })
        .await;
    }
}
