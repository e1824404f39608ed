//! Whole bodies, read within a size limit, the body budget and a deadline,
//! and held near their own size.
//!
//! Frames are copied out at once (a frame can pin a receive buffer many times
//! its own size) into the final buffer when the length is announced, else into
//! blocks joined once at the end; a doubling buffer would hold the body up to
//! three times over while it grows. Bodies of [`MAP_MIN`] bytes or more live
//! in their own anonymous memory maps, which go back to the OS the moment the
//! body is dropped: a burst of large bodies leaves no memory behind in the
//! allocator.

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::upstream::ResponseBody;
use memmap2::MmapMut;

use crate::error::Error;
use crate::json::{to_writer_marking, Marks, Places};
use crate::proxy::budget::Charge;
use crate::upstream::encoding::ContentDecoder;

/// Bodies (and blocks) this large are mapped rather than allocated.
pub const MAP_MIN: usize = 256 * 1024;
/// The first block of a body of unknown length, then each further one.
const FIRST_BLOCK: usize = 64 * 1024;
const BLOCK: usize = 1 << 20;

/// A fixed-capacity buffer: heap memory when small, its own map when large.
struct Buf {
    mem: Mem,
    len: usize,
}

enum Mem {
    Heap(Vec<u8>),
    Map(MmapMut),
}

impl Buf {
    fn with_capacity(cap: usize) -> Result<Buf, Error> {
        let mem = if cap >= MAP_MIN {
            Mem::Map(MmapMut::map_anon(cap).map_err(|_| Error::Overloaded("memory"))?)
        } else {
            Mem::Heap(Vec::with_capacity(cap))
        };
        Ok(Buf { mem, len: 0 })
    }

    fn capacity(&self) -> usize {
        match &self.mem {
            Mem::Heap(v) => v.capacity(),
            Mem::Map(m) => m.len(),
        }
    }

    /// Appends what fits; returns how much did.
    fn fill(&mut self, data: &[u8]) -> usize {
        let n = (self.capacity() - self.len).min(data.len());
        match &mut self.mem {
            Mem::Heap(v) => v.extend_from_slice(&data[..n]),
            Mem::Map(m) => m[self.len..self.len + n].copy_from_slice(&data[..n]),
        }
        self.len += n;
        n
    }

    fn bytes(&self) -> &[u8] {
        match &self.mem {
            Mem::Heap(v) => v,
            Mem::Map(m) => &m[..self.len],
        }
    }

    fn into_bytes(self) -> Bytes {
        match self.mem {
            Mem::Heap(v) => Bytes::from(v),
            Mem::Map(m) => Bytes::from_owner(m).slice(..self.len),
        }
    }
}

/// Bytes gathered so far.
struct Gather {
    blocks: Vec<Buf>,
    total: usize,
}

impl Gather {
    fn new(announced: Option<usize>) -> Result<Gather, Error> {
        let blocks = match announced {
            Some(n) => vec![Buf::with_capacity(n)?],
            None => Vec::new(),
        };
        Ok(Gather { blocks, total: 0 })
    }

    fn push(&mut self, mut data: &[u8]) -> Result<(), Error> {
        self.total += data.len();
        while !data.is_empty() {
            let room = self.blocks.last().is_some_and(|b| b.len < b.capacity());
            if !room {
                let size = if self.blocks.is_empty() {
                    FIRST_BLOCK
                } else {
                    BLOCK
                };
                self.blocks.push(Buf::with_capacity(size)?);
            }
            if let Some(b) = self.blocks.last_mut() {
                let n = b.fill(data);
                data = &data[n..];
            }
        }
        Ok(())
    }

    /// The body in one piece: the one block as it is, else the blocks joined.
    fn finish(mut self) -> Result<Bytes, Error> {
        if self.blocks.len() <= 1 {
            return Ok(self.blocks.pop().map(Buf::into_bytes).unwrap_or_default());
        }
        let mut out = Buf::with_capacity(self.total)?;
        for b in self.blocks.drain(..) {
            out.fill(b.bytes());
        }
        Ok(out.into_bytes())
    }
}

impl std::io::Write for Gather {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.push(buf)
            .map_err(|_| std::io::ErrorKind::OutOfMemory)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A JSON value written out as a body, and where each of `marks` (nodes of
/// it) was written in it ([`crate::json::to_writer_marking`]); `size` is
/// about how long it will be (large ones go in their own maps).
pub fn json_body(
    v: &serde_json::Value,
    size: usize,
    marks: &Marks<'_>,
) -> Result<(Bytes, Places), Error> {
    let full = |_| Error::Overloaded("memory");
    if size < MAP_MIN {
        let mut out = Vec::with_capacity(size + size / 8 + 64);
        let found = to_writer_marking(&mut out, v, marks).map_err(full)?;
        return Ok((Bytes::from(out), found));
    }
    let mut g = Gather::new(None)?;
    let found = to_writer_marking(&mut g, v, marks).map_err(full)?;
    Ok((g.finish()?, found))
}

/// Lets the allocator hand memory freed after a burst back to the OS.
///
/// mimalloc returns freed large blocks lazily, when it next allocates one; a
/// process that goes idle after a burst of large requests would keep them.
/// Reserving (never touching) a large block here, on the reload loop's tick,
/// is that next allocation: it costs no memory and runs the deferred return.
pub fn return_freed_memory() {
    std::hint::black_box(Vec::<u8>::with_capacity(8 << 20));
}

/// The `Content-Length` of a message, if it is a number.
pub fn content_length(h: &http::HeaderMap) -> Option<u64> {
    h.get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Reads the agent's request body up to `limit` bytes, charged to the budget.
pub async fn request(
    mut body: Incoming,
    announced: Option<u64>,
    limit: usize,
    charge: &mut Charge,
) -> Result<Bytes, Error> {
    let announced = announced.and_then(|n| usize::try_from(n).ok());
    if announced.is_some_and(|n| n > limit) {
        return Err(Error::PayloadTooLarge { limit });
    }
    // Charged as bytes arrive, not as announced: a slow client announcing a
    // large body holds no budget it has not sent (an untouched map costs no
    // memory either).
    let mut g = Gather::new(announced)?;
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|_| Error::BadRequest("The request body could not be read.".into()))?;
        if let Ok(d) = frame.into_data() {
            if g.total + d.len() > limit {
                return Err(Error::PayloadTooLarge { limit });
            }
            charge.grow_to(g.total + d.len())?;
            g.push(&d)?;
        }
    }
    g.finish()
}

/// Reads a whole upstream body, decoded, up to `limit` bytes and the deadline,
/// charged to the budget.
pub async fn response(
    mut body: ResponseBody,
    mut dec: ContentDecoder,
    announced: Option<u64>,
    limit: usize,
    deadline: tokio::time::Instant,
    charge: &mut Charge,
) -> Result<Bytes, Error> {
    let too_large = || Error::UpstreamUnreadable("response larger than limits.max_response_bytes");
    // An announced length is the decoded length only without an encoding.
    let announced = announced
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= limit && matches!(dec, ContentDecoder::Identity));
    let mut g = Gather::new(announced)?;
    loop {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(Error::UpstreamTimeout),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(e),
            Ok(Some(Ok(f))) => {
                if let Ok(d) = f.into_data() {
                    let piece = dec.decode(&d)?;
                    if g.total + piece.len() > limit {
                        return Err(too_large());
                    }
                    charge.grow_to(g.total + piece.len())?;
                    g.push(&piece)?;
                }
            }
        }
    }
    let tail = dec.finish()?;
    if g.total + tail.len() > limit {
        return Err(too_large());
    }
    charge.grow_to(g.total + tail.len())?;
    g.push(&tail)?;
    g.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_join_to_the_exact_bytes() {
        for size in [0, 17, FIRST_BLOCK + 3, 3 * BLOCK + 17] {
            let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            for announced in [None, Some(data.len())] {
                let mut g = Gather::new(announced).unwrap();
                for piece in data.chunks(BLOCK / 3 + 5) {
                    g.push(piece).unwrap();
                }
                assert_eq!(g.finish().unwrap(), data, "{size} {announced:?}");
            }
        }
    }

    #[test]
    fn a_body_written_small_or_in_maps_notes_where_its_marks_went() {
        let long = "x".repeat(MAP_MIN);
        for history in ["", long.as_str()] {
            let v = serde_json::json!({"messages": [{"content": history}],
                "tools": [{"function": {"name": "a", "parameters": {"type": "object"}}}]});
            let p = &v["tools"][0]["function"]["parameters"];
            let text = serde_json::to_vec(&v).unwrap();
            let marks = Marks {
                nodes: vec![p],
                within: &["tools"],
            };
            let (body, places) = json_body(&v, text.len(), &marks).unwrap();
            assert_eq!(body, text);
            let at = places[0].clone().unwrap();
            assert_eq!(&body[at], br#"{"type":"object"}"#);
        }
    }
}
