//! Policy hot reload: the policy files (and schema files) are checked every
//! `[policy] reload_secs` and on SIGHUP; a change is loaded, compiled and
//! swapped in atomically. A bad file keeps the last good set, is logged with
//! `file:line` and counted. The same loop prunes idle rate-limiter keys and
//! reloads changed TLS certificate files.

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::error::Error;
use crate::policy::PolicySet;
use crate::state::State;
use crate::tls::Certs;

const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Loads the policy dir again; on success swaps it in, on failure keeps the old set.
pub fn reload(state: &State, dir: &Path) -> Result<String, Error> {
    match PolicySet::load(Some(dir)) {
        Ok(p) => {
            let version = p.version.clone();
            state.swap_policy(p);
            tracing::info!(policy = %version, "policy reloaded");
            Ok(version)
        }
        Err(e) => {
            state.metrics.policy_reload_failures.fetch_add(1, Relaxed);
            match &e {
                Error::Config(diags) => {
                    for d in diags {
                        tracing::error!(at = %format!("{}:{}", d.file, d.line), "policy reload rejected, keeping the last good policy: {}", d.message);
                    }
                }
                other => {
                    tracing::error!(error = %other, "policy reload rejected, keeping the last good policy")
                }
            }
            Err(e)
        }
    }
}

/// Swaps in changed certificate files; a bad file keeps the last good certificate.
fn reload_certs(state: &State, certs: &Certs) {
    match certs.reload_if_changed() {
        Ok(true) => tracing::info!("TLS certificate reloaded"),
        Ok(false) => {}
        Err(e) => {
            state.metrics.tls_reload_failures.fetch_add(1, Relaxed);
            tracing::error!(error = %e, "TLS certificate reload rejected, keeping the last good certificate");
        }
    }
}

pub async fn watch(
    state: Arc<State>,
    certs: Option<Arc<Certs>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let dir = state.config.policy.dir.clone();
    let every = state.config.policy.reload;
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut last = dir
        .as_deref()
        .map(|d| crate::stamp::of_dir(d, "toml", &state.gates().policy().files));
    let mut pruned = Instant::now();
    loop {
        #[cfg(unix)]
        let hangup = async {
            match hup.as_mut() {
                Some(h) => {
                    h.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let hangup = std::future::pending::<()>();
        let forced = tokio::select! {
            _ = tokio::time::sleep(every) => false,
            _ = hangup => true,
            _ = shutdown.changed() => return,
        };
        if pruned.elapsed() >= PRUNE_EVERY {
            for l in &state.gates().policy().limits {
                l.retain_recent();
            }
            pruned = Instant::now();
        }
        if let Some(c) = &certs {
            reload_certs(&state, c);
        }
        let Some(dir) = dir.as_deref() else { continue };
        let now = crate::stamp::of_dir(dir, "toml", &state.gates().policy().files);
        if forced || last.as_ref() != Some(&now) {
            last = Some(now);
            let _ = reload(&state, dir);
        }
    }
}
