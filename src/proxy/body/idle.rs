//! The upstream idle timeout of a gated stream (`[upstream] idle_timeout_secs`).

use std::pin::Pin;
use std::task::Context as TaskContext;

use std::future::Future;

use crate::error::Error;

/// The upstream's idle timeout. A frame only notes its time; the timer is
/// moved on lazily when it fires early, so a busy stream costs no timer work.
pub(super) struct Idle {
    every: std::time::Duration,
    last: tokio::time::Instant,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Idle {
    pub(super) fn new(every: std::time::Duration) -> Idle {
        Idle {
            every,
            last: tokio::time::Instant::now(),
            timer: Box::pin(tokio::time::sleep(every)),
        }
    }

    /// The upstream sent something.
    pub(super) fn frame(&mut self) {
        self.last = tokio::time::Instant::now();
    }

    /// True once `every` has passed since the last frame; else the timer
    /// is (re)armed for when it would.
    pub(super) fn expired(&mut self, cx: &mut TaskContext<'_>) -> bool {
        while self.timer.as_mut().poll(cx).is_ready() {
            let due = self.last + self.every;
            if tokio::time::Instant::now() >= due {
                return true;
            }
            self.timer.as_mut().reset(due);
        }
        false
    }
}

/// The timeout that has expired, if one has: the idle one (when set) or
/// the total `deadline`.
pub(super) fn expiry(
    idle: &mut Option<Idle>,
    deadline: &mut Pin<Box<tokio::time::Sleep>>,
    cx: &mut TaskContext<'_>,
) -> Option<Error> {
    if idle.as_mut().is_some_and(|i| i.expired(cx)) {
        return Some(Error::UpstreamIdle);
    }
    deadline
        .as_mut()
        .poll(cx)
        .is_ready()
        .then_some(Error::UpstreamTimeout)
}
