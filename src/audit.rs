//! The audit trail: one JSON line per gated call, never dropped, never raw arguments.
//!
//! Records go through a bounded queue to one writer thread. A full queue makes
//! the caller wait (back-pressure, not loss). When the sink fails the writer
//! stops, every later [`AuditLog::record`] returns an error, and the caller
//! fails the call closed.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use std::io::{BufWriter, Write};

use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

use crate::config::AuditPath;
use crate::error::Error;

const QUEUE: usize = 4096;
/// How long the writer lets records gather after a write.
const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(1);

enum Msg {
    Line(Vec<u8>),
    Flush(oneshot::Sender<()>),
}

/// A handle to the audit writer; cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    tx: mpsc::Sender<Msg>,
}

impl AuditLog {
    /// Opens the sink and starts the writer thread.
    pub async fn start(path: &AuditPath) -> Result<AuditLog, Error> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (sink, name): (Box<dyn Write + Send>, String) = match path {
            AuditPath::Stdout => (Box::new(std::io::stdout()), "stdout".into()),
            AuditPath::File(p) => (Box::new(open(p)?), p.display().to_string()),
        };
        std::thread::Builder::new()
            .name("toolgate-audit".into())
            .spawn(move || write_loop(rx, BufWriter::with_capacity(64 * 1024, sink), name))
            .map_err(|e| Error::io("cannot start the audit writer", e))?;
        Ok(AuditLog { tx })
    }

    /// Queues one record (serialised as one JSON line); waits while the queue is full.
    pub async fn record(&self, record: &impl serde::Serialize) -> Result<(), Error> {
        let mut line = serde_json::to_vec(record).map_err(|_| Error::AuditUnavailable)?;
        line.push(b'\n');
        self.tx
            .send(Msg::Line(line))
            .await
            .map_err(|_| Error::AuditUnavailable)
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

fn open(p: &PathBuf) -> Result<std::fs::File, Error> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map_err(|e| Error::io(format!("cannot open audit file {}", p.display()), e))
}

/// Writes every queued record, flushing whenever the queue runs dry, so a burst
/// of records costs one write; then waits [`BATCH_WINDOW`] before the next batch. Runs on its own thread: file I/O never blocks the
/// runtime. On a write error it stops, which closes the queue.
fn write_loop(mut rx: mpsc::Receiver<Msg>, mut w: BufWriter<Box<dyn Write + Send>>, name: String) {
    while let Some(first) = rx.blocking_recv() {
        let mut waiters = Vec::new();
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Line(l) => {
                    if let Err(e) = w.write_all(&l) {
                        tracing::error!(sink = %name, error = %e, "audit sink failed; gated calls now fail closed");
                        return;
                    }
                }
                Msg::Flush(tx) => waiters.push(tx),
            }
            next = rx.try_recv().ok();
        }
        if let Err(e) = w.flush() {
            tracing::error!(sink = %name, error = %e, "audit sink failed; gated calls now fail closed");
            return;
        }
        for tx in waiters {
            let _ = tx.send(());
        }
        // Let records gather for a moment: under load one write carries many
        // records and senders need not wake this thread for each one.
        std::thread::sleep(BATCH_WINDOW);
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
        let log = AuditLog::start(&AuditPath::File(p.clone())).await.unwrap();
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
        let r = AuditLog::start(&AuditPath::File("/nonexistent-dir/x/audit.jsonl".into())).await;
        assert!(r.is_err());
    }
}
