//! The audit trail's hash chain: every record carries, first, the SHA-256
//! of the line before it (`"prev"`, hex; 64 zeros for the first record ever
//! written), so editing, removing or reordering a line breaks every link
//! after it. [`verify`] checks one file, or a rotated set given oldest first.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::digest::sha256_hex;
use crate::error::Error;

/// The `prev` of the first record of a new trail.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// `record` (a JSON object's text) with `"prev": prev` as its first member.
pub fn link(prev: &str, record: &[u8]) -> Vec<u8> {
    let rest = record.strip_prefix(b"{").unwrap_or(record);
    let mut out = Vec::with_capacity(record.len() + 80);
    out.extend_from_slice(b"{\"prev\":\"");
    out.extend_from_slice(prev.as_bytes());
    out.extend_from_slice(b"\"");
    if !rest.starts_with(b"}") {
        out.push(b',');
    }
    out.extend_from_slice(rest);
    out
}

/// The opening of a linked line, up to the hash: `{"prev":"`.
const OPENING: &[u8] = b"{\"prev\":\"";

/// A record written straight after room for its link, so linking it under
/// the trail's lock copies 64 bytes, not the whole line (see [`link`]).
pub struct Line {
    buf: Vec<u8>,
}

impl Line {
    /// Room for a record of about `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Line {
        let mut buf = Vec::with_capacity(Self::START + capacity + 1);
        buf.extend_from_slice(OPENING);
        buf.extend_from_slice(GENESIS.as_bytes());
        buf.push(b'"');
        Line { buf }
    }

    /// Where the record starts: after `{"prev":"<64 hex digits>"`.
    const START: usize = OPENING.len() + GENESIS.len() + 1;

    /// A line holding `record`.
    pub fn of(record: &[u8]) -> Line {
        let mut line = Line::with_capacity(record.len());
        line.buf.extend_from_slice(record);
        line
    }

    /// Where the record (a JSON object's text) is written.
    pub fn writer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// The record written so far.
    pub fn record(&self) -> &[u8] {
        self.buf.get(Self::START..).unwrap_or_default()
    }

    /// The line linked to `prev`: the same bytes as [`link`] gives.
    pub fn linked(mut self, prev: &str) -> Vec<u8> {
        let record = self.record();
        if prev.len() != GENESIS.len() || !record.starts_with(b"{") {
            return link(prev, record);
        }
        let empty = record == b"{}";
        self.buf[OPENING.len()..Self::START - 1].copy_from_slice(prev.as_bytes());
        if empty {
            self.buf.truncate(Self::START);
            self.buf.push(b'}');
        } else {
            self.buf[Self::START] = b',';
        }
        self.buf
    }
}

/// The hash the next record carries after `line` (without its newline).
pub fn hash(line: &[u8]) -> String {
    sha256_hex(line)
}

/// The hash of the last complete line of the file at `path`, to go on from
/// (`None` when it has none). Reads the file's tail only.
pub fn last_hash(path: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let f = std::fs::File::open(path).ok()?;
    let meta = f.metadata().ok()?;
    // A device or pipe has no last line to go on from.
    if !meta.is_file() {
        return None;
    }
    let len = meta.len();
    let mut f = f;
    // A line is at most `MAX_LINE` bytes plus its link and newlines.
    let back = len.min(super::MAX_LINE as u64 + 256);
    f.seek(SeekFrom::Start(len - back)).ok()?;
    let mut tail = Vec::new();
    f.take(back).read_to_end(&mut tail).ok()?;
    let tail = tail.strip_suffix(b"\n")?;
    let line = match memchr::memrchr(b'\n', tail) {
        Some(i) => &tail[i + 1..],
        None if back == len => tail,
        None => return None,
    };
    Some(hash(line))
}

/// What [`verify`] found.
#[derive(Debug, Default)]
pub struct Verified {
    /// Records whose link holds.
    pub records: u64,
    /// Set when the first record does not start the trail (older files
    /// rotated away): the hash it goes on from.
    pub starts_after: Option<String>,
    /// The first broken line, as `file:line: why`.
    pub broken: Option<String>,
}

/// Checks the chain through `files` (oldest first), up to the first broken
/// line; the error is a file that cannot be read.
pub fn verify(files: &[PathBuf]) -> Result<Verified, Error> {
    let mut expected: Option<String> = None;
    let mut out = Verified::default();
    for file in files {
        let f = std::fs::File::open(file)
            .map_err(|e| Error::io(format!("cannot read {}", file.display()), e))?;
        for (n, line) in std::io::BufReader::new(f).split(b'\n').enumerate() {
            let line = line.map_err(|e| Error::io(format!("cannot read {}", file.display()), e))?;
            let broken = |why: &str| Some(format!("{}:{}: {why}", file.display(), n + 1));
            let prev = serde_json::from_slice::<serde_json::Value>(&line)
                .ok()
                .and_then(|v| v.get("prev").and_then(|p| p.as_str()).map(str::to_string));
            let Some(prev) = prev else {
                out.broken = broken("not a chained audit record");
                return Ok(out);
            };
            match &expected {
                Some(e) if *e != prev => {
                    out.broken = broken(
                        "the chain breaks here: this line or the one before it was changed, removed or moved",
                    );
                    return Ok(out);
                }
                Some(_) => {}
                None if prev != GENESIS => out.starts_after = Some(prev),
                None => {}
            }
            expected = Some(hash(&line));
            out.records += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_put_prev_first_and_keep_the_record() {
        assert_eq!(link("ab", br#"{"n":1}"#), br#"{"prev":"ab","n":1}"#);
        assert_eq!(link("ab", b"{}"), br#"{"prev":"ab"}"#);
        let v: serde_json::Value = serde_json::from_slice(&link(GENESIS, br#"{"a":[1]}"#)).unwrap();
        assert_eq!(v["a"][0], 1);
    }

    #[test]
    fn a_line_links_as_link_does() {
        let prev = sha256_hex(b"before");
        for record in [&br#"{"n":1,"s":"x"}"#[..], b"{}", b"[1]", b""] {
            let mut line = Line::with_capacity(8);
            line.writer().extend_from_slice(record);
            assert_eq!(line.record(), record);
            assert_eq!(line.linked(&prev), link(&prev, record), "{record:?}");
            // A `prev` of another length (never written) is linked all the same.
            assert_eq!(Line::of(record).linked("ab"), link("ab", record));
        }
    }
}
