//! The admin port's idle connections: those waiting for a request head
//! (a new one, or a kept-alive one between requests), oldest first. A
//! connection over `[admin] max_connections` ends the oldest of them and
//! takes its slot, so idle or slow connections, however many, cannot keep
//! a health probe out; a connection in the middle of a request is never
//! ended this way.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The idle connections, oldest first, each with what ends it.
#[derive(Default)]
pub struct Idle {
    next: AtomicU64,
    queue: Mutex<VecDeque<(u64, Arc<Notify>)>>,
}

/// One connection's place among the idle ones.
pub struct Place {
    idle: Arc<Idle>,
    id: u64,
    /// Notified when the connection is to end.
    pub ended: Arc<Notify>,
}

impl Idle {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(u64, Arc<Notify>)>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new connection, idle until its first request.
    pub fn join(self: &Arc<Self>) -> Place {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let ended = Arc::new(Notify::new());
        self.lock().push_back((id, ended.clone()));
        Place {
            idle: self.clone(),
            id,
            ended,
        }
    }

    /// Ends the oldest idle connection; false when none is idle.
    pub fn end_oldest(&self) -> bool {
        match self.lock().pop_front() {
            Some((_, ended)) => {
                ended.notify_one();
                true
            }
            None => false,
        }
    }
}

impl Place {
    /// A request began: the connection is not idle until it is answered.
    pub fn busy(&self) {
        self.idle.lock().retain(|(id, _)| *id != self.id);
    }

    /// The request was answered: idle again, the newest.
    pub fn idle(&self) {
        let mut q = self.idle.lock();
        if !q.iter().any(|(id, _)| *id == self.id) {
            q.push_back((self.id, self.ended.clone()));
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.busy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_idle_connection_ends_first_and_a_busy_one_never() {
        let idle = Arc::new(Idle::default());
        let (a, b, c) = (idle.join(), idle.join(), idle.join());
        a.busy();
        assert!(idle.end_oldest());
        // b was the oldest idle one: it is told to end, a and c are not.
        tokio::time::timeout(std::time::Duration::from_millis(50), b.ended.notified())
            .await
            .unwrap_or_else(|_| panic!("b was not ended"));
        a.idle();
        assert!(idle.end_oldest()); // c, older than a's new idle time
        tokio::time::timeout(std::time::Duration::from_millis(50), c.ended.notified())
            .await
            .unwrap_or_else(|_| panic!("c was not ended"));
        drop(a);
        assert!(!idle.end_oldest(), "nothing left idle");
    }
}
