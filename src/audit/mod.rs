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
//! `prev`, is the hash of the previous line; a trail reopened goes on from
//! its last line). With `[audit] max_bytes` a file sink is rotated by size
//! (`audit.jsonl` → `audit.jsonl.1` → …, `keep` of them) and the chain runs
//! on across the files. Failed writes are counted
//! (`toolgate_audit_write_failures_total`).

pub mod chain;

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
        let prev = file
            .as_ref()
            .and_then(|(p, _)| chain::last_hash(p))
            .unwrap_or_else(|| chain::GENESIS.to_string());
        let sink = Sink {
            out,
            name,
            failing: false,
            prev,
            file,
            rotate: a.max_bytes.map(|m| (m, a.keep)),
        };
        Ok(AuditLog {
            sink: Arc::new(Mutex::new(sink)),
            on_error: a.on_error,
            failures,
        })
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
        let mut s = self.sink.lock().unwrap_or_else(|p| p.into_inner());
        let mut line = line.linked(&s.prev);
        let next = chain::hash(&line);
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
            let grown = (resync.len() + line.len()) as u64;
            if let Some((_, size)) = &mut s.file {
                *size += grown;
            }
            s.rotate_if_full();
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

    /// Flushes the sink (every record is written when `record` returns).
    pub async fn flush(&self) -> Result<(), Error> {
        let mut s = self.sink.lock().unwrap_or_else(|p| p.into_inner());
        s.out.flush().map_err(|_| Error::AuditUnavailable)
    }
}

impl Sink {
    /// Past `max_bytes`: the file becomes `.1` (older ones move up, the
    /// oldest past `keep` goes) and a new one is opened. The chain goes on.
    /// A rotation that fails is logged and the same file is written on.
    fn rotate_if_full(&mut self) {
        let (Some((path, size)), Some((max, keep))) = (&self.file, self.rotate) else {
            return;
        };
        if *size < max {
            return;
        }
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
mod tests {
    use super::*;

    fn config(path: AuditPath, on_error: AuditOnError) -> Audit {
        Audit {
            path,
            on_error,
            include_judge_reason: false,
            max_bytes: None,
            keep: 5,
        }
    }

    async fn start(path: &AuditPath, on_error: AuditOnError) -> Result<AuditLog, Error> {
        AuditLog::start(&config(path.clone(), on_error), Default::default()).await
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tg-chain-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[tokio::test]
    async fn the_chain_holds_across_reopening_and_breaks_where_a_byte_changed() {
        let d = scratch("edit");
        let p = d.join("audit.jsonl");
        for round in 0..2 {
            let log = start(&AuditPath::File(p.clone()), AuditOnError::FailClosed)
                .await
                .unwrap();
            for i in 0..5 {
                log.record(&serde_json::json!({"round": round, "n": i}))
                    .await
                    .unwrap();
            }
        }
        let v = chain::verify(std::slice::from_ref(&p)).unwrap();
        assert_eq!((v.records, v.broken, v.starts_after), (10, None, None));
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with(&format!("{{\"prev\":\"{}\",", chain::GENESIS)));
        // One byte of line 7 changed: line 8's link no longer holds.
        let edited = text.replacen(r#""n":1,"round":1"#, r#""n":7,"round":1"#, 1);
        assert_ne!(edited, text);
        std::fs::write(&p, edited).unwrap();
        let v = chain::verify(std::slice::from_ref(&p)).unwrap();
        assert_eq!(v.records, 7);
        assert!(v.broken.unwrap().ends_with("audit.jsonl:8: the chain breaks here: this line or the one before it was changed, removed or moved"));
        // A line removed breaks the link after the gap.
        let mut lines: Vec<&str> = text.lines().collect();
        lines.remove(3);
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        let v = chain::verify(std::slice::from_ref(&p)).unwrap();
        assert!(v.broken.unwrap().contains("audit.jsonl:4:"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn rotation_keeps_the_chain_across_files() {
        let d = scratch("rotate");
        let p = d.join("audit.jsonl");
        let mut c = config(AuditPath::File(p.clone()), AuditOnError::FailClosed);
        c.max_bytes = Some(400);
        c.keep = 3;
        let log = AuditLog::start(&c, Default::default()).await.unwrap();
        for i in 0..40 {
            log.record(&serde_json::json!({"n": i, "pad": "x".repeat(40)}))
                .await
                .unwrap();
        }
        let files: Vec<PathBuf> = [
            "audit.jsonl.3",
            "audit.jsonl.2",
            "audit.jsonl.1",
            "audit.jsonl",
        ]
        .iter()
        .map(|f| d.join(f))
        .collect();
        assert!(files.iter().all(|f| f.exists()) && !d.join("audit.jsonl.4").exists());
        let v = chain::verify(&files).unwrap();
        assert_eq!(v.broken, None);
        assert!(
            v.starts_after.is_some(),
            "the oldest files were rotated away"
        );
        // Out of order, the set does not verify.
        let swapped = [files[1].clone(), files[0].clone()];
        assert!(chain::verify(&swapped).unwrap().broken.is_some());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn long_records_are_clipped_to_one_valid_line() {
        let rec = serde_json::json!({"tool": "x".repeat(MAX_LINE * 4), "verdict": "reject"});
        let line = clipped(&serde_json::to_vec(&rec).unwrap());
        assert!(line.len() < MAX_LINE);
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            (v["verdict"].as_str(), v["clipped"].as_bool()),
            (Some("reject"), Some(true))
        );
        assert_eq!(v["tool"].as_str().unwrap().len(), CLIP_CHARS);
    }

    #[tokio::test]
    async fn records_reach_the_file_in_order_and_flush_waits() {
        let p = std::env::temp_dir().join(format!("tg-audit-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let log = start(&AuditPath::File(p.clone()), AuditOnError::FailClosed)
            .await
            .unwrap();
        for i in 0..100 {
            log.record(&serde_json::json!({ "n": i })).await.unwrap();
        }
        log.flush().await.unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let ns: Vec<i64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["n"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(ns, (0..100).collect::<Vec<_>>());
        std::fs::remove_file(&p).unwrap();
    }

    #[tokio::test]
    async fn an_unopenable_sink_is_an_error() {
        let r = start(
            &AuditPath::File("/nonexistent-dir/x/audit.jsonl".into()),
            AuditOnError::FailClosed,
        )
        .await;
        assert!(r.is_err());
    }

    #[tokio::test]
    async fn a_failing_sink_fails_each_record_unless_told_to_continue() {
        let full = AuditPath::File("/dev/full".into());
        let log = start(&full, AuditOnError::FailClosed).await.unwrap();
        for _ in 0..3 {
            assert!(log.record(&serde_json::json!({"n": 1})).await.is_err());
        }
        let log = start(&full, AuditOnError::Continue).await.unwrap();
        assert!(log.record(&serde_json::json!({"n": 1})).await.is_ok());
    }
}
