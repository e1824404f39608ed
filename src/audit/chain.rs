//! The audit trail's hash chain: every record carries, first, the hash of
//! the line before it (`"prev"`, hex; 64 zeros for the first record ever
//! written), and last its number in the trail (`"seq"`), so editing,
//! removing or reordering a line breaks every link after it. The hash is
//! SHA-256, or HMAC-SHA-256 under `[audit] key_env`'s key: then whoever can
//! write the file but lacks the key cannot chain an edited trail again.
//!
//! A link proves nothing about the lines after the last one: the end is
//! anchored by a **head** (`seq` and hash of the last record) that toolgate
//! publishes where the file's writer cannot change it (the log, `GET
//! /audit/head` on the admin port), and by a **seal** record it writes at
//! rotation and shutdown. Every file starts with an `opened` record naming
//! the file it follows, and a rotated file ends in a seal naming its
//! successor, so rotation reads apart from deletion. An `opened` record
//! says whether the trail is keyed, and a keyed trail is good only when
//! verified under its key. [`verify`] checks one file, or a rotated set
//! given oldest first, against a head if given.

use std::io::{BufRead, Read as _};
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

/// The hash the next record carries after `line` (without its newline):
/// HMAC-SHA-256 under `key`, else SHA-256.
pub fn hash(key: Option<&[u8]>, line: &[u8]) -> String {
    match key {
        Some(k) => crate::digest::hex(&crate::digest::hmac_sha256(k, &[line])),
        None => sha256_hex(line),
    }
}

/// `line` (a linked record) with its number in the trail as its last member.
pub fn numbered(mut line: Vec<u8>, seq: u64) -> Vec<u8> {
    if line.last() == Some(&b'}') {
        line.pop();
        if line.last() != Some(&b'{') {
            line.push(b',');
        }
        line.extend_from_slice(format!("\"seq\":{seq}}}").as_bytes());
    }
    line
}

/// Where a file's trail goes on from: the hash of its last complete line
/// and that line's `seq` (0 for a record written before numbering).
pub fn last_link(path: &Path, key: Option<&[u8]>) -> Option<(String, u64)> {
    let line = last_line(path)?;
    let seq = serde_json::from_slice::<serde_json::Value>(&line)
        .ok()
        .and_then(|v| v.get("seq").and_then(serde_json::Value::as_u64))
        .unwrap_or(0);
    Some((hash(key, &line), seq))
}

/// The last complete line of the file at `path`. Reads the file's tail only.
fn last_line(path: &Path) -> Option<Vec<u8>> {
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
    Some(line.to_vec())
}

/// The `file_id` of the `opened` record a file starts with, if it does.
pub fn file_id(path: &Path) -> Option<String> {
    let f = std::fs::File::open(path).ok()?;
    let mut first = Vec::new();
    std::io::BufReader::new(f)
        .take(super::MAX_LINE as u64 + 256)
        .read_until(b'\n', &mut first)
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(first.strip_suffix(b"\n")?).ok()?;
    (v.get("event")? == "opened")
        .then(|| v.get("file_id")?.as_str().map(str::to_string))
        .flatten()
}

/// A head: the `seq` of a record of the trail and its hash (the `prev` the
/// record after it carries), written `SEQ:HASH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub hash: String,
}

impl Head {
    /// Reads `SEQ:HASH`.
    pub fn parse(s: &str) -> Option<Head> {
        let (seq, hash) = s.trim().split_once(':')?;
        let hash = hash.trim().to_ascii_lowercase();
        (hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then_some(())?;
        Some(Head {
            seq: seq.trim().parse().ok()?,
            hash,
        })
    }
}

impl std::fmt::Display for Head {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash)
    }
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
    /// The trail's own head: its last record.
    pub last: Option<Head>,
    /// Why the last record closed the trail (`rotation`, `shutdown`), when it is a seal.
    pub sealed: Option<String>,
    /// The head given was found in the trail and matched.
    pub head_matched: bool,
}

/// One record as the verifier reads it.
struct Parsed {
    prev: String,
    seq: Option<u64>,
    event: Option<String>,
    value: serde_json::Value,
}

fn read(line: &[u8]) -> Result<Parsed, &'static str> {
    // One reading only: a key given twice reads two ways.
    let value = crate::json::strict_value(line)
        .map_err(|_| "not one JSON object (malformed, or a key given twice)")?;
    let prev = value
        .get("prev")
        .and_then(|p| p.as_str())
        .ok_or("not a chained audit record")?
        .to_string();
    Ok(Parsed {
        prev,
        seq: value.get("seq").and_then(serde_json::Value::as_u64),
        event: value
            .get("event")
            .and_then(|e| e.as_str())
            .map(str::to_string),
        value,
    })
}

/// Checks the chain through `files` (oldest first), hashed with `key`
/// when the trail is keyed, up to the first broken line, and against
/// `head` when given; the error is a file that cannot be read.
pub fn verify(
    files: &[PathBuf],
    key: Option<&[u8]>,
    head: Option<&Head>,
) -> Result<Verified, Error> {
    let mut expected: Option<(String, Option<u64>)> = None;
    // The `file_id` the next file must say it follows (a rotation seal's).
    let mut follows: Option<String> = None;
    let mut out = Verified::default();
    for (k, file) in files.iter().enumerate() {
        let f = std::fs::File::open(file)
            .map_err(|e| Error::io(format!("cannot read {}", file.display()), e))?;
        let mut sealed_for_rotation = false;
        for (n, line) in std::io::BufReader::new(f).split(b'\n').enumerate() {
            let line = line.map_err(|e| Error::io(format!("cannot read {}", file.display()), e))?;
            let at = |why: &str| Some(format!("{}:{}: {why}", file.display(), n + 1));
            let r = match read(&line) {
                Ok(r) => r,
                Err(why) => {
                    out.broken = at(why);
                    return Ok(out);
                }
            };
            let opens = r.event.as_deref() == Some("opened");
            // A trail that says it is keyed is good only under its key: the
            // same lines chained again with SHA-256 would hold without it.
            if opens
                && key.is_none()
                && r.value.get("keyed") == Some(&serde_json::Value::Bool(true))
            {
                out.broken = at("this trail is keyed (its opened record says so): verify it with its key (--key-env)");
                return Ok(out);
            }
            if n == 0 && k > 0 {
                let after = r.value.get("after_file").and_then(|a| a.as_str());
                if !opens || after.is_none() || after.map(str::to_string) != follows {
                    out.broken =
                        at("this file does not open as the successor of the one before it");
                    return Ok(out);
                }
            }
            match &expected {
                Some((e, _)) if *e != r.prev => {
                    out.broken = at(
                        "the chain breaks here: this line or the one before it was changed, removed or moved",
                    );
                    return Ok(out);
                }
                Some((_, Some(s))) if r.seq.is_some_and(|q| q != s + 1) => {
                    out.broken = at("the record numbers skip here: records were removed");
                    return Ok(out);
                }
                Some(_) => {}
                None if r.prev != GENESIS => {
                    // Older files rotated away: then the first record is the
                    // one that opened this file. Any other means its first
                    // lines were removed.
                    if !opens {
                        out.broken = at("the trail's first lines were removed: it goes on from a record that is not here, and not with the record that opens a file");
                        return Ok(out);
                    }
                    out.starts_after = Some(r.prev.clone());
                }
                None if r.seq.is_some_and(|q| q != 1) => {
                    out.broken = at("the first record of the trail is not record 1");
                    return Ok(out);
                }
                None => {}
            }
            let h = hash(key, &line);
            if let (Some(want), Some(seq)) = (head, r.seq) {
                if want.seq == seq {
                    if want.hash != h {
                        out.broken = at("this record is not the one the head names: it was changed (or the key is not the trail's)");
                        return Ok(out);
                    }
                    out.head_matched = true;
                }
            }
            sealed_for_rotation = r.event.as_deref() == Some("seal")
                && r.value.get("reason").and_then(|v| v.as_str()) == Some("rotation");
            if sealed_for_rotation {
                follows = r
                    .value
                    .get("file_id")
                    .and_then(|v| v.as_str())
                    .map(str::to_string);
            }
            out.sealed = (r.event.as_deref() == Some("seal")).then(|| {
                r.value
                    .get("reason")
                    .and_then(|v| v.as_str())
                    .unwrap_or("seal")
                    .to_string()
            });
            out.last = r.seq.map(|seq| Head {
                seq,
                hash: h.clone(),
            });
            expected = Some((h, r.seq));
            out.records += 1;
        }
        if k + 1 < files.len() && !sealed_for_rotation {
            out.broken = Some(format!(
                "{}: the file ends without the seal of a rotation: its last lines were removed",
                file.display()
            ));
            return Ok(out);
        }
    }
    if let Some(want) = head.filter(|_| !out.head_matched) {
        let why = match &out.last {
            Some(last) if last.seq < want.seq => format!(
                "the trail ends at record {} but the head names record {}: records were removed from its end",
                last.seq, want.seq
            ),
            _ => format!("record {} the head names is not in these files", want.seq),
        };
        out.broken = Some(why);
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
