//! Policy reload through the binary: `POST /reload` reads settled files as
//! the watcher does (a file caught mid-write is not loaded), and by
//! default (`reload_drops = "refuse"`) the last policy stays when a new one
//! would drop a deny rule.

use std::time::Duration;

use serde_json::json;

use crate::accumulate::Acc;
use crate::bin::Bin;
use crate::support::*;

const TOKEN: &str = "reload-admin-token-3";

fn completion() -> String {
    json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}]}}]})
    .to_string()
}

/// Whether `shell` reached the agent.
async fn released(bin: &Bin) -> bool {
    let url = format!("{}/v1/chat/completions", bin.url);
    let body = chat_request(false, &["shell"]).to_string();
    let a = send("POST", &url, &[("content-type", "application/json")], body).await;
    !Acc::from_json(&a.body).all_calls().is_empty()
}

/// The first part of the policy file: it parses, and allows everything.
const FIRST_PART: &str = "[[rule]]\nname = \"allow-all\"\ntools = [\"*\"]\nverdict = \"allow\"\n";

async fn start(extra: &str) -> (Bin, Mock) {
    let mock = start_mock(vec![Reply::json(200, completion())]).await;
    let policy = format!("{FIRST_PART}\n{}", deny(&["shell"]));
    let files = [("50-test.toml", policy.as_str())];
    let env = [("TOOLGATE_ADMIN_TOKEN", TOKEN)];
    let bin = Bin::start_env(&mock.base_url(), &files, extra, &env).await;
    (bin, mock)
}

async fn reload(bin: &Bin) {
    let auth = format!("Bearer {TOKEN}");
    let r = send(
        "POST",
        &format!("{}/reload", bin.admin),
        &[("authorization", &auth)],
        "",
    )
    .await;
    assert_eq!(r.status, 202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requested_reload_waits_for_the_files_to_settle() {
    let (bin, _mock) = start("policy.reload = \"signal\"\npolicy.settle_ms = 800").await;
    assert!(!released(&bin).await);
    let file = bin.path("policies/50-test.toml");
    let full = std::fs::read_to_string(&file).unwrap();
    // The writer has written a first part that parses (no deny yet) when
    // the reload is asked for; the rest follows 300 ms later.
    std::fs::write(&file, FIRST_PART).unwrap();
    reload(&bin).await;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!released(&bin).await, "the half-written file was loaded");
    }
    std::fs::write(&file, &full).unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!released(&bin).await, "the settled file denies");
    assert!(bin.stderr().contains("policy reloaded"), "{}", bin.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_drops_refuse_keeps_the_deny_rules() {
    let (bin, _mock) = start("policy.reload = \"signal\"\npolicy.settle_ms = 0").await;
    std::fs::write(bin.path("policies/50-test.toml"), FIRST_PART).unwrap();
    reload(&bin).await;
    let mut refused = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if bin.stderr().contains("policy reload refused") {
            refused = true;
            break;
        }
    }
    assert!(refused, "{}", bin.stderr());
    assert!(!released(&bin).await, "the deny rule stays");
}
