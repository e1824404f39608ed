//! Tells HTTP/1 from h2 with prior knowledge by a connection's first bytes,
//! and gives those bytes back on the first read together with whatever
//! arrived after them.
//!
//! The first read takes up to 1 KiB, the whole request head usually, so a
//! new connection costs one read of its socket before hyper parses, not
//! two. hyper-util's automatic builder reads the 24 bytes of the preface
//! and hands hyper those alone: hyper's HTTP/1 read buffer then never holds
//! the whole request head after its first read and grows from 8 to 16 KiB,
//! which every connection kept for its lifetime (8 MiB for 1,000 open
//! streams).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// What an h2 client with prior knowledge sends first (RFC 9113 §3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    H1,
    H2,
}

/// How much the first read takes: a whole request head usually, so that a
/// new connection costs one read before hyper's, not two.
const FIRST_READ: usize = 1024;

/// A connection whose first bytes were read to tell its protocol.
pub struct Sniffed<S> {
    io: S,
    /// The bytes read; `head[at..]` is still to be read (emptied then).
    head: Vec<u8>,
    at: usize,
    /// The last read took less than it could: the socket had nothing more
    /// then, so the first read of the connection does not ask it again.
    drained: bool,
}

/// Reads until the h2 preface is complete or ruled out. `None`: the peer
/// closed the connection before sending anything.
pub async fn sniff<S: AsyncRead + Unpin>(mut io: S) -> io::Result<Option<(Proto, Sniffed<S>)>> {
    let mut head = vec![0u8; FIRST_READ];
    let mut len = 0;
    let proto = loop {
        let n = io.read(&mut head[len..]).await?;
        if n == 0 && len == 0 {
            return Ok(None);
        }
        len += n;
        let seen = len.min(PREFACE.len());
        // An early end is HTTP/1's to report (an incomplete head).
        if n == 0 || head[..seen] != PREFACE[..seen] {
            break Proto::H1;
        }
        if len >= PREFACE.len() {
            break Proto::H2;
        }
    };
    head.truncate(len);
    Ok(Some((
        proto,
        Sniffed {
            io,
            head,
            at: 0,
            drained: len < FIRST_READ,
        },
    )))
}

impl<S: AsyncRead + Unpin> AsyncRead for Sniffed<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at == this.head.len() {
            return Pin::new(&mut this.io).poll_read(cx, buf);
        }
        let n = (this.head.len() - this.at).min(buf.remaining());
        buf.put_slice(&this.head[this.at..this.at + n]);
        this.at += n;
        if this.at == this.head.len() {
            this.head = Vec::new();
            this.at = 0;
            if buf.remaining() > 0 && !this.drained {
                // Whatever already followed, in the same read: the rest of
                // the request head, usually. Nothing yet is not an error:
                // the sniffed bytes are this read's answer.
                if let Poll::Ready(Err(e)) = Pin::new(&mut this.io).poll_read(cx, buf) {
                    return Poll::Ready(Err(e));
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Sniffed<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
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
    use tokio::io::AsyncWriteExt;

    async fn sniffed(sent: &[&[u8]]) -> (Option<Proto>, Vec<u8>) {
        let (mut client, server) = tokio::io::duplex(1024);
        for part in sent {
            client.write_all(part).await.ok();
        }
        drop(client);
        match sniff(server).await {
            Ok(Some((proto, mut s))) => {
                let mut all = Vec::new();
                s.read_to_end(&mut all).await.ok();
                (Some(proto), all)
            }
            _ => (None, Vec::new()),
        }
    }

    #[tokio::test]
    async fn http1_is_told_by_its_first_byte_and_loses_nothing() {
        let req = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n\r\n";
        assert_eq!(sniffed(&[req]).await, (Some(Proto::H1), req.to_vec()));
    }

    #[tokio::test]
    async fn the_preface_is_h2_even_when_it_comes_in_pieces() {
        let (proto, bytes) = sniffed(&[b"PRI * HT", b"TP/2.0\r\n\r\nSM\r\n\r\n", b"frames"]).await;
        assert_eq!(proto, Some(Proto::H2));
        assert_eq!(bytes, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nframes");
    }

    #[tokio::test]
    async fn a_method_that_starts_like_the_preface_is_http1() {
        let req = b"PRIVATE / HTTP/1.1\r\n\r\n";
        assert_eq!(sniffed(&[req]).await, (Some(Proto::H1), req.to_vec()));
    }

    #[tokio::test]
    async fn a_short_prefix_then_close_is_http1_with_its_bytes() {
        assert_eq!(sniffed(&[b"PRI"]).await, (Some(Proto::H1), b"PRI".to_vec()));
    }

    #[tokio::test]
    async fn nothing_sent_is_no_connection() {
        assert_eq!(sniffed(&[]).await, (None, Vec::new()));
    }

    /// A socket holding `data`, then nothing yet (reads wait); counts reads.
    struct Socket {
        data: Vec<u8>,
        reads: usize,
    }

    impl AsyncRead for Socket {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            this.reads += 1;
            if this.data.is_empty() {
                return Poll::Pending;
            }
            let n = this.data.len().min(buf.remaining());
            buf.put_slice(&this.data[..n]);
            this.data.drain(..n);
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_head_read_whole_by_the_sniff_is_not_asked_for_again() {
        let req = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}";
        let socket = Socket {
            data: req.to_vec(),
            reads: 0,
        };
        let Ok(Some((Proto::H1, mut s))) = sniff(socket).await else {
            panic!("sniff failed");
        };
        let mut buf = [0u8; 8192];
        let n = s.read(&mut buf).await.unwrap_or(0);
        assert_eq!(&buf[..n], &req[..]);
        assert_eq!(s.io.reads, 1, "one read of the socket for the whole head");
    }

    #[tokio::test]
    async fn the_first_read_carries_what_followed_the_sniffed_bytes() {
        let req = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}";
        let (mut client, server) = tokio::io::duplex(1024);
        client.write_all(req).await.ok();
        let Ok(Some((_, mut s))) = sniff(server).await else {
            panic!("sniff failed");
        };
        let mut buf = [0u8; 8192];
        let n = s.read(&mut buf).await.unwrap_or(0);
        assert_eq!(&buf[..n], &req[..]);
    }
}
