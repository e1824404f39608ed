//! Whole bodies, read within a size limit, the body budget and a deadline,
//! and held near their own size.
//!
//! Frames are copied out at once (a frame can pin a receive buffer many times
//! its own size) into the final buffer when the length is announced, else into
//! blocks joined once at the end; a doubling buffer would hold the body up to
//! three times over while it grows. Bodies of [`MAP_MIN`] bytes or more live
//! in their own anonymous memory maps, which go back to the OS once the body
//! is dropped: a burst of large bodies leaves no memory behind in the
//! allocator. A dropped body's map is kept until the reload loop's next tick
//! ([`return_freed_memory`]) for the next large body: a fresh map's pages
//! fault in one by one, zeroed, and that took a quarter of the CPU of a
//! 1 MB request.

use std::sync::Mutex;

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
/// Most maps, and bytes of them, kept between the reload loop's ticks.
const KEPT_MAPS: usize = 16;
const KEPT_BYTES: usize = 16 << 20;

/// Maps of bodies dropped since the last tick, to be written again.
static KEPT: Mutex<Vec<MmapMut>> = Mutex::new(Vec::new());

/// A map of at least `cap` bytes: the smallest kept one that is large
/// enough, else a new one. What a kept map held past a new body's length is
/// never read: a body is its bytes up to what was written.
fn map_of(cap: usize) -> Result<MmapMut, Error> {
    {
        let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
        let fit = (kept.iter().enumerate())
            .filter(|(_, m)| m.len() >= cap)
            .min_by_key(|(_, m)| m.len())
            .map(|(i, _)| i);
        if let Some(i) = fit {
            return Ok(kept.swap_remove(i));
        }
    }
    MmapMut::map_anon(cap).map_err(|_| Error::Overloaded("memory"))
}

/// Keeps a dropped body's map for the next one, within the bounds.
fn keep(m: MmapMut) {
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    let held: usize = kept.iter().map(|k| k.len()).sum();
    if kept.len() < KEPT_MAPS && held + m.len() <= KEPT_BYTES {
        kept.push(m);
    }
}

/// A body's map: kept ([`keep`]) when the body, or the block, drops.
struct Owned(Option<MmapMut>);

impl AsRef<[u8]> for Owned {
    fn as_ref(&self) -> &[u8] {
        self.0.as_deref().unwrap_or_default()
    }
}

impl AsMut<[u8]> for Owned {
    fn as_mut(&mut self) -> &mut [u8] {
        self.0.as_deref_mut().unwrap_or_default()
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(m) = self.0.take() {
            keep(m);
        }
    }
}

/// A fixed-capacity buffer: heap memory when small, its own map when large.
struct Buf {
    mem: Mem,
    len: usize,
}

enum Mem {
    Heap(Vec<u8>),
    Map(Owned),
}

impl Buf {
    fn with_capacity(cap: usize) -> Result<Buf, Error> {
        let mem = if cap >= MAP_MIN {
            Mem::Map(Owned(Some(map_of(cap)?)))
        } else {
            Mem::Heap(Vec::with_capacity(cap))
        };
        Ok(Buf { mem, len: 0 })
    }

    fn capacity(&self) -> usize {
        match &self.mem {
            Mem::Heap(v) => v.capacity(),
            Mem::Map(m) => m.as_ref().len(),
        }
    }

    /// Appends what fits; returns how much did.
    fn fill(&mut self, data: &[u8]) -> usize {
        let n = (self.capacity() - self.len).min(data.len());
        match &mut self.mem {
            Mem::Heap(v) => v.extend_from_slice(&data[..n]),
            Mem::Map(m) => m.as_mut()[self.len..self.len + n].copy_from_slice(&data[..n]),
        }
        self.len += n;
        n
    }

    fn bytes(&self) -> &[u8] {
        match &self.mem {
            Mem::Heap(v) => v,
            Mem::Map(m) => &m.as_ref()[..self.len],
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
    // Room for what the fence adds: past it, further blocks are joined at
    // the end, which copies the whole body once more.
    let room = size + size / 8 + 1024;
    if room < MAP_MIN {
        let mut out = Vec::with_capacity(room);
        let found = to_writer_marking(&mut out, v, marks).map_err(full)?;
        return Ok((Bytes::from(out), found));
    }
    // One map that size: pages never written take no memory.
    let mut g = Gather::new(Some(room))?;
    let found = to_writer_marking(&mut g, v, marks).map_err(full)?;
    Ok((g.finish()?, found))
}

/// Lets the allocator hand memory freed after a burst back to the OS, and
/// unmaps the bodies' maps kept since the last call (on the reload loop's
/// tick).
///
/// mimalloc returns freed large blocks lazily, when it next allocates one; a
/// process that goes idle after a burst of large requests would keep them.
/// Reserving (never touching) a large block here is that next allocation: it
/// costs no memory and runs the deferred return.
pub fn return_freed_memory() {
    KEPT.lock().unwrap_or_else(|p| p.into_inner()).clear();
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

/// The agent's whole request body within `[limits]`: at most
/// `max_request_bytes`, sent within `request_body_timeout`, charged to the
/// budget.
pub async fn agent_body(
    limits: &crate::config::Limits,
    headers: &http::HeaderMap,
    body: Incoming,
    charge: &mut Charge,
) -> Result<Bytes, Error> {
    let (limit, wait) = (limits.max_request_bytes, limits.request_body_timeout);
    let read = request(body, content_length(headers), limit, charge);
    tokio::time::timeout(wait, read)
        .await
        .map_err(|_| Error::RequestTimeout)?
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
    fn a_dropped_body_s_map_serves_the_next_with_only_its_own_bytes() {
        let gathered = |byte: u8, len: usize| {
            let mut g = Gather::new(Some(len)).unwrap();
            g.push(&vec![byte; len]).unwrap();
            g.finish().unwrap()
        };
        let first = gathered(b'a', MAP_MIN + 4096);
        let at = first.as_ptr();
        drop(first);
        let next = gathered(b'b', MAP_MIN + 100);
        assert_eq!(next.as_ptr(), at, "the kept map is written again");
        assert_eq!(next.len(), MAP_MIN + 100);
        assert!(
            next.iter().all(|&b| b == b'b'),
            "nothing of the last body shows"
        );
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
