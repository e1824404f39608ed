//! The audit trail's tests: the chain, its ends, rotation, keys, sinks.

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

fn verify(files: &[PathBuf], key: Option<&[u8]>, head: Option<&chain::Head>) -> chain::Verified {
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
