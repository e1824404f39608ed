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

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::config::{AuditOnError, AuditPath};
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
}

/// A handle to the audit trail; cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    sink: Arc<Mutex<Sink>>,
    on_error: AuditOnError,
}

impl AuditLog {
    /// Opens the sink.
    pub async fn start(path: &AuditPath, on_error: AuditOnError) -> Result<AuditLog, Error> {
        let (out, name): (Box<dyn Write + Send>, String) = match path {
            AuditPath::Stdout => (Box::new(std::io::stdout()), "stdout".into()),
            AuditPath::File(p) => (Box::new(open(p)?), p.display().to_string()),
        };
        let sink = Sink {
            out,
            name,
            failing: false,
        };
        Ok(AuditLog {
            sink: Arc::new(Mutex::new(sink)),
            on_error,
        })
    }

    /// Writes one record (one JSON line, capped); see the module doc for what
    /// an error means.
    pub async fn record(&self, record: &impl serde::Serialize) -> Result<(), Error> {
        let mut line = serde_json::to_vec(record).map_err(|_| Error::AuditUnavailable)?;
        if line.len() >= MAX_LINE {
            line = clipped(&line);
        }
        line.push(b'\n');
        let written = self.write(&line);
        match (written, self.on_error) {
            (Ok(()), _) | (Err(_), AuditOnError::Continue) => Ok(()),
            (Err(_), AuditOnError::FailClosed) => Err(Error::AuditUnavailable),
        }
    }

    fn write(&self, line: &[u8]) -> std::io::Result<()> {
        let mut s = self.sink.lock().unwrap_or_else(|p| p.into_inner());
        // After a failure, start on a new line: a part of one may be there.
        let resync: &[u8] = if s.failing { b"\n" } else { b"" };
        let result = s
            .out
            .write_all(resync)
            .and_then(|()| s.out.write_all(line))
            .and_then(|()| s.out.flush());
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
        let log = AuditLog::start(&AuditPath::File(p.clone()), AuditOnError::FailClosed)
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
        let r = AuditLog::start(
            &AuditPath::File("/nonexistent-dir/x/audit.jsonl".into()),
            AuditOnError::FailClosed,
        )
        .await;
        assert!(r.is_err());
    }

    #[tokio::test]
    async fn a_failing_sink_fails_each_record_unless_told_to_continue() {
        let full = AuditPath::File("/dev/full".into());
        let log = AuditLog::start(&full, AuditOnError::FailClosed)
            .await
            .unwrap();
        for _ in 0..3 {
            assert!(log.record(&serde_json::json!({"n": 1})).await.is_err());
        }
        let log = AuditLog::start(&full, AuditOnError::Continue)
            .await
            .unwrap();
        assert!(log.record(&serde_json::json!({"n": 1})).await.is_ok());
    }
}
