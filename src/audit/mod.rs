//! The audit trail: one JSON line per gated call, never raw arguments.
//!
//! A record is written to the sink by the task that makes it, under a lock,
//! before the call it records may be released: with `[audit] on_error =
//! "fail_closed"` (the default) [`AuditLog::record`] returns an error when
//! the line could not be written, and the caller fails the call closed, so no
//! call is released whose record was lost. With `"continue"` a failed write
//! is logged and the call goes on. A failed write does not stop the trail:
//! the next record is tried again (on a new line), so it resumes when the sink
//! recovers (a full disk freed). Writing inline costs one `write` to the page
//! cache per record; a writer thread would cost two thread wake-ups per call
//! for the same acknowledgement. Lines are capped at [`MAX_LINE`]: a longer
//! record is written clipped, and says so.
//!
//! Every record is linked to the one before ([`chain`]: its first member,
//! `prev`, is the hash of the previous line, keyed with `[audit] key_env`'s
//! key when set; its last, `seq`, its number; a trail reopened goes on from
//! its last line). Every new file starts with an `opened` record; with
//! `[audit] max_bytes` a file sink is rotated by size (`audit.jsonl` →
//! `audit.jsonl.1` → …, `keep` of them): the full file ends in a `seal`
//! naming its own `file_id`, the new one opens naming it, and the chain runs
//! on across the files. Shutting down seals the trail too. The head (the
//! last `seq` and hash) is published in the log and on the admin port.
//! Failed writes are counted (`toolgate_audit_write_failures_total`).

pub mod chain;

/// The log target the trail's head is published under, and nothing else:
/// a reader takes `audit_head` only from lines of this target, where
/// neither an agent's request id nor a provider's message can write.
pub const HEAD_TARGET: &str = "toolgate::audit_head";

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::config::{Audit, AuditOnError, AuditPath};
use crate::error::Error;

/// The longest audit line, in bytes.
pub const MAX_LINE: usize = 16 * 1024;
/// Strings in a clipped record keep at most this many characters.
const CLIP_CHARS: usize = 256;

struct Sink {
    out: Box<dyn Write + Send>,
    name: String,
    /// The last write failed: part of a line may be in the sink.
    failing: bool,
    /// The hash the next record links to.
    prev: String,
    /// The number of the last record written.
    seq: u64,
    /// The chain's HMAC key, if it is keyed.
    key: Option<Arc<[u8]>>,
    /// The id of the file being written (its `opened` record's).
    file_id: String,
    /// A file sink's path and size, and its rotation (`max_bytes`, `keep`).
    file: Option<(PathBuf, u64)>,
    rotate: Option<(u64, usize)>,
}

/// A handle to the audit trail; cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    sink: Arc<Mutex<Sink>>,
    on_error: AuditOnError,
    /// Writes that failed (the metrics' counter).
    failures: prometheus_client::metrics::counter::Counter,
}

impl AuditLog {
    /// Opens the sink; a file goes on from its last record.
    pub async fn start(
        a: &Audit,
        failures: prometheus_client::metrics::counter::Counter,
    ) -> Result<AuditLog, Error> {
        let (out, name, file): (Box<dyn Write + Send>, String, _) = match &a.path {
            AuditPath::Stdout => (Box::new(std::io::stdout()), "stdout".into(), None),
            AuditPath::File(p) => {
                let size = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
                (
                    Box::new(open(p)?),
                    p.display().to_string(),
                    Some((p.clone(), size)),
                )
            }
        };
        let key: Option<Arc<[u8]>> = std::env::var(&a.key_env)
            .ok()
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
            .map(|k| Arc::from(k.into_bytes()));
        let went_on = file
            .as_ref()
            .and_then(|(p, _)| chain::last_link(p, key.as_deref()));
        let file_id = file
            .as_ref()
            .and_then(|(p, _)| chain::file_id(p))
            .unwrap_or_else(new_file_id);
        let (prev, seq) = went_on
            .clone()
            .unwrap_or_else(|| (chain::GENESIS.to_string(), 0));
        let sink = Sink {
            out,
            name,
            failing: false,
            prev,
            seq,
            key,
            file_id,
            file,
            rotate: a.max_bytes.map(|m| (m, a.keep)),
        };
        let log = AuditLog {
            sink: Arc::new(Mutex::new(sink)),
            on_error: a.on_error,
            failures,
        };
        // A new trail (or a new file) opens with a record saying which it is.
        if went_on.is_none() {
            let mut s = log.lock();
            let opened = serde_json::json!({"ts": crate::digest::now_rfc3339(), "event": "opened",
                "file_id": s.file_id, "after_file": null, "keyed": s.key.is_some()});
            // A sink failing already fails each record as it comes (logged there).
            if s.write(chain::Line::of(opened.to_string().as_bytes()))
                .is_err()
            {
                log.failures.inc();
            }
        }
        Ok(log)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sink> {
        self.sink.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The trail's head: the last record's `seq` and hash.
    pub fn head(&self) -> chain::Head {
        let s = self.lock();
        chain::Head {
            seq: s.seq,
            hash: s.prev.clone(),
        }
    }

    /// Whether the chain is keyed.
    pub fn keyed(&self) -> bool {
        self.lock().key.is_some()
    }

    /// Closes the trail with a seal (at shutdown): a later reader knows
    /// nothing was cut from its end.
    pub fn seal(&self, reason: &str) {
        let mut s = self.lock();
        let seal = serde_json::json!({"ts": crate::digest::now_rfc3339(), "event": "seal",
            "reason": reason, "file_id": s.file_id});
        if let Err(e) = s.write(chain::Line::of(seal.to_string().as_bytes())) {
            tracing::error!(error = %e, "the audit trail could not be sealed");
        }
    }

    /// Writes one record (one JSON line, capped); see the module doc for what
    /// an error means.
    pub async fn record(&self, record: &impl serde::Serialize) -> Result<(), Error> {
        // Room for a typical record (its signals are most of it): no regrowth.
        let mut line = chain::Line::with_capacity(2048);
        serde_json::to_writer(line.writer(), record).map_err(|_| Error::AuditUnavailable)?;
        if line.record().len() >= MAX_LINE {
            line = chain::Line::of(&clipped(line.record()));
        }
        let written = self.write(line);
        if written.is_err() {
            self.failures.inc();
        }
        match (written, self.on_error) {
            (Ok(()), _) | (Err(_), AuditOnError::Continue) => Ok(()),
            (Err(_), AuditOnError::FailClosed) => Err(Error::AuditUnavailable),
        }
    }

    /// Links `record` to the one before and writes it as one line.
    fn write(&self, line: chain::Line) -> std::io::Result<()> {
        let mut s = self.lock();
        s.write(line)
    }

    /// Flushes the sink (every record is written when `record` returns).
    pub async fn flush(&self) -> Result<(), Error> {
        let mut s = self.lock();
        s.out.flush().map_err(|_| Error::AuditUnavailable)
    }
}

/// A new file's id: random, so a seal names its successor unmistakably.
fn new_file_id() -> String {
    crate::digest::hex(&crate::digest::random_key()[..8])
}

impl Sink {
    /// Links `line` to the record before, numbers it, writes it; rotates
    /// the file when it is full.
    fn write(&mut self, line: chain::Line) -> std::io::Result<()> {
        self.write_one(line)?;
        self.rotate_if_full();
        Ok(())
    }

    fn write_one(&mut self, line: chain::Line) -> std::io::Result<()> {
        let s = self;
        let seq = s.seq + 1;
        let mut line = chain::numbered(line.linked(&s.prev), seq);
        let next = chain::hash(s.key.as_deref(), &line);
        line.push(b'\n');
        // After a failure, start on a new line: a part of one may be there.
        let resync: &[u8] = if s.failing { b"\n" } else { b"" };
        let result = s
            .out
            .write_all(resync)
            .and_then(|()| s.out.write_all(&line))
            .and_then(|()| s.out.flush());
        if result.is_ok() {
            s.prev = next;
            s.seq = seq;
            let grown = (resync.len() + line.len()) as u64;
            if let Some((_, size)) = &mut s.file {
                *size += grown;
            }
        }
        match &result {
            Ok(()) if s.failing => {
                tracing::warn!(sink = %s.name, "audit sink writes again");
                s.failing = false;
            }
            Ok(()) => {}
            Err(e) if !s.failing => {
                tracing::error!(sink = %s.name, error = %e, "audit sink failed; records lost (with on_error = fail_closed their calls are not released)");
                s.failing = true;
            }
            Err(_) => {}
        }
        result
    }

    /// Past `max_bytes`: the file is sealed, becomes `.1` (older ones move
    /// up, the oldest past `keep` goes) and a new one is opened with a
    /// record naming the sealed one. The chain goes on. A rotation that
    /// fails is logged and the same file is written on.
    fn rotate_if_full(&mut self) {
        let (Some((path, size)), Some((max, keep))) = (&self.file, self.rotate) else {
            return;
        };
        if *size < max {
            return;
        }
        let path = path.clone();
        let sealed = self.file_id.clone();
        let seal = serde_json::json!({"ts": crate::digest::now_rfc3339(), "event": "seal",
            "reason": "rotation", "file_id": sealed});
        if let Err(e) = self.write_one(chain::Line::of(seal.to_string().as_bytes())) {
            tracing::error!(sink = %self.name, error = %e, "audit rotation failed (the seal); writing on to the same file");
            return;
        }
        let path = &path;
        let numbered = |n: usize| PathBuf::from(format!("{}.{n}", path.display()));
        let _ = std::fs::remove_file(numbered(keep));
        for n in (1..keep).rev() {
            let _ = std::fs::rename(numbered(n), numbered(n + 1));
        }
        let moved = std::fs::rename(path, numbered(1));
        match moved.and_then(|()| open(path).map_err(std::io::Error::other)) {
            Ok(f) => {
                self.out = Box::new(f);
                self.file = Some((path.clone(), 0));
                self.file_id = new_file_id();
                let opened = serde_json::json!({"ts": crate::digest::now_rfc3339(),
                    "event": "opened", "file_id": self.file_id, "after_file": sealed,
                    "keyed": self.key.is_some()});
                if let Err(e) = self.write_one(chain::Line::of(opened.to_string().as_bytes())) {
                    tracing::error!(sink = %self.name, error = %e, "the new audit file could not be opened with its record");
                }
            }
            Err(e) => {
                tracing::error!(sink = %self.name, error = %e, "audit rotation failed; writing on to the same file")
            }
        }
    }
}

/// A record too long for one line, with every string clipped and long arrays
/// cut; marked `"clipped": true` with its original size. If even that is too
/// long, only the size is kept.
fn clipped(line: &[u8]) -> Vec<u8> {
    fn clip(v: &mut Value) {
        match v {
            Value::String(s) => {
                if let Some((i, _)) = s.char_indices().nth(CLIP_CHARS) {
                    s.truncate(i);
                }
            }
            Value::Array(a) => {
                a.truncate(16);
                a.iter_mut().for_each(clip);
            }
            Value::Object(m) => m.values_mut().for_each(clip),
            _ => {}
        }
    }
    let mut v: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
    clip(&mut v);
    if let Value::Object(m) = &mut v {
        m.insert("clipped".into(), Value::Bool(true));
        m.insert("record_bytes".into(), line.len().into());
    }
    match serde_json::to_vec(&v) {
        Ok(out) if out.len() < MAX_LINE => out,
        _ => format!("{{\"clipped\":true,\"record_bytes\":{}}}", line.len()).into_bytes(),
    }
}

fn open(p: &PathBuf) -> Result<std::fs::File, Error> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map_err(|e| Error::io(format!("cannot open audit file {}", p.display()), e))
}

#[cfg(test)]
mod tests;
