//! Policy hot reload. With `[policy] reload = "watch"` the policy files (and
//! schema and fact files) are checked when the directory reports a change
//! (`notify`) and every `reload_secs` (for filesystems without events); a change is loaded
//! only once the files have stayed unchanged for `settle_ms`, so a file caught
//! mid-write (truncated by `>` or `open('w')`) is never loaded. With
//! `"signal"` only SIGHUP and `POST /reload` on the admin port reload; they
//! too wait until the files have stayed unchanged for `settle_ms`, so every
//! way of reloading reads the same settled files. A load is compiled and
//! swapped in atomically; a bad file (an empty one included) keeps the last
//! good set, is logged with `file:line` and counted; a new set that drops
//! deny, reject or ask rules is kept out, logged with their names and
//! counted, unless the operator says so (`reload_drops = "apply"`, or
//! `POST /reload?drops=apply` for one reload). A file written in place can still be
//! caught between two writes that each parse: write a new file and rename
//! it over the old one (as Kubernetes ConfigMap volumes do), which no
//! reader sees half-done. The same loop prunes idle rate-limiter keys and
//! reloads changed TLS certificate files.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::config::ReloadMode;
use crate::error::Error;
use crate::net::tls::Certs;
use crate::policy::PolicySet;
use crate::proxy::state::State;

const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// How many `settle` periods a requested reload waits for files that keep
/// changing before it gives up (and keeps the last policy).
const MAX_SETTLE_WAITS: usize = 30;

/// Loads the policy dir again; on success swaps it in, on failure keeps the
/// old set. A set that drops deny, reject or ask rules is loaded only when
/// `[policy] reload_drops = "apply"` or this reload was asked to
/// (`drops_asked`, `POST /reload?drops=apply`).
pub fn reload(state: &State, dir: &Path, drops_asked: bool) -> Result<String, Error> {
    match PolicySet::load(Some(dir)) {
        Ok(p) => {
            let version = p.version.clone();
            let dropped = dropped_blocking_rules(state.gates().policy(), &p);
            if !dropped.is_empty() {
                let apply = drops_asked
                    || state.config.policy.reload_drops == crate::config::ReloadDrops::Apply;
                if !apply {
                    state.metrics.policy_reload_failures.inc();
                    tracing::error!(rules = %dropped.join(", "), policy = %version, "policy reload refused: it would drop these deny/reject/ask rules (a file caught half-written?); keeping the last policy. To drop them, POST /reload?drops=apply or set [policy] reload_drops = \"apply\"");
                    return Err(Error::Config(vec![crate::error::Diagnostic {
                        file: dir.display().to_string(),
                        line: 0,
                        col: None,
                        message: format!("the new policy drops rules {}", dropped.join(", ")),
                    }]));
                }
                tracing::warn!(rules = %dropped.join(", "), policy = %version, "the reloaded policy no longer has these deny/reject/ask rules");
            }
            state.swap_policy(p);
            tracing::info!(policy = %version, "policy reloaded");
            Ok(version)
        }
        Err(e) => {
            state.metrics.policy_reload_failures.inc();
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

/// Names of the deny, reject and ask rules of `old` that `new` no longer has.
fn dropped_blocking_rules(old: &PolicySet, new: &PolicySet) -> Vec<String> {
    use crate::policy::Verdict;
    let blocking = |p: &PolicySet| -> Vec<String> {
        p.rules
            .iter()
            .filter(|r| r.verdict > Verdict::Allow)
            .map(|r| r.name.clone())
            .collect()
    };
    let kept = blocking(new);
    blocking(old)
        .into_iter()
        .filter(|n| !kept.contains(n))
        .collect()
}

/// Swaps in changed certificate files; a bad file keeps the last good certificate.
fn reload_certs(state: &State, certs: &Certs) {
    match certs.reload_if_changed() {
        Ok(true) => tracing::info!("TLS certificate reloaded"),
        Ok(false) => {}
        Err(e) => {
            state.metrics.tls_reload_failures.inc();
            tracing::error!(error = %e, "TLS certificate reload rejected, keeping the last good certificate");
        }
    }
}

/// A change of the policy files, waiting to settle.
struct Pending {
    stamp: Vec<(std::path::PathBuf, crate::digest::stamp::Stamp)>,
    since: Instant,
}

pub async fn watch(
    state: Arc<State>,
    certs: Option<Arc<Certs>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let dir = state.config.policy.dir.clone();
    let watching = state.config.policy.reload_mode == ReloadMode::Watch;
    let settle = state.config.policy.settle;
    let every = state.config.policy.reload;
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    // The policy files, the files they name, and the word files (a new one
    // in `words/` counts too).
    let stamp = |dir: &Path| {
        let mut s = crate::digest::stamp::of_dir(dir, "toml", &state.gates().policy().files);
        s.extend(crate::digest::stamp::of_dir(
            &dir.join("words"),
            "toml",
            &[],
        ));
        s.sort();
        s.dedup();
        s
    };
    let mut last = dir.as_deref().map(stamp);
    let mut pending: Option<Pending> = None;
    // Events wake the loop at once; polling every `reload_secs` stays, for
    // filesystems without them.
    let events = match (&dir, watching) {
        (Some(d), true) => super::fs_events::Events::watch(d),
        _ => None,
    };
    let event = || async {
        match &events {
            Some(e) => e.changed().await,
            None => std::future::pending::<()>().await,
        }
    };
    let mut pruned = Instant::now();
    let mut logged_head: Option<crate::audit::chain::Head> = None;
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
        // A change waiting to settle is looked at again once it has.
        let wait = match &pending {
            Some(_) => every.min(settle),
            None => every,
        };
        let forced = tokio::select! {
            _ = tokio::time::sleep(wait) => false,
            _ = event() => false,
            _ = hangup => true,
            _ = state.reload_requested.notified() => true,
            _ = shutdown.changed() => return,
        };
        // Idle upstream connections that expired or were closed by the
        // server go now, with their buffers, before freed memory is returned.
        for u in state.upstreams.all() {
            u.sweep();
        }
        crate::proxy::gather::return_freed_memory();
        if pruned.elapsed() >= PRUNE_EVERY {
            for l in &state.gates().policy().limits {
                l.retain_recent();
            }
            pruned = Instant::now();
            // The audit head goes to the log stream, which the trail's
            // writer cannot change: `toolgate audit verify --head` checks
            // the file against it later.
            let head = state.audit.head();
            if logged_head.as_ref() != Some(&head) {
                tracing::info!(target: crate::audit::HEAD_TARGET, audit_head = %head, "audit head");
                logged_head = Some(head);
            }
        }
        if let Some(c) = &certs {
            reload_certs(&state, c);
        }
        let Some(dir) = dir.as_deref() else { continue };
        if forced {
            pending = None;
            // As the watcher does: only files that stayed unchanged for `settle`.
            let mut now = stamp(dir);
            let mut settled = false;
            for _ in 0..MAX_SETTLE_WAITS {
                tokio::time::sleep(settle).await;
                let then = stamp(dir);
                settled = then == now;
                now = then;
                if settled {
                    break;
                }
            }
            if !settled {
                state.metrics.policy_reload_failures.inc();
                tracing::error!(
                    "policy reload skipped: the files kept changing; keeping the last policy"
                );
                continue;
            }
            last = Some(now);
            let drops = state
                .reload_drops_asked
                .swap(false, std::sync::atomic::Ordering::SeqCst);
            let _ = reload(&state, dir, drops);
            continue;
        }
        if !watching {
            continue;
        }
        let now = stamp(dir);
        if last.as_ref() == Some(&now) {
            pending = None;
            continue;
        }
        match &pending {
            Some(p) if p.stamp == now && p.since.elapsed() >= settle => {
                pending = None;
                last = Some(now);
                let _ = reload(&state, dir, false);
            }
            Some(p) if p.stamp == now => {}
            _ => {
                pending = Some(Pending {
                    stamp: now,
                    since: Instant::now(),
                })
            }
        }
    }
}
