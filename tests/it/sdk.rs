//! The official `openai` Python SDK talking to a real toolgate: streaming (with the
//! SDK's own accumulation) and non-streaming, for all-allowed, partly-denied,
//! all-denied and upstream-error responses.

use std::path::PathBuf;

use serde_json::Value;

use crate::accumulate::Acc;
use crate::support::*;

fn expected_calls(fixture: &str, denied: &[&str]) -> Vec<Value> {
    let bytes = std::fs::read(fixtures_dir().unwrap().join(fixture)).unwrap();
    Acc::from_sse(&bytes)
        .all_calls()
        .into_iter()
        .filter(|c| !denied.contains(&c.name.as_str()))
        .map(|c| serde_json::json!([c.id, c.name, c.arguments]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_python_sdk_sees_exactly_the_allowed_calls() {
    crate::need_fixtures!();
    let Some(py) = python() else {
        assert!(
            std::env::var("CI").is_err(),
            "CI must provide the openai SDK (TOOLGATE_PYTHON or .venv)"
        );
        eprintln!(
            "SKIPPED: no Python with the openai SDK (run `bash .ci/test`, which creates .venv)"
        );
        return;
    };
    let denied = ["get_weather", "weather"];
    let mock = start_mock(vec![fixture(23)]).await;
    let gate = start_gate(&mock.base_url(), &deny(&denied), "").await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/openai_sdk_check.py");
    let base = format!("{}/v1", gate.url);
    let fixtures = fixtures_dir().unwrap();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(py)
            .arg(script)
            .arg(base)
            .arg(fixtures)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "SDK script failed:\n{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    eprintln!("openai SDK {}", r["sdk_version"]);
    for mode in ["stream", "whole"] {
        let all = &r[format!("all_allowed/{mode}")];
        assert_eq!(
            all["calls"].as_array().unwrap(),
            &expected_calls("openrouter-anthropic-bedrock-parallel-tools.sse", &[]),
            "{mode}: {all}"
        );
        assert_eq!(all["finish"], "tool_calls");

        let part = &r[format!("partly_denied/{mode}")];
        let want = expected_calls("openai-chat-gpt4o-parallel-tool-calls.sse", &denied);
        assert_eq!(want.len(), 1);
        assert_eq!(part["calls"].as_array().unwrap(), &want, "{mode}: {part}");
        assert_eq!(part["finish"], "tool_calls");

        let none = &r[format!("all_denied/{mode}")];
        assert!(
            none["calls"].as_array().unwrap().is_empty(),
            "{mode}: {none}"
        );
        assert_eq!(none["content"], "I wasn't able to complete that action.");
        assert_eq!(none["finish"], "stop");

        let err = &r[format!("upstream_error/{mode}")];
        assert!(
            err["raised"].is_string(),
            "{mode}: the SDK must see an error: {err}"
        );
        // The provider's own message (its `failed_generation`, a call no
        // gate saw, is not forwarded).
        let message = err["message"].as_str().unwrap();
        assert!(message.contains("get_something_by_name"), "{err}");
        assert!(!message.contains("\"value\""), "{err}");
    }
    assert_eq!(
        mock.requests()
            .iter()
            .filter(|s| s.headers["authorization"] != format!("Bearer {UPSTREAM_KEY}"))
            .count(),
        0
    );
    gate.stop().await;
}
