//! A gated stream's upstream timeouts: the total deadline and the idle
//! timeout (`[upstream] idle_timeout_secs`).
//!
//! Both are read off the clock when upstream has nothing for the body, and
//! their timers are only there to wake the task. A timer is polled (which
//! registers the task's waker in tokio's timer wheel) when it is new, moved,
//! due, or the body is polled by another task; not on every upstream event,
//! so a busy stream touches neither timer.

use std::pin::Pin;
use std::task::{Context as TaskContext, Waker};
use std::time::Duration;

use std::future::Future;
use tokio::time::{Instant, Sleep};

use crate::error::Error;

/// The upstream's idle timeout. A frame only notes its time; the timer is
/// moved on lazily, when it comes due before the stream is idle.
struct Idle {
    every: Duration,
    last: Instant,
    timer: Pin<Box<Sleep>>,
    /// When the timer is set to fire.
    armed_at: Instant,
}

impl Idle {
    fn due(&self) -> Instant {
        self.last + self.every
    }
}

/// The total deadline and the idle timeout of a stream.
pub(super) struct Timeouts {
    deadline: Pin<Box<Sleep>>,
    deadline_at: Instant,
    idle: Option<Idle>,
    /// The waker both timers were last polled with; `None` after a change
    /// that needs them polled again.
    armed: Option<Waker>,
}

impl Timeouts {
    pub(super) fn new(deadline_at: Instant, idle: Option<Duration>) -> Timeouts {
        let now = Instant::now();
        Timeouts {
            deadline: Box::pin(tokio::time::sleep_until(deadline_at)),
            deadline_at,
            idle: idle.map(|every| Idle {
                every,
                last: now,
                timer: Box::pin(tokio::time::sleep_until(now + every)),
                armed_at: now + every,
            }),
            armed: None,
        }
    }

    /// The upstream sent something, at `now`.
    pub(super) fn frame(&mut self, now: Instant) {
        if let Some(i) = &mut self.idle {
            i.last = now;
        }
    }

    /// The deadline moves on by `took` (time spent on a gate, not
    /// upstream's), and the idle timeout starts again.
    pub(super) fn extend(&mut self, took: Duration) {
        self.restart(self.deadline_at + took);
    }

    /// A new deadline (a follow-up's), and the idle timeout starts again.
    pub(super) fn restart(&mut self, deadline_at: Instant) {
        self.deadline_at = deadline_at;
        self.deadline.as_mut().reset(deadline_at);
        self.armed = None;
        self.frame(Instant::now());
    }

    /// The timeout that has expired, if one has: the idle one (when set) or
    /// the total deadline. Otherwise both timers are left set to wake this
    /// task when one could expire.
    pub(super) fn expiry(&mut self, cx: &mut TaskContext<'_>) -> Option<Error> {
        let now = Instant::now();
        if self.idle.as_ref().is_some_and(|i| now >= i.due()) {
            return Some(Error::UpstreamIdle);
        }
        if now >= self.deadline_at {
            return Some(Error::UpstreamTimeout);
        }
        let same = self.armed.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
        if let Some(i) = &mut self.idle {
            let mut poll = !same;
            // Due (it fired, which took its waker) before the stream was
            // idle: moved on to when it would be.
            if now >= i.armed_at {
                i.armed_at = i.due();
                i.timer.as_mut().reset(i.armed_at);
                poll = true;
            }
            if poll {
                // Not due by the clock: the poll registers the waker.
                let _ = i.timer.as_mut().poll(cx);
            }
        }
        if !same {
            let _ = self.deadline.as_mut().poll(cx);
            self.armed = Some(cx.waker().clone());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits until `t` says a timeout expired, as the body does: the task
    /// sleeps until a timer wakes it.
    async fn expired(t: &mut Timeouts) -> Error {
        std::future::poll_fn(|cx| match t.expiry(cx) {
            Some(e) => std::task::Poll::Ready(e),
            None => std::task::Poll::Pending,
        })
        .await
    }

    /// The time from now until `t` expires, and how.
    async fn expires_after(t: &mut Timeouts) -> (Duration, Error) {
        let start = Instant::now();
        let e = tokio::time::timeout(Duration::from_secs(3600), expired(t))
            .await
            .expect("a timer woke the task");
        (start.elapsed(), e)
    }

    #[tokio::test(start_paused = true)]
    async fn an_active_stream_outlives_its_idle_timer_and_a_silent_one_does_not() {
        let mut t = Timeouts::new(
            Instant::now() + Duration::from_secs(600),
            Some(Duration::from_secs(1)),
        );
        // Frames every 400 ms for 5 s: the timer comes due while frames
        // still come, and is moved on, never expiring.
        for _ in 0..12 {
            let poll = tokio::time::timeout(Duration::from_millis(400), expired(&mut t)).await;
            assert!(poll.is_err(), "expired while the stream was active");
            t.frame(Instant::now());
        }
        let (after, e) = expires_after(&mut t).await;
        assert!(matches!(e, Error::UpstreamIdle), "{e:?}");
        assert_eq!(after, Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_expires_under_frames_and_moves_on_with_a_gate() {
        let mut t = Timeouts::new(
            Instant::now() + Duration::from_secs(3),
            Some(Duration::from_secs(1)),
        );
        let start = Instant::now();
        loop {
            match tokio::time::timeout(Duration::from_millis(500), expired(&mut t)).await {
                Ok(e) => {
                    assert!(matches!(e, Error::UpstreamTimeout), "{e:?}");
                    break;
                }
                Err(_) => t.frame(Instant::now()),
            }
        }
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        // Time on a gate is not upstream's: the deadline moves on.
        let mut t = Timeouts::new(Instant::now() + Duration::from_secs(3), None);
        assert!(
            tokio::time::timeout(Duration::from_secs(2), expired(&mut t))
                .await
                .is_err()
        );
        t.extend(Duration::from_secs(5));
        let (after, e) = expires_after(&mut t).await;
        assert!(matches!(e, Error::UpstreamTimeout), "{e:?}");
        assert_eq!(after, Duration::from_secs(6));
    }

    #[tokio::test(start_paused = true)]
    async fn a_follow_up_restarts_the_deadline_and_the_idle_timer() {
        let mut t = Timeouts::new(
            Instant::now() + Duration::from_secs(2),
            Some(Duration::from_secs(10)),
        );
        assert!(
            tokio::time::timeout(Duration::from_secs(1), expired(&mut t))
                .await
                .is_err()
        );
        t.restart(Instant::now() + Duration::from_secs(4));
        let (after, e) = expires_after(&mut t).await;
        assert!(matches!(e, Error::UpstreamTimeout), "{e:?}");
        assert_eq!(after, Duration::from_secs(4));
    }
}
