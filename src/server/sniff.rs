//! Tells HTTP/1 from h2 with prior knowledge by a connection's first bytes,
//! and gives those bytes back on the first read together with whatever
//! arrived after them.
//!
//! hyper-util's automatic builder does the same but hands hyper the sniffed
//! 24 bytes alone: hyper's HTTP/1 read buffer then never holds the whole
//! request head after its first read and grows from 8 to 16 KiB, which every
//! connection kept for its lifetime (8 MiB for 1,000 open streams).

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

/// A connection whose first bytes were read to tell its protocol.
pub struct Sniffed<S> {
    io: S,
    head: [u8; PREFACE.len()],
    /// `head[at..len]` is still to be read.
    at: usize,
    len: usize,
}

/// Reads until the h2 preface is complete or ruled out. `None`: the peer
/// closed the connection before sending anything.
pub async fn sniff<S: AsyncRead + Unpin>(mut io: S) -> io::Result<Option<(Proto, Sniffed<S>)>> {
    let mut head = [0u8; PREFACE.len()];
    let mut len = 0;
    let proto = loop {
        let n = io.read(&mut head[len..]).await?;
        if n == 0 && len == 0 {
            return Ok(None);
        }
        len += n;
        // An early end is HTTP/1's to report (an incomplete head).
        if n == 0 || head[..len] != PREFACE[..len] {
            break Proto::H1;
        }
        if len == PREFACE.len() {
            break Proto::H2;
        }
    };
    Ok(Some((
        proto,
        Sniffed {
            io,
            head,
            at: 0,
            len,
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
        if this.at == this.len {
            return Pin::new(&mut this.io).poll_read(cx, buf);
        }
        let n = (this.len - this.at).min(buf.remaining());
        buf.put_slice(&this.head[this.at..this.at + n]);
        this.at += n;
        if this.at == this.len && buf.remaining() > 0 {
            // Whatever already followed, in the same read: the rest of the
            // request head, usually. Nothing yet is not an error: the
            // sniffed bytes are this read's answer.
            if let Poll::Ready(Err(e)) = Pin::new(&mut this.io).poll_read(cx, buf) {
                return Poll::Ready(Err(e));
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
