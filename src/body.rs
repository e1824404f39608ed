//! The body adapter: drives a protocol's sans-IO [`Rewriter`] over the upstream body.
//!
//! A task reads upstream frames, feeds the rewriter, sends what the agent may
//! see into a small channel, and awaits the gates (sending `: keepalive`
//! comments meanwhile). The agent's response body is the channel's receiver.
//! When the agent goes away the channel closes, the task ends and the upstream
//! body is dropped, which cancels the upstream request.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::context::Context;
use crate::encoding::ContentDecoder;
use crate::error::Error;
use crate::gate::Gates;
use crate::protocol::KEEPALIVE;
use crate::protocol::{Protocol, Rewriter, Step};
use crate::release;
use crate::state::State;

/// The error a response body may end with: the agent sees a cut-off response.
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// A whole body sent as pieces (a rewritten body's new text and the slices
/// of the original it kept), with its exact length announced.
pub struct Pieces {
    pieces: std::collections::VecDeque<Bytes>,
    left: u64,
}

impl Pieces {
    pub fn new(pieces: Vec<Bytes>) -> Pieces {
        let left = pieces.iter().map(|p| p.len() as u64).sum();
        Pieces {
            pieces: pieces.into(),
            left,
        }
    }
}

impl Body for Pieces {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let next = self.pieces.pop_front();
        if let Some(p) = &next {
            self.left -= p.len() as u64;
        }
        Poll::Ready(next.map(|p| Ok(Frame::data(p))))
    }

    fn is_end_stream(&self) -> bool {
        self.pieces.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
}

/// A pass-through body bounded by the upstream's total deadline. Past it the
/// body ends with an error, so the agent sees a cut-off response (a reset, or
/// no final chunk), never a short body that looks whole.
pub struct Deadline<B> {
    inner: B,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl<B> Deadline<B> {
    pub fn new(inner: B, deadline: Instant) -> Deadline<B> {
        Deadline {
            inner,
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
        }
    }
}

impl<B> Body for Deadline<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BodyError>,
{
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if let Poll::Ready(f) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(f.map(|r| r.map_err(Into::into)));
        }
        match this.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err("upstream response body timed out".into()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// One piece of output; `last` marks the end of the body.
struct Piece {
    data: Bytes,
    last: bool,
}

/// A response body fed by the gating task.
pub struct ChannelBody {
    rx: mpsc::Receiver<Piece>,
    ended: bool,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(p)) => {
                self.ended = p.last;
                Poll::Ready(Some(Ok(Frame::data(p.data))))
            }
            Poll::Ready(None) => {
                self.ended = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Lets hyper write the last piece and the end of the body in one go.
    fn is_end_stream(&self) -> bool {
        self.ended
    }
}

/// Sends what `out` holds; `last` also ends the body.
async fn send(out: &mut BytesMut, tx: &mpsc::Sender<Piece>, last: bool) -> Result<(), Stop> {
    if out.is_empty() && !last {
        return Ok(());
    }
    let data = out.split().freeze();
    tx.send(Piece { data, last })
        .await
        .map_err(|_| Stop::ClientGone)
}

enum Stop {
    ClientGone,
    Fault(Error),
}

struct Driver {
    state: Arc<State>,
    /// The pipeline the request started with (a reload does not change it mid-request).
    gates: Arc<Gates>,
    ctx: Arc<Context>,
    rw: Box<dyn Rewriter>,
    out: BytesMut,
    tx: mpsc::Sender<Piece>,
}

/// Starts gating `body` and returns the agent's response body.
pub fn gated_stream(
    protocol: Protocol,
    state: Arc<State>,
    gates: Arc<Gates>,
    ctx: Arc<Context>,
    body: Incoming,
    decoder: ContentDecoder,
    deadline: Instant,
) -> ChannelBody {
    let (tx, rx) = mpsc::channel(32);
    let rw = protocol.rewriter(&state.stream_options());
    let mut d = Driver {
        state,
        gates,
        ctx,
        rw,
        out: BytesMut::with_capacity(16 * 1024),
        tx,
    };
    tokio::spawn(async move { d.run(body, decoder, deadline).await });
    ChannelBody { rx, ended: false }
}

impl Driver {
    async fn run(&mut self, body: Incoming, decoder: ContentDecoder, deadline: Instant) {
        let result = self.pump(body, decoder, deadline).await;
        let late = self.rw.late_deltas();
        if late > 0 {
            self.state.metrics.late_tool_deltas.fetch_add(late, Relaxed);
            tracing::warn!(request_id = %self.ctx.request_id, late, "tool-call deltas after their finish were stripped");
        }
        if let Err(Stop::Fault(err)) = result {
            tracing::warn!(request_id = %self.ctx.request_id, error = %err, "stream ended with an error event");
            self.state.metrics.stream_faults.fetch_add(1, Relaxed);
            let dropped = self
                .rw
                .fail(&err, self.state.passthrough_errors(), &mut self.out);
            if let Some(w) = self.rw.take_withheld() {
                self.state.remember_withheld(w);
            }
            release::dropped(
                &self.state,
                &self.gates,
                &self.ctx,
                &dropped,
                "stream_fault",
            )
            .await;
            let _ = self.send(true).await;
        }
    }

    async fn pump(
        &mut self,
        mut body: Incoming,
        mut dec: ContentDecoder,
        deadline: Instant,
    ) -> Result<(), Stop> {
        loop {
            let frame = tokio::select! {
                biased;
                _ = self.tx.closed() => return Err(Stop::ClientGone),
                f = tokio::time::timeout_at(deadline, body.frame()) => f,
            };
            match frame {
                Err(_) => return Err(Stop::Fault(Error::UpstreamTimeout)),
                Ok(Some(Err(_))) => {
                    return Err(Stop::Fault(Error::UpstreamUnreadable(
                        "upstream connection failed mid-stream",
                    )))
                }
                Ok(Some(Ok(f))) => {
                    if let Ok(data) = f.into_data() {
                        let bytes = dec.decode(&data).map_err(Stop::Fault)?;
                        self.rw.push(&bytes);
                        // A body of known length that is complete ends here, so
                        // its last piece and the end go out together.
                        if body.is_end_stream() {
                            return self.finish(&mut dec).await;
                        }
                        self.steps().await?;
                    }
                }
                Ok(None) => return self.finish(&mut dec).await,
            }
        }
    }

    /// End of the upstream body: the last events, then the end of the agent's body.
    async fn finish(&mut self, dec: &mut ContentDecoder) -> Result<(), Stop> {
        let rest = dec.finish().map_err(Stop::Fault)?;
        self.rw.push(&rest);
        loop {
            let step = self.rw.process(&mut self.out).map_err(Stop::Fault)?;
            self.audit_hosted().await;
            match step {
                Step::NeedMore => break,
                Step::Gate => self.gate().await?,
            }
        }
        loop {
            let step = self.rw.end(&mut self.out).map_err(Stop::Fault)?;
            self.audit_hosted().await;
            match step {
                Step::NeedMore => break,
                Step::Gate => self.gate().await?,
            }
        }
        self.send(true).await
    }

    async fn steps(&mut self) -> Result<(), Stop> {
        loop {
            let step = self.rw.process(&mut self.out).map_err(Stop::Fault)?;
            self.audit_hosted().await;
            match step {
                Step::NeedMore => return self.send(false).await,
                Step::Gate => self.gate().await?,
            }
        }
    }

    /// Audits the provider-run calls the rewriter has seen.
    async fn audit_hosted(&mut self) {
        let hosted = self.rw.take_hosted();
        if !hosted.is_empty() {
            release::hosted(&self.state, &self.gates, &self.ctx, &hosted).await;
        }
    }

    /// Sends what is ready; `last` also ends the body.
    async fn send(&mut self, last: bool) -> Result<(), Stop> {
        send(&mut self.out, &self.tx, last).await
    }

    /// Gates the held calls. Gates that answer at once cost nothing extra;
    /// when a gate has to wait, the text received so far goes out first and
    /// keep-alives follow while it waits.
    async fn gate(&mut self) -> Result<(), Stop> {
        let since = self.rw.last_call_delta();
        let every = self.state.config.stream.keepalive;
        let allowed = {
            let mut decide = std::pin::pin!(release::decide(
                &self.state,
                &self.gates,
                &self.ctx,
                self.rw.pending()
            ));
            match futures_util::poll!(decide.as_mut()) {
                Poll::Ready(a) => a,
                Poll::Pending => {
                    send(&mut self.out, &self.tx, false).await?;
                    let mut tick = tokio::time::interval_at(Instant::now() + every, every);
                    loop {
                        tokio::select! {
                            a = &mut decide => break a,
                            _ = tick.tick() => {
                                let keepalive = Piece { data: KEEPALIVE, last: false };
                                self.tx.send(keepalive).await.map_err(|_| Stop::ClientGone)?;
                            }
                        }
                    }
                }
            }
        };
        self.rw.resolve(&allowed, &mut self.out);
        // Remembered before anything of this answer goes out, so a request
        // that continues from it finds the record.
        if let Some(w) = self.rw.take_withheld() {
            self.state.remember_withheld(w);
        }
        if let Some(t) = since {
            self.state.metrics.release_latency.observe(t.elapsed());
        }
        Ok(())
    }
}
