//! An audit trail that proves itself, through the real binary: records are
//! hash-chained, `toolgate audit verify` passes on a real run and names the
//! first broken line after one byte is edited, and failed writes are counted.

use std::process::Command;

use crate::bin::Bin;
use crate::support::*;

fn verify(files: &[std::path::PathBuf]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("audit")
        .arg("verify")
        .args(files)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A streamed chat request declaring `get_weather`.
async fn ask(bin: &Bin) -> Answer {
    send(
        "POST",
        &format!("{}/v1/chat/completions", bin.url),
        &[("content-type", "application/json")],
        chat_request(true, &["get_weather"]).to_string(),
    )
    .await
}

#[tokio::test]
async fn a_real_run_verifies_and_one_edited_byte_is_found() {
    let mock = start_mock(vec![Reply::sse(one_call_stream(
        "get_weather",
        r#"{"city":"Paris"}"#,
    ))])
    .await;
    let bin = Bin::start(&mock.base_url(), &[("50-test.toml", ALLOW_ALL)], "").await;
    for _ in 0..4 {
        let a = ask(&bin).await;
        assert_eq!(a.status, 200, "{}", a.text());
    }
    let path = bin.path("audit.jsonl");
    let lines = bin.audit_lines();
    assert!(lines.len() >= 4, "{lines:?}");
    let (code, out, err) = verify(std::slice::from_ref(&path));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!("ok: {} records, the chain holds\n", lines.len())
    );

    let mut edited = lines.clone();
    edited[1] = edited[1].replacen("get_weather", "get_weathex", 1);
    assert_ne!(edited[1], lines[1]);
    std::fs::write(&path, edited.join("\n") + "\n").unwrap();
    let (code, _, err) = verify(std::slice::from_ref(&path));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("audit.jsonl:3: the chain breaks here"),
        "{err}"
    );

    let (code, _, err) = verify(&[bin.path("missing.jsonl")]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read"), "{err}");
}

#[tokio::test]
async fn failed_writes_are_counted() {
    let mock = start_mock(vec![Reply::sse(one_call_stream("get_weather", "{}"))]).await;
    let bin = Bin::start(
        &mock.base_url(),
        &[("50-test.toml", ALLOW_ALL)],
        "audit.path = \"/dev/full\"",
    )
    .await;
    let a = ask(&bin).await;
    assert!(
        !a.text().contains("call_1"),
        "no record, no release: {}",
        a.text()
    );
    let m = bin.metrics().await;
    assert!(m.contains("toolgate_audit_write_failures_total 1"), "{m}");
}
