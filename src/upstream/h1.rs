//! HTTP/1.1 upstream connections on hyper's client connection
//! (`hyper::client::conn::http1`), driven in the agent's own task: the
//! connection is polled by the request that holds it, while its head is
//! awaited and then by its response body, so nothing runs on a task of its
//! own. hyper parses; its parsed head then passes a strict filter
//! ([`framing`]): framing another reader could take differently is a
//! protocol fault, and a connection is kept only after a body that ended
//! exactly.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Request, Response};
use http_body::Body;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

use super::fault;
use super::stream::Stream;
use super::UpstreamBody;
use crate::error::{Error, Fault};

/// Requests up to this size wait one scheduler turn before they are written.
const DEFER_MAX: u64 = 64 * 1024;

/// Most response header lines read.
const MAX_HEADERS: usize = 128;

type Driver = Pin<Box<http1::Connection<TokioIo<Stream>, UpstreamBody>>>;

/// One upstream HTTP/1.1 connection: the handle requests are sent on, and
/// the connection itself, polled by whoever holds it.
pub struct Conn {
    tx: http1::SendRequest<UpstreamBody>,
    driver: Driver,
}

impl Conn {
    /// Starts HTTP/1.1 on an open socket (nothing is written yet).
    pub async fn new(io: Stream) -> Result<Box<Conn>, Error> {
        let (tx, driver) = http1::Builder::new()
            .max_headers(MAX_HEADERS)
            // A large body is queued as it is, not copied into hyper's
            // write buffer (the automatic choice flattened it here).
            .writev(true)
            .handshake(TokioIo::new(io))
            .await
            .map_err(|e| Error::UpstreamConnect(fault::of(&e), e.to_string()))?;
        Ok(Box::new(Conn {
            tx,
            driver: Box::pin(driver),
        }))
    }

    /// Whether a kept connection can take a request: the upstream has not
    /// closed it or sent anything since its last response, and hyper is
    /// ready for the next request.
    pub fn alive(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        if self.driver.as_mut().poll(&mut cx).is_ready() {
            return false;
        }
        matches!(self.tx.poll_ready(&mut cx), Poll::Ready(Ok(())))
    }
}

fn reset(what: &str, e: impl std::fmt::Display) -> Error {
    Error::UpstreamConnect(Fault::Reset, format!("{what}: {e}"))
}

fn failed(e: &hyper::Error) -> Error {
    Error::UpstreamConnect(fault::of(e), e.to_string())
}

/// Sends `req` on `conn` and reads the response head; the body is read
/// from the returned [`Reader`], which drives the connection on.
pub async fn send(
    mut conn: Box<Conn>,
    mut req: Request<UpstreamBody>,
) -> Result<(Response<()>, Reader), Error> {
    // HTTP/1.1 names the target by its path and the origin in `Host`; the
    // body's framing is hyper's, from the body's exact size or chunked.
    let uri = req.uri().clone();
    if let Some(a) = uri.authority() {
        if let Ok(host) = HeaderValue::from_str(a.as_str()) {
            req.headers_mut().insert(header::HOST, host);
        }
    }
    if let Some(pq) = uri.path_and_query() {
        if let Ok(path) = http::Uri::try_from(pq.as_str()) {
            *req.uri_mut() = path;
        }
    }
    req.headers_mut().remove(header::CONTENT_LENGTH);
    req.headers_mut().remove(header::TRANSFER_ENCODING);
    // A small request waits behind the tasks already ready: the requests of
    // one turn go out back to back, and the upstream is woken once for them
    // (crate::net::defer). A large one goes at once, so its body is not
    // held while other requests read theirs.
    if Body::size_hint(req.body())
        .exact()
        .is_some_and(|n| n <= DEFER_MAX)
    {
        crate::net::defer::turn().await;
    }
    let mut answer = std::pin::pin!(conn.tx.send_request(req));
    let mut ended = false;
    let resp = poll_fn(|cx| {
        if !ended {
            match conn.driver.as_mut().poll(cx) {
                Poll::Ready(Err(e)) => return Poll::Ready(Err(failed(&e))),
                Poll::Ready(Ok(())) => ended = true,
                Poll::Pending => {}
            }
        }
        match answer.as_mut().poll(cx) {
            Poll::Ready(r) => Poll::Ready(r.map_err(|e| failed(&e))),
            Poll::Pending if ended => Poll::Ready(Err(reset(
                "reading the response head",
                "connection closed before it",
            ))),
            Poll::Pending => Poll::Pending,
        }
    })
    .await?;
    framing(resp.headers())?;
    let (parts, body) = resp.into_parts();
    let reader = Reader {
        body,
        conn: (!ended).then_some(conn),
        done: false,
    };
    Ok((Response::from_parts(parts, ()), reader))
}

/// Refuses a response head whose body another reader could delimit
/// differently (RFC 9112 §6.3): both `Content-Length` and
/// `Transfer-Encoding`, lengths that differ, or a transfer coding other
/// than `chunked` alone.
pub fn framing(h: &HeaderMap) -> Result<(), Error> {
    let protocol = |why: &str| Error::UpstreamConnect(Fault::Protocol, why.to_string());
    let te: Vec<&HeaderValue> = h.get_all(header::TRANSFER_ENCODING).iter().collect();
    let cl: Vec<&HeaderValue> = h.get_all(header::CONTENT_LENGTH).iter().collect();
    if !te.is_empty() && !cl.is_empty() {
        return Err(protocol("both content-length and transfer-encoding"));
    }
    if let [one, ..] = cl.as_slice() {
        if cl.iter().any(|v| v.as_bytes() != one.as_bytes()) {
            return Err(protocol("differing content-lengths"));
        }
    }
    match te.as_slice() {
        [] => Ok(()),
        [one] if one.as_bytes().eq_ignore_ascii_case(b"chunked") => Ok(()),
        _ => Err(protocol("a transfer coding other than chunked")),
    }
}

/// A response body being read, driving its connection.
pub struct Reader {
    body: Incoming,
    /// `None` once the connection ended or broke (then it is not kept).
    conn: Option<Box<Conn>>,
    done: bool,
}

impl Reader {
    /// Whether the body has ended.
    pub fn is_done(&self) -> bool {
        self.done || self.body.is_end_stream()
    }

    /// The bytes still to come, when the body has a known length.
    pub fn remaining(&self) -> Option<u64> {
        self.body.size_hint().exact()
    }

    /// The connection, once the body has ended exactly and the connection
    /// can take another request; given once.
    pub fn reusable(&mut self) -> Option<Box<Conn>> {
        if !self.is_done() {
            return None;
        }
        self.conn.take()
    }

    /// The next piece of the body.
    pub fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Error>>> {
        loop {
            if let Some(c) = self.conn.as_mut() {
                match c.driver.as_mut().poll(cx) {
                    Poll::Pending => {}
                    // The connection ended (closed, or broken): the body
                    // says how it ended for it.
                    Poll::Ready(_) => self.conn = None,
                }
            }
            return match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(f))) => match f.into_data() {
                    Ok(d) if d.is_empty() => continue,
                    Ok(d) => Poll::Ready(Some(Ok(d))),
                    // Trailers: nothing for the agent.
                    Err(_) => continue,
                },
                Poll::Ready(Some(Err(e))) => {
                    self.conn = None;
                    Poll::Ready(Some(Err(Error::UpstreamLost(fault::of(&e)))))
                }
                Poll::Ready(None) => {
                    self.done = true;
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            };
        }
    }
}
