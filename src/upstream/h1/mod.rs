//! toolgate's own HTTP/1.1 client connection: one request at a time, its
//! head and a known-length body written in one go, the response head read
//! with `httparse` and the body decoded in place in the agent's task
//! (hyper's client decoded a chunk's size line a byte at a time and passed
//! each chunk through a channel). Framing is strict ([`head`], [`chunked`]):
//! what could be read two ways is a protocol fault, and the connection is
//! kept only after a body that ended exactly.

mod buffer;
pub mod chunked;
pub mod head;

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};

use self::buffer::Buffer;
use self::chunked::Chunked;
use self::head::{Framing, Parsed, Sent};
use super::stream::Stream;
use super::UpstreamBody;
use crate::error::{Error, Fault};

/// Broken framing or a broken head, with what was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// Request bytes gathered before a write: a body up to this size goes out
/// in the head's write.
const WRITE_BATCH: usize = 64 * 1024;

/// One upstream connection and what has been read from it.
pub struct Conn {
    io: Stream,
    buf: Buffer,
}

impl Conn {
    pub fn new(io: Stream) -> Box<Conn> {
        Box::new(Conn {
            io,
            buf: Buffer::new(),
        })
    }

    /// Whether a kept connection can take a request: the upstream has not
    /// closed it, and sent nothing since its last response.
    pub fn alive(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut cx = Context::from_waker(Waker::noop());
        let mut probe = [0u8; 1];
        let mut rb = ReadBuf::new(&mut probe);
        Pin::new(&mut self.io)
            .poll_read(&mut cx, &mut rb)
            .is_pending()
    }
}

fn reset(what: &str, e: impl std::fmt::Display) -> Error {
    Error::UpstreamConnect(Fault::Reset, format!("{what}: {e}"))
}

fn protocol(m: Malformed) -> Error {
    Error::UpstreamConnect(Fault::Protocol, m.0.to_string())
}

/// Sends `req` on `conn` and reads the response head; the body is read
/// from the returned [`Reader`].
pub async fn send(
    mut conn: Box<Conn>,
    req: Request<UpstreamBody>,
) -> Result<(Response<()>, Reader), Error> {
    let (parts, mut body) = req.into_parts();
    let sent = Sent::of(&parts.method, http_body::Body::size_hint(&body).exact());
    let mut out = Vec::with_capacity(1024);
    head::write_request(&parts.method, &parts.uri, &parts.headers, sent, &mut out);
    let mut written: u64 = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| reset("reading the request body", e))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if data.is_empty() {
            continue;
        }
        written += data.len() as u64;
        if matches!(sent, Sent::Length(n) if written > n) || sent == Sent::None {
            // More than its length said: never written, so the upstream
            // cannot read the rest as a request of its own.
            return Err(reset(
                "the request body",
                "longer than its announced length",
            ));
        }
        if sent == Sent::Chunked {
            out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
        }
        if out.len() + data.len() <= WRITE_BATCH {
            out.extend_from_slice(&data);
        } else {
            write(&mut conn, &out).await?;
            out.clear();
            write(&mut conn, &data).await?;
        }
        if sent == Sent::Chunked {
            out.extend_from_slice(b"\r\n");
        }
    }
    match sent {
        Sent::Chunked => out.extend_from_slice(b"0\r\n\r\n"),
        Sent::Length(n) if n != written => {
            return Err(reset("the request body", "not its announced length"))
        }
        _ => {}
    }
    // Behind the tasks already ready: the requests of one turn go out back
    // to back, and the upstream is woken once for them (crate::net::defer).
    crate::net::defer::turn().await;
    write(&mut conn, &out).await?;
    conn.io
        .flush()
        .await
        .map_err(|e| reset("writing the request", e))?;
    let (head, framing, keep_alive) = poll_fn(|cx| read_head(&mut conn, &parts.method, cx)).await?;
    let state = match framing {
        Framing::Empty | Framing::Length(0) => State::Done,
        Framing::Length(n) => State::Length(n),
        Framing::Chunked => State::Chunked(Chunked::new()),
        Framing::Close => State::Close,
    };
    let reader = Reader {
        conn: Some(conn),
        state,
        keep_alive,
    };
    Ok((head, reader))
}

async fn write(conn: &mut Conn, bytes: &[u8]) -> Result<(), Error> {
    conn.io
        .write_all(bytes)
        .await
        .map_err(|e| reset("writing the request", e))
}

type Head = (Response<()>, Framing, bool);

fn read_head(conn: &mut Conn, method: &Method, cx: &mut Context<'_>) -> Poll<Result<Head, Error>> {
    loop {
        match head::parse_response(conn.buf.filled(), method).map_err(protocol)? {
            Some(Parsed::Interim(used)) => conn.buf.consume(used),
            Some(Parsed::Final {
                head,
                framing,
                keep_alive,
                used,
            }) => {
                conn.buf.consume(used);
                return Poll::Ready(Ok((head, framing, keep_alive)));
            }
            None => match conn.buf.poll_fill(&mut conn.io, cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(reset(
                        "reading the response head",
                        "connection closed before it",
                    )))
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => {
                    return Poll::Ready(Err(reset("reading the response head", e)))
                }
            },
        }
    }
}

#[derive(Debug)]
enum State {
    Length(u64),
    Chunked(Chunked),
    Close,
    Done,
}

/// A response body being read from its connection.
pub struct Reader {
    conn: Option<Box<Conn>>,
    state: State,
    keep_alive: bool,
}

impl Reader {
    /// Whether the body has ended.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// The bytes still to come, when the body has a known length.
    pub fn remaining(&self) -> Option<u64> {
        match self.state {
            State::Length(n) => Some(n),
            State::Done => Some(0),
            _ => None,
        }
    }

    /// The connection, once the body has ended exactly and the connection
    /// can take another request; given once.
    pub fn reusable(&mut self) -> Option<Box<Conn>> {
        if !self.is_done() || !self.keep_alive {
            return None;
        }
        let mut conn = self.conn.take().filter(|c| c.buf.is_empty())?;
        conn.buf.shrink();
        Some(conn)
    }

    /// The next piece of the body: everything that has arrived, decoded.
    pub fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Error>>> {
        loop {
            if let Some(piece) = self.take() {
                return Poll::Ready(Some(piece));
            }
            if self.is_done() {
                return Poll::Ready(None);
            }
            let Some(conn) = self.conn.as_mut() else {
                return Poll::Ready(None);
            };
            match conn.buf.poll_fill(&mut conn.io, cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) if matches!(self.state, State::Close) => {
                    self.state = State::Done;
                    self.keep_alive = false;
                    return Poll::Ready(None);
                }
                // Cut short (the end its framing promised never came), or
                // the socket failed.
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    self.conn = None;
                    return Poll::Ready(Some(Err(Error::UpstreamLost(Fault::Reset))));
                }
                Poll::Ready(Ok(_)) => {}
            }
        }
    }

    /// Decodes what is buffered; `None` when that gave no data.
    fn take(&mut self) -> Option<Result<Bytes, Error>> {
        let conn = self.conn.as_mut()?;
        let input = conn.buf.filled();
        if input.is_empty() {
            return None;
        }
        let (used, data) = match &mut self.state {
            State::Done => return None,
            State::Length(left) => {
                let n = input
                    .len()
                    .min(usize::try_from(*left).unwrap_or(usize::MAX));
                let data = Bytes::copy_from_slice(&input[..n]);
                *left -= n as u64;
                if *left == 0 {
                    self.state = State::Done;
                }
                (n, data)
            }
            State::Close => (input.len(), Bytes::copy_from_slice(input)),
            State::Chunked(c) => {
                let mut out = Vec::with_capacity(input.len());
                match c.decode(input, &mut out) {
                    Ok(used) => {
                        if c.is_done() {
                            self.state = State::Done;
                        }
                        (used, Bytes::from(out))
                    }
                    Err(m) => {
                        tracing::debug!(why = m.0, "upstream chunked framing broken");
                        self.conn = None;
                        return Some(Err(Error::UpstreamLost(Fault::Protocol)));
                    }
                }
            }
        };
        conn.buf.consume(used);
        (!data.is_empty()).then_some(Ok(data))
    }
}
