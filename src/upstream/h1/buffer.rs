//! A connection's read buffer: initialised memory kept for the connection's
//! life (reads need no `unsafe`), what was read between two cursors. It
//! grows while reads fill it, up to a bound, and is compacted when little
//! room is left at its end.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// The first size, and the least room a read is given.
const START: usize = 8 * 1024;
const MIN_ROOM: usize = 2 * 1024;

/// Largest size: reads that keep filling it grow it to this.
const MAX: usize = 128 * 1024;

pub struct Buffer {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl Buffer {
    /// An empty buffer; its memory comes with the first read.
    pub fn new() -> Buffer {
        Buffer {
            bytes: Vec::new(),
            start: 0,
            end: 0,
        }
    }

    /// What has been read and not consumed.
    pub fn filled(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Marks `n` bytes of [`Buffer::filled`] as used.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Reads once from `io` into the room after what is filled; `Ok(0)` is
    /// the end of the stream.
    pub fn poll_fill<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        self.make_room();
        let mut rb = ReadBuf::new(&mut self.bytes[self.end..]);
        match Pin::new(io).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                let full = self.end + n == self.bytes.len();
                self.end += n;
                if full && self.bytes.len() < MAX {
                    // Reads fill it: a larger one takes the next in fewer.
                    self.bytes.resize((self.bytes.len() * 2).min(MAX), 0);
                }
                Poll::Ready(Ok(n))
            }
            other => other.map(|r| r.map(|()| 0)),
        }
    }

    /// Lets go of memory a large response grew it to (an idle connection
    /// keeps at most the first size).
    pub fn shrink(&mut self) {
        if self.is_empty() && self.bytes.len() > START {
            self.bytes = Vec::new();
        }
    }

    fn make_room(&mut self) {
        if self.bytes.len() - self.end >= MIN_ROOM {
            return;
        }
        if self.start > 0 {
            self.bytes.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.bytes.len() - self.end < MIN_ROOM {
            let grown = (self.bytes.len() * 2).max(START).max(self.end + MIN_ROOM);
            self.bytes.resize(grown, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn fill(b: &mut Buffer, mut from: &[u8]) -> usize {
        let mut cx = Context::from_waker(Waker::noop());
        match b.poll_fill(&mut from, &mut cx) {
            Poll::Ready(Ok(n)) => n,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn keeps_what_is_not_consumed_across_reads_and_compactions() {
        let mut b = Buffer::new();
        let data: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        let mut read = 0;
        let mut seen = Vec::new();
        while read < data.len() {
            read += fill(&mut b, &data[read..]);
            let keep = b.filled().len() / 3;
            let n = b.filled().len() - keep;
            seen.extend_from_slice(&b.filled()[..n]);
            b.consume(n);
        }
        seen.extend_from_slice(b.filled());
        b.consume(b.filled().len());
        assert_eq!(seen, data);
        assert!(b.is_empty());
        assert!(b.bytes.len() <= MAX);
    }

    #[test]
    fn the_end_of_the_stream_reads_zero() {
        let mut b = Buffer::new();
        assert_eq!(fill(&mut b, b""), 0);
        assert!(b.is_empty());
    }
}
