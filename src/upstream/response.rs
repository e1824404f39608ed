//! The upstream response body. On HTTP/1.1 it reads its own connection (see
//! [`super::h1`]) and gives the connection back once the body has ended;
//! on HTTP/2 it is hyper's. Its errors are toolgate's: a lost upstream,
//! with what broke.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::h1::Reader;
use super::pool::{Pool, Slot};
use crate::error::Error;

pub struct ResponseBody(Inner);

enum Inner {
    H1(Reader, Arc<Pool>),
    /// The body, and its stream's place on the shared connection.
    H2 {
        body: Incoming,
        _slot: Slot,
    },
}

impl ResponseBody {
    pub(super) fn h1(mut reader: Reader, pool: Arc<Pool>) -> ResponseBody {
        // A body with nothing in it is never polled by some readers.
        if let Some(conn) = reader.reusable() {
            pool.put_back(conn);
        }
        ResponseBody(Inner::H1(reader, pool))
    }

    /// A body whose connection runs on its own task (HTTP/2); `slot` is
    /// given back when the body is dropped.
    pub(super) fn shared(body: Incoming, slot: Slot) -> ResponseBody {
        ResponseBody(Inner::H2 { body, _slot: slot })
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        match &mut self.0 {
            Inner::H1(reader, pool) => {
                let next = reader.poll_data(cx);
                // At the end, or with its last piece (hyper, and the gated
                // body, stop polling once `is_end_stream` says so).
                if let Some(conn) = reader.reusable() {
                    pool.put_back(conn);
                }
                next.map(|d| d.map(|r| r.map(Frame::data)))
            }
            Inner::H2 { body, .. } => Pin::new(body)
                .poll_frame(cx)
                .map(|f| f.map(|r| r.map_err(|e| Error::UpstreamLost(super::fault::of(&e))))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Inner::H1(reader, _) => reader.is_done(),
            Inner::H2 { body, .. } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Inner::H1(reader, _) => match reader.remaining() {
                Some(n) => SizeHint::with_exact(n),
                None => SizeHint::default(),
            },
            Inner::H2 { body, .. } => body.size_hint(),
        }
    }
}
