//! File-system events for the policy directory (`notify`: inotify, kqueue,
//! FSEvents): a change wakes the reload loop at once instead of at its next
//! poll. Where no events come (network and some container filesystems), or
//! the watcher cannot start, the loop's polling every `reload_secs` still
//! finds the change.

use std::path::Path;
use std::sync::Arc;

use notify::event::{AccessKind, AccessMode, EventKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::Notify;

/// An event that may change what a load reads. Opening and reading files
/// are not: the loop's own stamps and loads do both, and waking on them
/// would wake the loop forever.
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// Wakes its [`Events::changed`] on any event in the watched directory; the
/// watch lasts as long as this value.
pub struct Events {
    _watcher: RecommendedWatcher,
    changed: Arc<Notify>,
}

impl Events {
    /// Watches `dir` (not recursively: policy files are its `*.toml`);
    /// `None` when the platform or filesystem cannot.
    pub fn watch(dir: &Path) -> Option<Events> {
        let changed = Arc::new(Notify::new());
        let wake = changed.clone();
        let watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
            if e.is_ok_and(|e| is_change(&e.kind)) {
                wake.notify_one();
            }
        });
        let mut watcher = match watcher {
            Ok(w) => w,
            Err(e) => {
                tracing::info!(error = %e, "no file-system events; policy changes are found by polling");
                return None;
            }
        };
        if let Err(e) = watcher.watch(dir, RecursiveMode::Recursive) {
            tracing::info!(dir = %dir.display(), error = %e, "cannot watch the policy directory; policy changes are found by polling");
            return None;
        }
        Some(Events {
            _watcher: watcher,
            changed,
        })
    }

    /// Resolves at the next event (at once if one came since the last call).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use notify::event::{AccessKind, AccessMode, CreateKind, EventKind, ModifyKind};

    use super::is_change;

    #[test]
    fn reads_do_not_wake_the_loop_and_writes_do() {
        assert!(!is_change(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!is_change(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(!is_change(&EventKind::Access(AccessKind::Read)));
        assert!(is_change(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(is_change(&EventKind::Modify(ModifyKind::Any)));
        assert!(is_change(&EventKind::Create(CreateKind::File)));
        assert!(is_change(&EventKind::Remove(
            notify::event::RemoveKind::Any
        )));
    }
}
