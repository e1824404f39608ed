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
                "file_id": s.file_id, "after_file": null});
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
                    "event": "opened", "file_id": self.file_id, "after_file": sealed});
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
mod tests {
    use super::*;

    fn config(path: AuditPath, on_error: AuditOnError) -> Audit {
        Audit {
            path,
            on_error,
            include_judge_reason: false,
            max_bytes: None,
            keep: 5,
            key_env: "TG_UNIT_NO_SUCH_KEY".into(),
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

    fn verify(
        files: &[PathBuf],
        key: Option<&[u8]>,
        head: Option<&chain::Head>,
    ) -> chain::Verified {
        chain::verify(files, key, head).unwrap()
    }

    /// A trail of `n` records written and sealed at shutdown; its head then.
    async fn sealed_trail(p: &std::path::Path, key_env: &str, n: usize) -> chain::Head {
        let mut c = config(AuditPath::File(p.to_path_buf()), AuditOnError::FailClosed);
        c.key_env = key_env.into();
        let log = AuditLog::start(&c, Default::default()).await.unwrap();
        for i in 0..n {
            log.record(&serde_json::json!({"verdict": "reject", "n": i}))
                .await
                .unwrap();
        }
        log.seal("shutdown");
        log.head()
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
        // The opening record, then ten.
        let v = verify(std::slice::from_ref(&p), None, None);
        assert_eq!((v.records, v.broken, v.starts_after), (11, None, None));
        assert_eq!(v.last.as_ref().map(|h| h.seq), Some(11));
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with(&format!("{{\"prev\":\"{}\",", chain::GENESIS)));
        assert!(text.lines().all(|l| l.contains("\"seq\":")), "{text}");
        // One byte of line 8 changed: line 9's link no longer holds.
        let edited = text.replacen(r#""n":1,"round":1"#, r#""n":7,"round":1"#, 1);
        assert_ne!(edited, text);
        std::fs::write(&p, edited).unwrap();
        let v = verify(std::slice::from_ref(&p), None, None);
        assert_eq!(v.records, 8);
        assert!(v.broken.unwrap().ends_with("audit.jsonl:9: the chain breaks here: this line or the one before it was changed, removed or moved"));
        // A line removed breaks the link after the gap.
        let mut lines: Vec<&str> = text.lines().collect();
        lines.remove(3);
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        let v = verify(std::slice::from_ref(&p), None, None);
        assert!(v.broken.unwrap().contains("audit.jsonl:4:"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn tampering_at_the_ends_is_caught_by_the_seal_or_the_head() {
        let d = scratch("ends");
        let p = d.join("audit.jsonl");
        let head = sealed_trail(&p, "TG_UNIT_NO_SUCH_KEY", 4).await;
        let text = std::fs::read_to_string(&p).unwrap();
        let v = verify(std::slice::from_ref(&p), None, Some(&head));
        assert_eq!(
            (v.broken, v.sealed.as_deref(), v.head_matched),
            (None, Some("shutdown"), true)
        );
        let lines: Vec<&str> = text.lines().collect();
        let write = |ls: &[String]| std::fs::write(&p, ls.join("\n") + "\n").unwrap();
        let owned: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        // The last record edited (the seal dropped with it): unsealed, and the head says so.
        let mut t = owned.clone();
        t.pop();
        let last = t.len() - 1;
        t[last] = t[last].replace("reject", "allow");
        write(&t);
        let v = verify(std::slice::from_ref(&p), None, None);
        assert_eq!(
            (v.broken.is_none(), v.sealed.is_none()),
            (true, true),
            "unsealed, but nothing breaks"
        );
        assert!(verify(std::slice::from_ref(&p), None, Some(&head))
            .broken
            .is_some());
        // The last lines deleted: the head's record is gone.
        let mut t = owned.clone();
        t.truncate(t.len() - 2);
        write(&t);
        let b = verify(std::slice::from_ref(&p), None, Some(&head))
            .broken
            .unwrap();
        assert!(b.contains("records were removed from its end"), "{b}");
        // A key given twice on the last line: corrupt for every reader.
        let mut t = owned.clone();
        let last = t.len() - 1;
        t[last] = t[last].replacen('{', r#"{"reason":"rotation","#, 1);
        write(&t);
        let b = verify(std::slice::from_ref(&p), None, None).broken.unwrap();
        assert!(b.contains("a key given twice"), "{b}");
        // The first lines deleted: not a rotation.
        write(&owned[2..]);
        let b = verify(std::slice::from_ref(&p), None, None).broken.unwrap();
        assert!(b.contains("first lines were removed"), "{b}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn a_keyed_chain_cannot_be_chained_again_without_the_key() {
        let d = scratch("keyed");
        let p = d.join("audit.jsonl");
        std::env::set_var("TG_UNIT_AUDIT_KEY", "audit-chain-key-1");
        let head = sealed_trail(&p, "TG_UNIT_AUDIT_KEY", 3).await;
        let key: &[u8] = b"audit-chain-key-1";
        assert_eq!(
            verify(std::slice::from_ref(&p), Some(key), Some(&head)).broken,
            None
        );
        // Without the key, or with another, the links do not hold.
        assert!(verify(std::slice::from_ref(&p), None, None)
            .broken
            .is_some());
        assert!(verify(std::slice::from_ref(&p), Some(b"guess"), None)
            .broken
            .is_some());
        // A record edited and every link after it recomputed with SHA-256.
        let text = std::fs::read_to_string(&p).unwrap();
        let mut prev = chain::GENESIS.to_string();
        let mut out = String::new();
        for (i, line) in text.lines().enumerate() {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            v.as_object_mut().unwrap().remove("prev");
            if i == 2 {
                v["verdict"] = "allow".into();
            }
            let linked = chain::link(&prev, v.to_string().as_bytes());
            prev = chain::hash(None, &linked);
            out.push_str(std::str::from_utf8(&linked).unwrap());
            out.push('\n');
        }
        std::fs::write(&p, out).unwrap();
        assert!(verify(std::slice::from_ref(&p), Some(key), None)
            .broken
            .is_some());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn rotation_keeps_the_chain_across_files() {
        let d = scratch("rotate");
        let p = d.join("audit.jsonl");
        let mut c = config(AuditPath::File(p.clone()), AuditOnError::FailClosed);
        c.max_bytes = Some(600);
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
        let v = verify(&files, None, Some(&log.head()));
        assert_eq!(v.broken, None);
        assert!(v.head_matched);
        assert!(
            v.starts_after.is_some(),
            "the oldest files were rotated away"
        );
        // A rotated file sealed; the next opens naming it.
        let sealed = std::fs::read_to_string(&files[1]).unwrap();
        assert!(
            sealed
                .lines()
                .last()
                .unwrap()
                .contains(r#""reason":"rotation""#),
            "{sealed}"
        );
        // Out of order, the set does not verify.
        let swapped = [files[1].clone(), files[0].clone()];
        assert!(verify(&swapped, None, None).broken.is_some());
        // A rotated file's last lines removed: its seal is missing.
        let t = std::fs::read_to_string(&files[2]).unwrap();
        let kept: Vec<&str> = t.lines().collect();
        std::fs::write(&files[2], kept[..kept.len() - 1].join("\n") + "\n").unwrap();
        let b = verify(&files, None, None).broken.unwrap();
        assert!(b.contains("without the seal of a rotation"), "{b}");
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
        // After the record that opens the file.
        let ns: Vec<i64> = text
            .lines()
            .skip(1)
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
