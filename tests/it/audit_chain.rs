//! An audit trail that proves itself, through the real binary: records are
//! hash-chained, `toolgate audit verify` passes on a real run and names the
//! first broken line after one byte is edited; the end of the trail is
//! anchored by the head on the admin port and the seal at shutdown; a keyed
//! chain needs its key; failed writes are counted.

use std::process::Command;

use crate::bin::Bin;
use crate::support::*;

fn verify(files: &[std::path::PathBuf]) -> (i32, String, String) {
    verify_with(files, &[], &[])
}

fn verify_with(
    files: &[std::path::PathBuf],
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("audit")
        .arg("verify")
        .args(files)
        .args(args)
        .envs(env.iter().copied())
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
    assert!(
        out.starts_with(&format!(
            "ok: {} records, the chain holds; not sealed",
            lines.len()
        )),
        "{out}"
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
    // The record that opens the trail, and the call's.
    assert!(m.contains("toolgate_audit_write_failures_total 2"), "{m}");
}

#[tokio::test]
async fn the_end_of_a_keyed_trail_is_checked_against_its_head_and_seal() {
    let mock = start_mock(vec![Reply::sse(one_call_stream("get_weather", "{}"))]).await;
    let key = [("TG_IT_AUDIT_KEY", "audit-key-for-the-test")];
    let mut bin = Bin::start_env(
        &mock.base_url(),
        &[("50-test.toml", ALLOW_ALL)],
        "audit.key_env = \"TG_IT_AUDIT_KEY\"",
        &key,
    )
    .await;
    for _ in 0..3 {
        assert_eq!(ask(&bin).await.status, 200);
    }
    let head = send("GET", &format!("{}/audit/head", bin.admin), &[], "").await;
    assert_eq!(head.status, 200);
    let head = head.json();
    assert_eq!(head["keyed"], true, "{head}");
    let head = head["head"].as_str().unwrap().to_string();
    assert!(bin.terminate().await, "toolgate stops on SIGTERM");
    let path = bin.path("audit.jsonl");
    let lines = std::fs::read_to_string(&path).unwrap();
    assert!(
        lines.lines().last().unwrap().contains(r#""event":"seal""#),
        "{lines}"
    );
    let files = std::slice::from_ref(&path);
    let keyed = ["--key-env", "TG_IT_AUDIT_KEY"];
    let with_head = ["--key-env", "TG_IT_AUDIT_KEY", "--head", head.as_str()];
    let (code, out, err) = verify_with(files, &with_head, &key);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("is the head's") && out.contains("sealed (shutdown)"),
        "{out}"
    );
    // Without the key the links of a keyed trail do not hold.
    assert_eq!(verify(files).0, 1);
    // The last call record turned from `allow` to `deny` and the seal dropped:
    // unsealed; against the head, broken.
    let mut t: Vec<String> = lines.lines().map(str::to_string).collect();
    t.pop();
    let last = t
        .iter()
        .rposition(|l| l.contains(r#""verdict":"allow""#))
        .unwrap();
    t[last] = t[last].replace(r#""verdict":"allow""#, r#""verdict":"deny""#);
    std::fs::write(&path, t.join("\n") + "\n").unwrap();
    let (code, out, _) = verify_with(files, &keyed, &key);
    // The edited record is the last: nothing after it to break, and no seal.
    assert_eq!(code, 0);
    assert!(out.contains("not sealed"), "{out}");
    let (code, _, err) = verify_with(files, &with_head, &key);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is not the one the head names"), "{err}");

    // The whole trail chained again with SHA-256, as anyone who can write
    // the file can: it says it is keyed, so without its key it is not good.
    let mut prev = toolgate::audit::chain::GENESIS.to_string();
    let mut again = String::new();
    for line in &t {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        v.as_object_mut().unwrap().remove("prev");
        let linked = toolgate::audit::chain::link(&prev, v.to_string().as_bytes());
        prev = toolgate::audit::chain::hash(None, &linked);
        again.push_str(std::str::from_utf8(&linked).unwrap());
        again.push('\n');
    }
    std::fs::write(&path, again).unwrap();
    let (code, _, err) = verify(files);
    assert_eq!(code, 1, "a keyed trail rewritten unkeyed passed: {err}");
    assert!(err.contains("keyed"), "{err}");
    let (code, _, err) = verify_with(files, &keyed, &key);
    assert_eq!(code, 1, "{err}");
}
