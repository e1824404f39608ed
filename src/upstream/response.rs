//! The upstream response body. On HTTP/1.1 it drives its own connection (see
//! [`super::pool`]) and gives the connection back once the body has ended.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::pool::{Held, Pool};

pub struct ResponseBody {
    body: Incoming,
    /// The HTTP/1.1 connection this body is read from, until it ends.
    held: Option<(Held, Arc<Pool>)>,
}

impl ResponseBody {
    pub(super) fn new(body: Incoming, held: Option<Held>, pool: Arc<Pool>) -> ResponseBody {
        ResponseBody {
            body,
            held: held.map(|h| (h, pool)),
        }
    }

    /// A body whose connection runs on its own task (HTTP/2).
    pub(super) fn shared(body: Incoming) -> ResponseBody {
        ResponseBody { body, held: None }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        if let Some((held, _)) = &mut this.held {
            match Pin::new(held.conn.as_mut()).poll(cx) {
                Poll::Pending => {}
                // Closed after the last byte: what is left is in the body.
                Poll::Ready(Ok(())) => this.held = None,
                Poll::Ready(Err(e)) => {
                    this.held = None;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
        let next = Pin::new(&mut this.body).poll_frame(cx);
        // At the end, or at the last frame of a body of known length (hyper,
        // and the gated body, stop polling once `is_end_stream` says so).
        let ended = match &next {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => this.body.is_end_stream(),
            _ => false,
        };
        if ended {
            if let Some((held, pool)) = this.held.take() {
                pool.put_back(held);
            }
        }
        next
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
