//! Writes that wait one turn of the scheduler, so the ones made ready in
//! one turn go out back to back: a client connection's ([`Deferred`]), and
//! a request to the upstream ([`turn`] before it is written).
//!
//! Waking a client that sleeps on another core is most of what a write
//! costs: the kernel wakes the reader from inside the writer's `writev`
//! (`sock_def_readable`), and on a virtual machine that is an
//! inter-processor interrupt through the hypervisor, most of a `writev`'s
//! cost. Written back to back, the first write wakes the client and the ones after it find it
//! awake. So each write first yields: the task wakes itself and goes to the
//! back of the run queue, behind the tasks already ready, and writes when it
//! is polled again. Nothing is held for I/O or a timer: a write waits at
//! most for the work that was ready before it, and with nothing else ready
//! it goes out at once.
//!
//! A request's turn is skipped while turns are long ([`Turns`]): with
//! thousands of streams ready, a turn waits behind all of them (15 ms at
//! 1,000 paced streams on one core, a third of a stream's wait for its
//! first byte), and what it would batch is not worth that. How long turns
//! are is measured by the writes to clients, which yield anyway, so no
//! request has to wait a long turn to find out. For the same reason the
//! first write after a client's request (its answer's head and first
//! bytes) skips its turn while turns are longer still: a stream's first byte
//! would wait the whole run queue once more, for one write in a stream's
//! many.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A turn that takes longer than this on average (µs) says the run queue
/// is long.
const LONG_US: u32 = 2_000;

/// The bound for an answer's first write: higher, so that the short turns
/// of a saturated core (a few dozen busy connections) still batch an
/// answer's head with its first bytes, and only a run queue of hundreds
/// of streams sends it at once.
const FIRST_LONG_US: u32 = 5_000;

/// How long a turn takes on this thread (µs, smoothed).
#[derive(Debug, Clone, Copy, Default)]
struct Turns {
    mean_us: u32,
}

impl Turns {
    /// Whether the next request waits a turn.
    fn wait(self) -> bool {
        self.mean_us <= LONG_US
    }

    /// Whether an answer's first write waits a turn.
    fn first_waits(self) -> bool {
        self.mean_us <= FIRST_LONG_US
    }

    /// A turn took `us`: an eighth of it goes into the mean.
    fn took(&mut self, us: u32) {
        self.mean_us = ((u64::from(self.mean_us) * 7 + u64::from(us)) / 8) as u32;
    }
}

thread_local! {
    static TURNS: Cell<Turns> = const { Cell::new(Turns { mean_us: 0 }) };
}

/// Notes a turn that began at `since`.
fn note(since: Instant) {
    let us = u32::try_from(since.elapsed().as_micros()).unwrap_or(u32::MAX);
    let mut t = TURNS.get();
    t.took(us);
    TURNS.set(t);
}

/// Yields once, unless turns are long: the task wakes itself and goes to
/// the back of the run queue, behind the tasks already ready.
pub async fn turn() {
    if !TURNS.get().wait() {
        return;
    }
    let start = Instant::now();
    let mut yielded = false;
    std::future::poll_fn(|cx| yield_once(&mut yielded, cx)).await;
    note(start);
}

/// `Ready` when `yielded` says this turn was already given (and clears it,
/// for the next); else gives it: the task is woken to go on after the tasks
/// ahead of it.
fn yield_once(yielded: &mut bool, cx: &mut Context<'_>) -> Poll<()> {
    if std::mem::take(yielded) {
        return Poll::Ready(());
    }
    *yielded = true;
    cx.waker().wake_by_ref();
    Poll::Pending
}

/// `io` with each write yielding once first.
pub struct Deferred<S> {
    io: S,
    /// When this write yielded: the next attempt goes to `io`.
    yielded: Option<Instant>,
    /// The client sent bytes since the last write: the first write of an
    /// answer, which goes out at once while turns are long.
    asked: bool,
}

impl<S> Deferred<S> {
    pub fn new(io: S) -> Deferred<S> {
        Deferred {
            io,
            yielded: None,
            asked: false,
        }
    }

    /// Gives this write's turn; once given, notes how long it took (the
    /// measure [`turn`] goes by) and lets the write go. The first write
    /// after the client asked goes at once while turns are long.
    fn turn(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self.yielded.take() {
            Some(since) => {
                note(since);
                Poll::Ready(())
            }
            None if std::mem::take(&mut self.asked) && !TURNS.get().first_waits() => {
                Poll::Ready(())
            }
            None => {
                self.yielded = Some(Instant::now());
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Deferred<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.asked = true;
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Deferred<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        std::task::ready!(this.turn(cx));
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        std::task::ready!(this.turn(cx));
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_write_yields_once_with_its_task_woken_then_goes_out() {
        let (client, server) = tokio::io::duplex(64);
        let mut d = Deferred::new(server);
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let first = Pin::new(&mut d).poll_write(&mut cx, b"abc");
        assert!(first.is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken to try again");
        let second = Pin::new(&mut d).poll_write(&mut cx, b"abc");
        assert!(matches!(second, Poll::Ready(Ok(3))));
        // The next write yields again.
        let bufs = [io::IoSlice::new(b"de"), io::IoSlice::new(b"f")];
        assert!(Pin::new(&mut d)
            .poll_write_vectored(&mut cx, &bufs)
            .is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        let n = match Pin::new(&mut d).poll_write_vectored(&mut cx, &bufs) {
            Poll::Ready(Ok(n)) => n,
            other => panic!("not written: {other:?}"),
        };
        assert!(n >= 2);
        drop(d);
        let mut got = Vec::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut client = client;
            client.read_to_end(&mut got).await.unwrap();
        });
        assert_eq!(&got[..3 + n], &b"abcdef"[..3 + n]);
    }

    #[test]
    fn turns_are_skipped_while_they_are_long() {
        let mut t = Turns::default();
        assert!(t.wait(), "short turns are taken");
        for _ in 0..40 {
            t.took(15_000);
        }
        assert!(t.mean_us > LONG_US);
        assert!(!t.wait());
        // Short again: a few turns bring the mean under the bound.
        for _ in 0..30 {
            t.took(300);
        }
        assert!(t.mean_us <= LONG_US, "{}", t.mean_us);
        assert!(t.wait());
    }

    #[test]
    fn a_deferred_write_measures_its_turn_for_the_requests() {
        TURNS.set(Turns::default());
        let (_client, server) = tokio::io::duplex(1 << 16);
        let mut d = Deferred::new(server);
        let waker = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
        let mut cx = Context::from_waker(&waker);
        // Writes whose turns take 5 ms (the run queue is long): a request
        // skips its turn.
        for _ in 0..40 {
            assert!(Pin::new(&mut d).poll_write(&mut cx, b"x").is_pending());
            std::thread::sleep(std::time::Duration::from_millis(5));
            assert!(Pin::new(&mut d).poll_write(&mut cx, b"x").is_ready());
        }
        assert!(TURNS.get().mean_us > LONG_US, "{:?}", TURNS.get());
        let mut t = std::pin::pin!(turn());
        assert!(
            t.as_mut().poll(&mut cx).is_ready(),
            "no turn while they are long"
        );
        // Turns short again: a request waits its turn.
        for _ in 0..40 {
            assert!(Pin::new(&mut d).poll_write(&mut cx, b"x").is_pending());
            assert!(Pin::new(&mut d).poll_write(&mut cx, b"x").is_ready());
        }
        assert!(TURNS.get().wait(), "{:?}", TURNS.get());
        let mut t = std::pin::pin!(turn());
        assert!(t.as_mut().poll(&mut cx).is_pending());
    }

    #[test]
    fn an_answers_first_write_skips_its_turn_only_while_turns_are_long() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let mut d = Deferred::new(server);
        let waker = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
        let mut cx = Context::from_waker(&waker);
        fn asks(
            client: &mut tokio::io::DuplexStream,
            d: &mut Deferred<tokio::io::DuplexStream>,
            cx: &mut Context<'_>,
        ) {
            let mut ask = std::pin::pin!(client.write_all(b"GET"));
            assert!(ask.as_mut().poll(cx).is_ready());
            let mut buf = [0u8; 8];
            let mut rb = ReadBuf::new(&mut buf);
            assert!(matches!(
                Pin::new(d).poll_read(cx, &mut rb),
                Poll::Ready(Ok(()))
            ));
            assert_eq!(rb.filled(), b"GET");
        }
        // Short turns: the answer's first write yields as every write does.
        TURNS.set(Turns::default());
        asks(&mut client, &mut d, &mut cx);
        assert!(Pin::new(&mut d).poll_write(&mut cx, b"x").is_pending());
        assert!(Pin::new(&mut d).poll_write(&mut cx, b"x").is_ready());
        // Turns over a request's bound but under the answer's (a core
        // saturated by a few dozen connections): still batched.
        TURNS.set(Turns { mean_us: 3_000 });
        asks(&mut client, &mut d, &mut cx);
        assert!(Pin::new(&mut d).poll_write(&mut cx, b"x").is_pending());
        assert!(Pin::new(&mut d).poll_write(&mut cx, b"x").is_ready());
        // Long turns: the first write after the request goes at once...
        TURNS.set(Turns { mean_us: 20_000 });
        asks(&mut client, &mut d, &mut cx);
        assert!(matches!(
            Pin::new(&mut d).poll_write(&mut cx, b"head"),
            Poll::Ready(Ok(4))
        ));
        // ...and the stream's next writes wait their turn again.
        assert!(Pin::new(&mut d).poll_write(&mut cx, b"x").is_pending());
        assert!(Pin::new(&mut d).poll_write(&mut cx, b"x").is_ready());
        // A read that brings nothing is no request.
        let mut buf = [0u8; 8];
        let mut rb = ReadBuf::new(&mut buf);
        assert!(Pin::new(&mut d).poll_read(&mut cx, &mut rb).is_pending());
        assert!(Pin::new(&mut d).poll_write(&mut cx, b"x").is_pending());
    }

    #[test]
    fn a_turn_is_one_pending_with_the_task_woken() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut t = std::pin::pin!(turn());
        assert!(t.as_mut().poll(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(t.as_mut().poll(&mut cx).is_ready());
    }

    #[tokio::test]
    async fn whole_messages_go_both_ways_through_it() {
        let (mut client, server) = tokio::io::duplex(16);
        let mut d = Deferred::new(server);
        let writer = tokio::spawn(async move {
            d.write_all(&[7u8; 1000]).await.unwrap();
            d.flush().await.unwrap();
            let mut back = [0u8; 5];
            d.read_exact(&mut back).await.unwrap();
            back
        });
        let mut got = vec![0u8; 1000];
        client.read_exact(&mut got).await.unwrap();
        assert!(got.iter().all(|&b| b == 7));
        client.write_all(b"hello").await.unwrap();
        assert_eq!(&writer.await.unwrap(), b"hello");
    }
}
