//! The approval webhook (signed, answering at once or later, down and
//! retried) and the `toolgate approvals` CLI against a running toolgate.

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::{json, Value};

use crate::accumulate::Acc;
use crate::approval::{answer_with, approval_config, decide, list, pending, ASK, TOKEN_ENV};
use crate::support::*;

const SECRET_ENV: &str = "TOOLGATE_IT_APPROVAL_SECRET";
const SECRET: &str = "webhook-signing-key-for-tests";
const ARGS: &str = r#"{"amount":5}"#;

fn hook_config(url: &str, timeout: f64) -> String {
    std::env::set_var(SECRET_ENV, SECRET);
    format!(
        "{}webhook = \"{url}\"\nsecret_env = \"{SECRET_ENV}\"\n",
        approval_config(timeout)
    )
}

fn request() -> Value {
    let mut r = chat_request(false, &["pay"]);
    r["messages"] = json!([{"role": "user", "content": "pay it"}]);
    r
}

async fn ask(gate: &Gate) -> Answer {
    post_chat(gate, &request()).await
}

/// The receiver's check: `t=<unix>,sha256=<hex>` is the HMAC-SHA256 of
/// "t.body" under the shared secret, and `t` is recent.
fn verify(seen: &Seen) -> Value {
    let sig = seen
        .headers
        .get("x-toolgate-signature")
        .expect("unsigned")
        .to_str()
        .unwrap();
    let (t, mac) = sig.split_once(",sha256=").expect(sig);
    let t = t.strip_prefix("t=").expect(sig);
    let mut m = Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    m.update(t.as_bytes());
    m.update(b".");
    m.update(&seen.body);
    let want: String = m
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(mac, want, "bad signature");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now.abs_diff(t.parse().unwrap()) < 60);
    assert_eq!(seen.headers["content-type"], "application/json");
    serde_json::from_slice(&seen.body).unwrap()
}

/// `t=<unix>,sha256=<hex>` of `body` under the shared secret, now.
fn sign(body: &str) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut m = Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    m.update(format!("{t}.{body}").as_bytes());
    let mac: String = m
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("t={t},sha256={mac}")
}

/// A receiver that approves each question at once, its answer signed.
fn approving_hook() -> Reply {
    Reply::computed(|seen| {
        let q: Value = serde_json::from_slice(&seen.body).unwrap_or(Value::Null);
        let body = json!({"id": q["id"], "decision": "approve", "by": "pager-bot"}).to_string();
        Reply::Headed(
            vec![("x-toolgate-signature", sign(&body))],
            Box::new(Reply::json(200, body)),
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_answer_from_the_webhook_is_ignored() {
    let hook = start_mock(vec![Reply::json(
        200,
        r#"{"decision":"approve","by":"mallory"}"#,
    )])
    .await;
    let mock = start_mock(vec![answer_with(&[("pay", "call_1", ARGS)])]).await;
    let gate = start_gate(&mock.base_url(), ASK, &hook_config(&hook.base_url(), 1.0)).await;
    let a = ask(&gate).await;
    assert!(
        Acc::from_json(&a.body).all_calls().is_empty(),
        "{}",
        a.text()
    );
    let rec = gate.audit_flushed().await;
    let r = rec.iter().find(|r| r["gate"] == "approval").unwrap();
    assert_eq!(r["approval"]["decision"], "timeout", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_webhook_may_answer_at_once() {
    let hook = start_mock(vec![approving_hook()]).await;
    let mock = start_mock(vec![answer_with(&[("pay", "call_1", ARGS)])]).await;
    let gate = start_gate(
        &mock.base_url(),
        ASK,
        &hook_config(&format!("{}/hook", hook.base_url()), 30.0),
    )
    .await;
    let a = ask(&gate).await;
    assert_eq!(Acc::from_json(&a.body).all_calls().len(), 1, "{}", a.text());
    let seen = hook.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/hook", "the webhook URL's own path");
    let q = verify(&seen[0]);
    assert_eq!(
        (
            q["tool"].as_str(),
            q["rule"].as_str(),
            q["arguments"].as_str()
        ),
        (Some("pay"), Some("ask-money"), Some(ARGS))
    );
    assert_eq!(q["digest"].as_str().map(str::len), Some(64));
    assert!(
        seen[0].headers.get("authorization").is_none(),
        "no key goes to the webhook"
    );
    let rec = gate.audit_flushed().await;
    let r = rec.iter().find(|r| r["gate"] == "approval").unwrap();
    assert_eq!(
        (&r["approval"]["channel"], &r["approval"]["by"]),
        (&json!("webhook"), &json!("pager-bot"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_may_answer_later_through_the_api() {
    let hook = start_mock(vec![Reply::json(202, r#"{"received":true}"#)]).await;
    let mock = start_mock(vec![answer_with(&[("pay", "call_1", ARGS)])]).await;
    let gate = start_gate(&mock.base_url(), ASK, &hook_config(&hook.base_url(), 30.0)).await;
    let waiting = crate::approval::spawn_chat(&gate, request());
    let q = pending(&gate, 1).await;
    for _ in 0..100 {
        if !hook.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sent = verify(&hook.requests()[0]);
    assert_eq!(
        sent["id"], q[0]["id"],
        "the webhook got the question the API lists"
    );
    // Delivered once: accepted without an answer is not retried.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(hook.requests().len(), 1);
    assert_eq!(
        decide(
            &gate,
            sent["id"].as_str().unwrap(),
            json!({"decision": "approve", "by": "ana"})
        )
        .await
        .status,
        200
    );
    let a = waiting.await.unwrap();
    assert_eq!(Acc::from_json(&a.body).all_calls().len(), 1, "{}", a.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_is_down_is_retried_then_the_call_times_out_closed() {
    let hook = start_mock(vec![Reply::json(503, r#"{"error":"down"}"#)]).await;
    let mock = start_mock(vec![answer_with(&[("pay", "call_1", ARGS)])]).await;
    let gate = start_gate(&mock.base_url(), ASK, &hook_config(&hook.base_url(), 2.5)).await;
    let a = ask(&gate).await;
    assert!(
        Acc::from_json(&a.body).all_calls().is_empty(),
        "{}",
        a.text()
    );
    let tries = hook.requests();
    assert!(
        tries.len() >= 3,
        "retried with backoff: {} tries",
        tries.len()
    );
    let ids: Vec<Value> = tries.iter().map(|s| verify(s)["id"].clone()).collect();
    assert!(ids.windows(2).all(|w| w[0] == w[1]));
    // Nothing listens at all: the same, a neutral turn after the time-out.
    // The port stays bound but not listening for the test, so no other
    // listener (the gate's own, say) can be handed it meanwhile.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = closed.local_addr().unwrap().port();
    let gate2 = start_gate(
        &mock.base_url(),
        ASK,
        &hook_config(&format!("http://127.0.0.1:{port}/hook"), 1.0),
    )
    .await;
    let a = ask(&gate2).await;
    assert!(
        Acc::from_json(&a.body).all_calls().is_empty(),
        "{}",
        a.text()
    );
    let rec = gate2.audit_flushed().await;
    assert!(
        rec.iter().any(|r| r["approval"]["decision"] == "timeout"),
        "{rec:?}"
    );
    drop(closed);
}

fn cli(admin: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("approvals")
        .args([
            "--addr",
            admin.trim_start_matches("http://"),
            "--token-env",
            TOKEN_ENV,
        ])
        .args(args)
        .env("USER", "cli-user")
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_approves_and_denies() {
    let mock = start_mock(vec![answer_with(&[
        ("pay", "call_1", ARGS),
        ("refund", "call_2", r#"{"id":1}"#),
    ])])
    .await;
    let gate = start_gate(&mock.base_url(), ASK, &approval_config(30.0)).await;
    let mut body = chat_request(false, &["pay", "refund"]);
    body["messages"] = json!([{"role": "user", "content": "pay it"}]);
    let waiting = crate::approval::spawn_chat(&gate, body);
    let q = pending(&gate, 2).await;
    let admin = gate.admin.clone();
    let out = tokio::task::spawn_blocking(move || cli(&admin, &["list"]))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for item in &q {
        assert!(text.contains(item["id"].as_str().unwrap()), "{text}");
    }
    assert!(
        text.contains("pay") && text.contains("ask-money") && text.starts_with("ID "),
        "{text}"
    );
    let (admin, ids) = (
        gate.admin.clone(),
        [
            q[0]["id"].as_str().unwrap().to_string(),
            q[1]["id"].as_str().unwrap().to_string(),
        ],
    );
    let (ok, no, again, bad_token) = tokio::task::spawn_blocking(move || {
        let ok = cli(&admin, &["approve", &ids[0]]);
        let no = cli(&admin, &["deny", &ids[1], "--by", "bea"]);
        let again = cli(&admin, &["approve", &ids[0]]);
        let bad = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args([
                "approvals",
                "--addr",
                admin.trim_start_matches("http://"),
                "--token-env",
                "TOOLGATE_IT_NO_SUCH_VAR",
                "list",
            ])
            .output()
            .unwrap();
        (ok, no, again, bad)
    })
    .await
    .unwrap();
    assert!(
        ok.status.success() && no.status.success(),
        "{}{}",
        String::from_utf8_lossy(&ok.stderr),
        String::from_utf8_lossy(&no.stderr)
    );
    assert_eq!(again.status.code(), Some(1), "a settled id is refused");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("409"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(bad_token.status.code(), Some(1));
    let a = waiting.await.unwrap();
    let calls: Vec<String> = Acc::from_json(&a.body)
        .all_calls()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(calls, ["pay"]);
    assert!(list(&gate).await.is_empty());
    let rec = gate.audit_flushed().await;
    let who: Vec<(&str, &str, &str)> = rec
        .iter()
        .filter(|r| r["gate"] == "approval")
        .map(|r| {
            (
                r["approval"]["decision"].as_str().unwrap(),
                r["approval"]["by"].as_str().unwrap(),
                r["approval"]["channel"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        who,
        [("approve", "cli-user", "cli"), ("deny", "bea", "cli")]
    );
}
