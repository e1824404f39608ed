//! Bodies without gates: [`Pieces`] (a rewritten whole body),
//! [`Deadline`] (a pass-through body bounded by a deadline: a response by
//! the upstream timeout, a request by the request-body timeout) and
//! [`Scrubbed`] (a pass-through body with upstream keys masked).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::time::Instant;

use super::BodyError;
use crate::error::Error;

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

/// A pass-through body bounded by a deadline. Past it the body ends with an
/// error, so its reader sees a cut-off body (the agent a reset or no final
/// chunk, the provider an aborted request), never a short body that looks
/// whole.
pub struct Deadline<B> {
    inner: B,
    sleep: Pin<Box<tokio::time::Sleep>>,
    late: fn() -> Error,
}

impl<B> Deadline<B> {
    /// A response body bounded by the upstream's total deadline.
    pub fn new(inner: B, deadline: Instant) -> Deadline<B> {
        Deadline {
            inner,
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            late: || Error::UpstreamTimeout,
        }
    }

    /// An agent's request body bounded by `[limits]
    /// request_body_timeout_secs`, as on the gated routes: a slow one does
    /// not hold a stream slot until the upstream's timeout.
    pub fn request(inner: B, deadline: Instant) -> Deadline<B> {
        Deadline {
            late: || Error::RequestTimeout,
            ..Deadline::new(inner, deadline)
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
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new((this.late)())))),
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

/// A pass-through body with toolgate's upstream keys masked
/// ([`crate::upstream::scrub::Carry`]); trailers pass after the bytes held back.
pub struct Scrubbed<B> {
    inner: B,
    state: std::sync::Arc<crate::proxy::state::State>,
    carry: crate::upstream::scrub::Carry,
    trailers: Option<Frame<Bytes>>,
    done: bool,
}

impl<B> Scrubbed<B> {
    pub fn new(inner: B, state: std::sync::Arc<crate::proxy::state::State>) -> Scrubbed<B> {
        Scrubbed {
            inner,
            state,
            carry: crate::upstream::scrub::Carry::default(),
            trailers: None,
            done: false,
        }
    }
}

impl<B> Body for Scrubbed<B>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
{
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(this.trailers.take().map(Ok));
            }
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => {
                    // The upstream connection's own error, or `Deadline`'s.
                    if let Some(own) = e.downcast_ref::<Error>() {
                        this.state.metrics.upstream_fault(own);
                    }
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(Some(Ok(f))) => f,
                Poll::Ready(None) => {
                    this.done = true;
                    let rest = this.carry.next(&this.state.scrub, None);
                    if rest.is_empty() {
                        continue;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(rest))));
                }
            };
            match frame.into_data() {
                Ok(d) => {
                    let out = this.carry.next(&this.state.scrub, Some(d));
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
                Err(f) => {
                    this.trailers = Some(f);
                    this.done = true;
                    let rest = this.carry.next(&this.state.scrub, None);
                    if !rest.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(rest))));
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.trailers.is_none()
    }
}
