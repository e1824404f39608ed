//! Incremental server-sent-events decoder; no I/O.
//!
//! Grammar (WHATWG HTML, "Parsing an event stream"):
//! ```text
//! stream = [ bom ] *event
//! event  = *( comment / field ) end-of-line
//! comment = ":" *any-char end-of-line
//! field  = name [ ":" [ " " ] *any-char ] end-of-line
//! end-of-line = ( CR LF / LF / CR )
//! ```
//! Bytes are pushed as they arrive; a partial line means "need more bytes".
//! Each block (the lines up to and including a blank line) comes out as one
//! [`SseEvent`] carrying its exact raw bytes, so an event that needs no change
//! can be forwarded byte for byte when it is [`SseEvent::clean`]. A CR at the
//! very end of the buffer waits for the next byte (or [`SseDecoder::finish`]),
//! so the events never depend on how the bytes were split; raw output
//! concatenates to the exact input.
//!
//! Other readers split lines on more than CR and LF: Python's
//! `str.splitlines()` (and httpx's `iter_lines`) also break at VT, FF, FS,
//! GS, RS, NEL, U+2028 and U+2029. So a line holding a control character
//! (other than tab) or one of those separators where no JSON string can
//! hold it (in a comment, a field name, an `event`/`id`/`retry` value, or a
//! control character in data) is an error: the stream fails closed. NEL,
//! U+2028 and U+2029 inside data (JSON strings may hold them) pass, and
//! [`escape_separators`] writes them as JSON escapes on the way out.

use bytes::{Bytes, BytesMut};

/// One decoded block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// Exactly the bytes of this block as received (including comments and the blank line).
    pub raw: Bytes,
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined by `\n`; `None` when the block had no data field
    /// (a comment-only or empty block, which dispatches nothing). A block with
    /// one data line (every provider's) shares `raw`'s bytes: no copy.
    pub data: Option<Bytes>,
    /// True when `raw` holds only lines every SSE reader reads the same way:
    /// `data`, `event`, `id`, `retry` fields and comments, ended by LF or CRLF.
    /// A block with an unknown field line or a bare-CR line end is not clean and
    /// must not be forwarded as it came.
    pub clean: bool,
}

impl SseEvent {
    /// The bytes to send on for this block: as it came when clean, else
    /// written anew from its event name and data (a block of unknown lines
    /// only, with no data, sends nothing).
    pub fn forwardable(&self) -> Option<Bytes> {
        if self.clean {
            return Some(self.raw.clone());
        }
        let data = self.data.as_deref()?;
        let mut b = BytesMut::new();
        if let Some(name) = &self.event {
            b.extend_from_slice(b"event: ");
            b.extend_from_slice(name.as_bytes());
            b.extend_from_slice(b"\n");
        }
        super::write_raw_data(&mut b, data);
        Some(b.freeze())
    }
}

/// Why the stream cannot be read on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseError {
    /// The block grew past the configured maximum without ending.
    TooLarge,
    /// A line holds a control character or a line separator that another
    /// reader would split it at (see the module doc).
    Foreign,
}

impl SseError {
    /// What the stream's failure says (for the log).
    pub fn why(self) -> &'static str {
        match self {
            SseError::TooLarge => "event larger than limits.max_event_bytes",
            SseError::Foreign => "event stream line holds a control character or line separator",
        }
    }
}

/// True for a byte no line may hold outside data: a C0 control but tab
/// (CR and LF end lines before this is asked).
fn is_control(b: u8) -> bool {
    b < 0x20 && b != b'\t'
}

/// Whether `line` holds a control character (tab aside).
fn has_control(line: &[u8]) -> bool {
    // A fold, not `any`: it vectorises, and data lines are the hot path.
    line.iter().fold(false, |acc, &b| acc | is_control(b))
}

/// The start of the first NEL, U+2028 or U+2029 in `b` (UTF-8), if any.
fn find_separator(b: &[u8]) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(i) = memchr::memchr2(0xC2, 0xE2, &b[from..]) {
        let i = from + i;
        match (b[i], b.get(i + 1), b.get(i + 2)) {
            (0xC2, Some(0x85), _) => return Some((i, 2)),
            (0xE2, Some(0x80), Some(0xA8 | 0xA9)) => return Some((i, 3)),
            _ => from = i + 1,
        }
    }
    None
}

/// `out` with every NEL, U+2028 and U+2029 written as its JSON escape
/// (`\u0085`, `\u2028`, `\u2029`). Only for bytes whose such characters sit
/// inside JSON strings (what the rewriters write): there the escape means
/// the same, and no reader splits a line at it. Borrowed when none is found.
pub fn escape_separators(out: Bytes) -> Bytes {
    let Some((first, _)) = find_separator(&out) else {
        return out;
    };
    let mut b = BytesMut::with_capacity(out.len() + 16);
    b.extend_from_slice(&out[..first]);
    let mut rest = &out[first..];
    while let Some((i, n)) = find_separator(rest) {
        b.extend_from_slice(&rest[..i]);
        b.extend_from_slice(match rest[i + n - 1] {
            0x85 => b"\\u0085",
            0xA8 => b"\\u2028",
            _ => b"\\u2029",
        });
        rest = &rest[i + n..];
    }
    b.extend_from_slice(rest);
    b.freeze()
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: BytesMut,
    /// Start of the next unparsed line within `buf` (`buf` starts at the current block).
    pos: usize,
    bom_checked: bool,
    event: Option<String>,
    /// Where the block's one data line's value is in `buf`, until a second
    /// data line makes the joined copy in `data` necessary.
    line: Option<(usize, usize)>,
    data: Vec<u8>,
    has_data: bool,
    /// The current block so far is clean (see [`SseEvent::clean`]).
    clean: bool,
    /// A line no reader may be given was seen (see the module doc).
    foreign: bool,
    /// `buf[..pos]` is a whole block, read but not yet taken or skipped.
    ready: bool,
    max_event: usize,
}

/// A whole block still in the decoder's buffer ([`SseDecoder::next_ready`]):
/// read where it lies, then taken as an [`SseEvent`] or skipped. Looking
/// costs nothing; taking shares the buffer (reference counts). One left
/// untouched is given again by the next `next_ready`.
#[derive(Debug)]
pub struct Ready<'d> {
    dec: &'d mut SseDecoder,
}

impl Ready<'_> {
    /// The block's bytes as received (see [`SseEvent::raw`]).
    pub fn raw(&self) -> &[u8] {
        &self.dec.buf[..self.dec.pos]
    }

    /// Its `data:` lines joined (see [`SseEvent::data`]).
    pub fn data(&self) -> Option<&[u8]> {
        let d = &*self.dec;
        if !d.has_data {
            return None;
        }
        Some(match d.line {
            Some((a, b)) => &d.buf[a..b],
            None => &d.data,
        })
    }

    /// Its `event:` field (see [`SseEvent::event`]).
    pub fn event(&self) -> Option<&str> {
        self.dec.event.as_deref()
    }

    /// See [`SseEvent::clean`].
    pub fn clean(&self) -> bool {
        self.dec.clean
    }

    /// The block as an event of its own.
    pub fn take(self) -> SseEvent {
        self.dec.dispatch()
    }

    /// Drops the block (it was dealt with where it lay).
    pub fn skip(self) {
        let d = self.dec;
        bytes::Buf::advance(&mut d.buf, d.pos);
        d.reset();
    }
}

impl SseDecoder {
    /// Lets go of the buffers' room when nothing is in them.
    pub fn compact(&mut self) {
        if self.buf.is_empty() && self.pos == 0 {
            self.buf = BytesMut::new();
        }
        if self.data.is_empty() {
            self.data = Vec::new();
        }
    }

    pub fn new(max_event: usize) -> SseDecoder {
        SseDecoder {
            buf: BytesMut::new(),
            pos: 0,
            bom_checked: false,
            event: None,
            line: None,
            data: Vec::new(),
            has_data: false,
            clean: true,
            foreign: false,
            ready: false,
            max_event,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Drops everything buffered (after the stream has ended).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.reset();
    }

    /// Ready for the next block (what was before `pos` has gone).
    fn reset(&mut self) {
        self.pos = 0;
        self.has_data = false;
        self.line = None;
        self.data.clear();
        self.event = None;
        self.clean = true;
        self.ready = false;
    }

    /// Bytes received but not yet returned in an event.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next complete block, `Ok(None)` when more bytes are needed.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        Ok(self.next_ready()?.map(Ready::take))
    }

    /// The next complete block where it lies, `Ok(None)` when more bytes are
    /// needed.
    pub fn next_ready(&mut self) -> Result<Option<Ready<'_>>, SseError> {
        if !self.ready {
            if !self.read_block()? {
                return Ok(None);
            }
            self.ready = true;
        }
        Ok(Some(Ready { dec: self }))
    }

    /// Reads lines up to the next blank one: `Ok(true)` when it came.
    fn read_block(&mut self) -> Result<bool, SseError> {
        if !self.bom_checked {
            let n = self.buf.len().min(BOM.len());
            if self.buf[..n] != BOM[..n] {
                self.bom_checked = true;
            } else if n == BOM.len() {
                self.bom_checked = true;
                self.pos = BOM.len();
            } else {
                return Ok(false);
            }
        }
        loop {
            let rest = &self.buf[self.pos..];
            let Some(i) = memchr::memchr2(b'\n', b'\r', rest) else {
                if self.buf.len() > self.max_event {
                    return Err(SseError::TooLarge);
                }
                return Ok(false);
            };
            let line_start = self.pos;
            let line_end = line_start + i;
            let term = if rest[i] == b'\r' {
                match rest.get(i + 1) {
                    Some(b'\n') => 2,
                    Some(_) => {
                        self.clean = false;
                        1
                    }
                    // A CR at the end of the buffer: wait for the next byte, so
                    // that how the bytes were split never changes the result.
                    None => return Ok(false),
                }
            } else {
                1
            };
            self.pos = line_end + term;
            if line_end == line_start {
                return Ok(true);
            }
            self.field(line_start, line_end);
            if self.foreign {
                return Err(SseError::Foreign);
            }
            if self.pos > self.max_event {
                return Err(SseError::TooLarge);
            }
        }
    }

    /// At end of input: a block without its closing blank line, if any bytes remain.
    /// Its fields are interpreted leniently (as though the blank line had come).
    /// A block left ready comes first: the bytes after it wait for the next call.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, SseError> {
        if self.ready {
            return Ok(Some(self.dispatch()));
        }
        if self.buf.is_empty() {
            return Ok(None);
        }
        let end = self.buf.len();
        let line_end = if self.buf.ends_with(b"\r") {
            end - 1
        } else {
            end
        };
        if self.pos < line_end {
            let s = self.pos;
            self.field(s, line_end);
            if self.foreign {
                return Err(SseError::Foreign);
            }
        }
        self.pos = end;
        // A block no reader would dispatch as it stands: never forwarded raw.
        self.clean = false;
        Ok(Some(self.dispatch()))
    }

    fn field(&mut self, start: usize, end: usize) {
        let line = &self.buf[start..end];
        if line[0] == b':' {
            self.foreign |= has_control(line) || find_separator(line).is_some();
            return;
        }
        let (name, value, from) = match memchr::memchr(b':', line) {
            Some(c) => {
                let v = &line[c + 1..];
                let space = usize::from(v.first() == Some(&b' '));
                (&line[..c], &v[space..], start + c + 1 + space)
            }
            None => (line, &b""[..], end),
        };
        if name != b"data" {
            self.foreign |= has_control(line) || find_separator(line).is_some();
        } else {
            self.foreign |= has_control(value);
        }
        match name {
            b"data" => {
                if !self.has_data {
                    self.line = Some((from, end));
                } else {
                    if let Some((a, b)) = self.line.take() {
                        self.data.extend_from_slice(&self.buf[a..b]);
                    }
                    self.data.push(b'\n');
                    self.data.extend_from_slice(&self.buf[from..end]);
                }
                self.has_data = true;
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            b"id" | b"retry" => {}
            _ => self.clean = false,
        }
    }

    fn dispatch(&mut self) -> SseEvent {
        let raw = self.buf.split_to(self.pos).freeze();
        let data = self.has_data.then(|| match self.line {
            Some((a, b)) => raw.slice(a..b),
            None => Bytes::from(std::mem::take(&mut self.data)),
        });
        let ev = SseEvent {
            raw,
            event: self.event.take(),
            data,
            clean: self.clean,
        };
        self.reset();
        ev
    }
}

#[cfg(test)]
mod tests;
