//! Whether the upstream body may have something new. The upstream body is
//! polled with a waker of its own that notes its wake-ups; a poll of the
//! agent's body that upstream did not wake (its write's own turn, a timer,
//! a gate) does not poll upstream again. Each poll of upstream goes through
//! hyper's connection (a read attempt, the body channel): without this a
//! paced event polled it about five times, with it twice.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use http_body::{Body, Frame};

/// The waker upstream is polled with: it notes the wake-up, then wakes the
/// agent's task.
struct Note {
    stirred: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Note {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.stirred.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// What polling a body gives.
type Polled<B> = Poll<Option<Result<Frame<<B as Body>::Data>, <B as Body>::Error>>>;

pub(super) struct Stirred {
    note: Arc<Note>,
    waker: Waker,
}

impl Stirred {
    /// Upstream is polled first.
    pub(super) fn new() -> Stirred {
        let note = Arc::new(Note {
            stirred: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        Stirred {
            waker: Waker::from(note.clone()),
            note,
        }
    }

    /// Upstream changed (a follow-up's answer is read next): poll it.
    pub(super) fn stir(&self) {
        self.note.stirred.store(true, Ordering::Release);
    }

    /// Polls `body` unless it has not woken since it last said `Pending`
    /// (then `Pending`: its wake-up will come to this task).
    pub(super) fn poll<B: Body + Unpin>(&self, body: &mut B, cx: &mut Context<'_>) -> Polled<B> {
        // First: a wake-up from here on reaches the task polling now, even
        // when it is not the one that polled upstream last.
        self.note.task.register(cx.waker());
        if !self.note.stirred.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let polled = Pin::new(body).poll_frame(&mut Context::from_waker(&self.waker));
        if polled.is_ready() {
            // There may be more already: the next poll asks.
            self.stir();
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A body that counts its polls and is ready when told.
    struct Gate {
        polls: usize,
        ready: bool,
        waker: Option<Waker>,
    }

    impl Body for Gate {
        type Data = bytes::Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<bytes::Bytes>, Self::Error>>> {
            self.polls += 1;
            if std::mem::take(&mut self.ready) {
                return Poll::Ready(Some(Ok(Frame::data(bytes::Bytes::from_static(b"x")))));
            }
            self.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    #[test]
    fn upstream_is_polled_again_only_once_it_woke_or_was_ready() {
        let task = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let s = Stirred::new();
        let mut body = Gate {
            polls: 0,
            ready: true,
            waker: None,
        };
        // Ready: asked again at once.
        assert!(s.poll(&mut body, &mut cx).is_ready());
        assert!(s.poll(&mut body, &mut cx).is_pending());
        assert_eq!(body.polls, 2);
        // Not woken: not polled (the task was woken by something else).
        assert!(s.poll(&mut body, &mut cx).is_pending());
        assert!(s.poll(&mut body, &mut cx).is_pending());
        assert_eq!(body.polls, 2);
        // Upstream wakes: the task is woken and upstream polled again.
        body.ready = true;
        body.waker.take().expect("registered").wake();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        assert!(s.poll(&mut body, &mut cx).is_ready());
        assert_eq!(body.polls, 3);
        // A new upstream body is polled.
        assert!(s.poll(&mut body, &mut cx).is_pending());
        s.stir();
        assert!(s.poll(&mut body, &mut cx).is_pending());
        assert_eq!(body.polls, 5);
    }
}
