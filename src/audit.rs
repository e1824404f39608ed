//! The audit trail: one JSON line per gated call, never raw arguments.
//!
//! Records go through a bounded queue to one writer thread. A full queue makes
//! the caller wait (back-pressure, not loss). With `[audit] on_error =
//! "fail_closed"` (the default) [`AuditLog::record`] returns only once its
//! line is written to the sink, and an error when it could not be: the caller
//! then fails the call closed, so no call is released whose record was lost.
//! With `"continue"` a record is only queued and a failed write is logged.
//! A failed write does not stop the writer: later records are tried again, so
//! the trail resumes when the sink recovers (a full disk freed). Lines are
//! capped at [`MAX_LINE`]: a longer record is written clipped, and says so.

use std::io::Write;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

use crate::config::{AuditOnError, AuditPath};
use crate::error::Error;

const QUEUE: usize = 4096;
/// The longest audit line, in bytes.
pub const MAX_LINE: usize = 16 * 1024;
/// Strings in a clipped record keep at most this many characters.
const CLIP_CHARS: usize = 256;

enum Msg {
    /// A line, and who waits to hear it was written.
    Line(Vec<u8>, Option<oneshot::Sender<bool>>),
    Flush(oneshot::Sender<()>),
}

/// A handle to the audit writer; cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    tx: mpsc::Sender<Msg>,
    on_error: AuditOnError,
}

impl AuditLog {
    /// Opens the sink and starts the writer thread.
    pub async fn start(path: &AuditPath, on_error: AuditOnError) -> Result<AuditLog, Error> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (sink, name): (Box<dyn Write + Send>, String) = match path {
            AuditPath::Stdout => (Box::new(std::io::stdout()), "stdout".into()),
            AuditPath::File(p) => (Box::new(open(p)?), p.display().to_string()),
        };
        std::thread::Builder::new()
            .name("toolgate-audit".into())
            .spawn(move || write_loop(rx, sink, name))
            .map_err(|e| Error::io("cannot start the audit writer", e))?;
        Ok(AuditLog { tx, on_error })
    }

    /// Writes one record (one JSON line, capped); see the module doc for when
    /// it returns and what an error means.
    pub async fn record(&self, record: &impl serde::Serialize) -> Result<(), Error> {
        let mut line = serde_json::to_vec(record).map_err(|_| Error::AuditUnavailable)?;
        if line.len() >= MAX_LINE {
            line = clipped(&line);
        }
        line.push(b'\n');
        if self.on_error == AuditOnError::Continue {
            if self.tx.send(Msg::Line(line, None)).await.is_err() {
                tracing::error!("audit writer gone; record lost (on_error = continue)");
            }
            return Ok(());
        }
        let (ack, written) = oneshot::channel();
        self.tx
            .send(Msg::Line(line, Some(ack)))
            .await
            .map_err(|_| Error::AuditUnavailable)?;
        match written.await {
            Ok(true) => Ok(()),
            _ => Err(Error::AuditUnavailable),
        }
    }

    /// Waits until everything queued so far is written and flushed.
    pub async fn flush(&self) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Msg::Flush(tx))
            .await
            .map_err(|_| Error::AuditUnavailable)?;
        rx.await.map_err(|_| Error::AuditUnavailable)
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

/// Writes every queued record as one batch (one write for a burst), then
/// answers each record's waiter: written, or not. Runs on its own thread:
/// file I/O never blocks the runtime. A failed batch is reported and dropped;
/// the next batch is tried afresh, starting on a new line.
fn write_loop(mut rx: mpsc::Receiver<Msg>, mut sink: Box<dyn Write + Send>, name: String) {
    let mut batch: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut acks: Vec<oneshot::Sender<bool>> = Vec::new();
    let mut failing = false;
    while let Some(first) = rx.blocking_recv() {
        let mut waiters = Vec::new();
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Line(l, ack) => {
                    batch.extend_from_slice(&l);
                    acks.extend(ack);
                }
                Msg::Flush(tx) => waiters.push(tx),
            }
            if batch.len() < 1 << 20 {
                next = rx.try_recv().ok();
            }
        }
        let result = sink.write_all(&batch).and_then(|()| sink.flush());
        batch.clear();
        match result {
            Ok(()) => {
                if failing {
                    tracing::warn!(sink = %name, "audit sink writes again");
                    failing = false;
                }
                acks.drain(..).for_each(|a| {
                    let _ = a.send(true);
                });
            }
            Err(e) => {
                if !failing {
                    tracing::error!(sink = %name, error = %e, "audit sink failed; records lost (calls waiting on them fail closed)");
                    failing = true;
                }
                acks.drain(..).for_each(|a| {
                    let _ = a.send(false);
                });
                // A partial line may be in the sink: start the next on a new one.
                batch.push(b'\n');
            }
        }
        for tx in waiters {
            let _ = tx.send(());
        }
    }
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// 64 hex digits → 32 bytes.
pub fn unhex32(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// The current UTC time as RFC 3339 with milliseconds.
pub fn now_rfc3339() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d.as_secs() as i64, d.subsec_millis())
}

fn rfc3339(secs: i64, millis: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_795_321_845, 123), "2026-11-22T04:30:45.123Z");
    }

    #[test]
    fn hex_and_sha256() {
        assert_eq!(hex(&[0, 15, 255]), "000fff");
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
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
}
