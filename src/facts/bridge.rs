//! The trace-to-facts bridge: `TraceFinding` JSON
//! files from an analyzer's directory become facts in a JSON fact file.
//!
//! A finding with a `factCorrection` gives `{subject, predicate (default
//! "value"), value: actual, source: "trace:<id>"}`. Facts are merged into the
//! output file, one per (subject, predicate), the newest winning (files in
//! modification-time order, findings in file order, both after what the output
//! already holds). The file is replaced atomically (temp file + rename) and
//! only when its facts change. A malformed file or finding is skipped and
//! reported; it never stops the import.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::watch;

use super::{default_predicate, Fact, FactFile};
use crate::error::Error;

/// `[facts.bridge]`.
#[derive(Debug, Clone)]
pub struct Bridge {
    pub dir: PathBuf,
    pub out: PathBuf,
    pub interval: Duration,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TraceFinding {
    id: String,
    #[serde(default)]
    fact_correction: Option<FactCorrection>,
}

#[derive(Debug, Deserialize)]
struct FactCorrection {
    subject: String,
    actual: String,
    #[serde(default)]
    predicate: Option<String>,
}

/// What one import did.
#[derive(Debug, Default, PartialEq)]
pub struct Report {
    pub files: usize,
    pub findings: usize,
    /// Findings that carried a fact correction.
    pub corrections: usize,
    /// `(file, why)` for every file or finding skipped.
    pub skipped: Vec<(String, String)>,
    /// Facts in the output file afterwards.
    pub facts: usize,
    /// Whether the output file was (re)written.
    pub written: bool,
}

impl Report {
    pub fn render(&self, out: &Path) -> String {
        let mut s = format!(
            "{} file(s), {} finding(s), {} with a fact correction; {} fact(s) in {}{}\n",
            self.files,
            self.findings,
            self.corrections,
            self.facts,
            out.display(),
            if self.written {
                " (updated)"
            } else {
                " (unchanged)"
            }
        );
        for (f, why) in &self.skipped {
            s.push_str(&format!("skipped {f}: {why}\n"));
        }
        s
    }
}

/// The findings of one file: a finding, an array of them, or `{"findings": [...]}`.
fn findings_of(v: Value) -> Result<Vec<Value>, String> {
    match v {
        Value::Array(a) => Ok(a),
        Value::Object(mut o) => match o.remove("findings") {
            Some(Value::Array(a)) => Ok(a),
            Some(_) => Err("`findings` is not an array".into()),
            None if o.contains_key("id") => Ok(vec![Value::Object(o)]),
            None => {
                Err("neither a finding, an array of findings, nor {\"findings\": [...]}".into())
            }
        },
        _ => Err("not a finding or a list of findings".into()),
    }
}

/// The fact a finding teaches, if any.
fn fact_of(v: Value) -> Result<Option<Fact>, String> {
    let f: TraceFinding = serde_json::from_value(v).map_err(|e| format!("finding: {e}"))?;
    let Some(c) = f.fact_correction else {
        return Ok(None);
    };
    if c.subject.trim().is_empty() || c.actual.trim().is_empty() {
        return Err(format!("finding {}: empty subject or actual value", f.id));
    }
    Ok(Some(Fact {
        subject: c.subject.trim().to_string(),
        predicate: c
            .predicate
            .filter(|p| !p.trim().is_empty())
            .unwrap_or_else(default_predicate),
        value: c.actual.trim().to_string(),
        source: format!("trace:{}", f.id),
    }))
}

/// `*.json` files in `dir`, oldest first (ties by name).
fn trace_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("cannot read trace dir {}", dir.display()), e))?;
    let mut files: Vec<(Option<SystemTime>, PathBuf)> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .map(|p| (std::fs::metadata(&p).and_then(|m| m.modified()).ok(), p))
        .collect();
    files.sort();
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

/// Reads the output file's facts; a missing file is an empty registry.
fn existing(out: &Path) -> Result<Vec<Fact>, Error> {
    match std::fs::read_to_string(out) {
        Ok(text) => serde_json::from_str::<FactFile>(&text)
            .map(|f| f.facts)
            .map_err(|e| {
                Error::config(
                    out.display().to_string(),
                    e.line(),
                    format!("not a fact file: {e}; left as it is"),
                )
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io(format!("cannot read {}", out.display()), e)),
    }
}

/// Writes `text` to `path` via a temp file in the same directory and a rename.
fn write_atomically(path: &Path, text: &str) -> Result<(), Error> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("facts.json");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, text)
        .map_err(|e| Error::io(format!("cannot write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(format!("cannot replace {}", path.display()), e)
    })
}

/// One import of `dir` into `out`.
pub fn import(dir: &Path, out: &Path) -> Result<Report, Error> {
    let before = existing(out)?;
    let mut facts = before.clone();
    let mut report = Report::default();
    for path in trace_files(dir)? {
        report.files += 1;
        let name = path.display().to_string();
        let parsed = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read: {e}"))
            .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| format!("not JSON: {e}")))
            .and_then(findings_of);
        let list = match parsed {
            Ok(l) => l,
            Err(why) => {
                report.skipped.push((name, why));
                continue;
            }
        };
        for v in list {
            report.findings += 1;
            match fact_of(v) {
                Ok(Some(f)) => {
                    report.corrections += 1;
                    match facts
                        .iter_mut()
                        .find(|x| x.subject == f.subject && x.predicate == f.predicate)
                    {
                        Some(x) => *x = f,
                        None => facts.push(f),
                    }
                }
                Ok(None) => {}
                Err(why) => report.skipped.push((name.clone(), why)),
            }
        }
    }
    report.facts = facts.len();
    if facts != before || !out.exists() {
        let file = FactFile {
            id: "trace-learned".into(),
            generated_at: Some(crate::digest::now_rfc3339()),
            facts,
        };
        let text = serde_json::to_string_pretty(&file)
            .map_err(|e| Error::BadRequest(format!("cannot serialise facts: {e}")))?;
        write_atomically(out, &format!("{text}\n"))?;
        report.written = true;
    }
    Ok(report)
}

/// Imports and logs the outcome (for the background task and start-up).
pub fn import_logged(b: &Bridge) {
    match import(&b.dir, &b.out) {
        Ok(r) => {
            for (f, why) in &r.skipped {
                tracing::warn!(file = %f, "trace finding skipped: {why}");
            }
            if r.written {
                tracing::info!(facts = r.facts, out = %b.out.display(), "fact file updated from trace findings");
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "trace-to-facts import failed; the fact file is unchanged")
        }
    }
}

/// Imports when the trace dir changes (checked every two seconds) and every `interval`.
pub async fn watch(b: Bridge, mut shutdown: watch::Receiver<bool>) {
    let poll = b.interval.min(Duration::from_secs(2));
    let mut last = crate::digest::stamp::of_dir(&b.dir, "json", &[]);
    let mut at = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = shutdown.changed() => return,
        }
        let now = crate::digest::stamp::of_dir(&b.dir, "json", &[]);
        if now != last || at.elapsed() >= b.interval {
            last = now;
            at = Instant::now();
            let b2 = b.clone();
            let _ = tokio::task::spawn_blocking(move || import_logged(&b2)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("toolgate-bridge-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("traces")).unwrap();
        d
    }

    fn finding(id: &str, subject: &str, actual: &str, predicate: Option<&str>) -> Value {
        let mut fc = serde_json::json!({"subject": subject, "claimed": "x", "actual": actual});
        if let Some(p) = predicate {
            fc["predicate"] = p.into();
        }
        serde_json::json!({"id": id, "agent": "main",
            "signal": {"signal": "SIG-HALLUCINATION", "severity": "high", "summary": "wrong count"},
            "factCorrection": fc})
    }

    #[test]
    fn findings_become_facts_newest_wins_and_bad_files_are_skipped() {
        let d = tmp("import");
        let traces = d.join("traces");
        let out = d.join("facts/generated.json");
        std::fs::write(
            traces.join("a.json"),
            serde_json::to_string(&serde_json::json!({"findings": [
                finding("f1", "nats-events", "255908", Some("count")),
                finding("f2", "uptime", "99.5%", None),
                {"id": "f3", "agent": "main", "signal": {"signal": "SIG-CORRECTION", "severity": "low", "summary": "no fact"}},
                {"agent": "no id"}
            ]})).unwrap(),
        )
        .unwrap();
        std::fs::write(traces.join("broken.json"), "{not json").unwrap();
        std::fs::write(traces.join("notes.txt"), "ignored").unwrap();
        let r = import(&traces, &out).unwrap();
        assert_eq!((r.files, r.findings, r.corrections, r.facts), (2, 4, 2, 2));
        assert!(r.written);
        assert_eq!(r.skipped.len(), 2, "{:?}", r.skipped);
        assert!(r
            .skipped
            .iter()
            .any(|(f, why)| f.ends_with("broken.json") && why.contains("not JSON")));
        let f: FactFile = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(f.id, "trace-learned");
        assert_eq!(
            f.facts[0],
            Fact {
                subject: "nats-events".into(),
                predicate: "count".into(),
                value: "255908".into(),
                source: "trace:f1".into()
            }
        );
        assert_eq!(f.facts[1].predicate, "value");
        // Nothing new: not rewritten.
        assert!(!import(&traces, &out).unwrap().written);
        // A newer finding for the same (subject, predicate) wins.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(
            traces.join("b.json"),
            serde_json::to_string(&finding("f9", "nats-events", "300000", Some("count"))).unwrap(),
        )
        .unwrap();
        let r = import(&traces, &out).unwrap();
        assert!(r.written);
        let f: FactFile = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(f.facts.len(), 2);
        assert_eq!(
            (f.facts[0].value.as_str(), f.facts[0].source.as_str()),
            ("300000", "trace:f9")
        );
        // No temp file is left behind.
        let left: Vec<_> = std::fs::read_dir(d.join("facts")).unwrap().collect();
        assert_eq!(left.len(), 1);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_invalid_output_file_is_left_alone() {
        let d = tmp("badout");
        let out = d.join("out.json");
        std::fs::write(&out, "[1, 2").unwrap();
        std::fs::write(
            d.join("traces/a.json"),
            serde_json::to_string(&finding("f1", "s", "1", None)).unwrap(),
        )
        .unwrap();
        let e = import(&d.join("traces"), &out).unwrap_err().to_string();
        assert!(e.contains("not a fact file"), "{e}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "[1, 2");
        let _ = std::fs::remove_dir_all(&d);
    }
}
