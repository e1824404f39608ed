//! Output validation through the proxy: a fact contradiction in a
//! streamed external communication, the LLM fact-checker over HTTP (only for
//! external communications, its block, its cache, its failure), and the
//! trace-to-facts bridge feeding the registry at run time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::accumulate::Acc;
use crate::support::*;

fn policies(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut files = shipped(&["default.toml", "examples/external-comms.toml"]);
    files.extend(extra.iter().map(|(n, t)| (n.to_string(), t.to_string())));
    files
}

const NATS_FACT: &str = "[[fact]]\nsubject = \"nats-events\"\npredicate = \"count\"\nvalue = \"255908\"\nsource = \"ops dashboard\"\n";

fn email(body: &str) -> String {
    json!({"to": "press@example.com", "subject": "Update", "body": body}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_email_contradicting_a_fact_is_a_neutral_failure_and_one_agreeing_is_intact() {
    let wrong = email("Big day: our nats-events count passed 300,000 this morning.");
    let right = email("Big day: our nats-events count reached 255,908 this morning.");
    let mock = start_mock(vec![
        Reply::sse(one_call_stream("email.send", &wrong)),
        Reply::sse(one_call_stream("email.send", &right)),
    ])
    .await;
    let gate = start_gate_files(
        &mock.base_url(),
        &policies(&[("90-facts.toml", NATS_FACT)]),
        "",
    )
    .await;
    let req = chat_request(true, &["email.send"]);

    let a = post_chat(&gate, &req).await;
    let acc = Acc::from_sse(&a.body);
    assert!(acc.calls_of(0).is_empty(), "{}", a.text());
    assert!(acc.content[&0].contains(NEUTRAL), "{}", a.text());
    assert_eq!(acc.finish[&0], "stop");
    assert!(
        !a.text().contains("nats") && !a.text().contains("fact"),
        "nothing leaks: {}",
        a.text()
    );

    let a = post_chat(&gate, &req).await;
    let calls = Acc::from_sse(&a.body).calls_of(0);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].arguments, right, "released byte for byte");

    let audit = gate.audit_flushed().await;
    let denied = &audit[0];
    assert_eq!(denied["verdict"], "reject");
    assert_eq!(denied["rule"], "output-contradicts-fact");
    let contradiction = &denied["signals"]["output.contradictions"]["value"][0];
    assert_eq!(contradiction["subject"], "nats-events");
    assert_eq!(contradiction["value"], "255908");
    assert_eq!(
        denied["signals"]["output.claims"]["value"], 1,
        "claims are audited as a count"
    );
    let line = serde_json::to_string(&audit).unwrap();
    assert!(
        !line.contains("300,000") && !line.contains("this morning"),
        "no outgoing text in the audit trail"
    );
    assert_eq!(audit[1]["verdict"], "allow");
    gate.stop().await;
}

/// The judge's answers: the sentinel approves; the fact-checker blocks texts
/// that say "fastest" and passes the rest (or fails with `fail_status`).
struct Judge {
    checks: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Value>>>,
}

fn judge(fail_status: Option<u16>) -> (Judge, Reply) {
    let checks = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (c, s) = (checks.clone(), seen.clone());
    let reply = func(
        Arc::new(move |req: &Value| {
            let name = req["response_format"]["json_schema"]["name"]
                .as_str()
                .unwrap_or("");
            let answer = if name == "output_fact_check" {
                c.fetch_add(1, Ordering::SeqCst);
                if let Some(status) = fail_status {
                    return (status, json!({"error": {"message": "down"}}).to_string());
                }
                let user = req["messages"][1]["content"].as_str().unwrap_or("");
                let block = user
                    .split("<data>\n")
                    .nth(1)
                    .and_then(|b| b.rsplit_once("\n</data>"))
                    .map(|b| b.0);
                let Some(data) = block.and_then(|b| serde_json::from_str::<Value>(b).ok()) else {
                    return (
                        400,
                        json!({"error": {"message": "no data block"}}).to_string(),
                    );
                };
                assert_eq!(req["max_tokens"], 500, "the fact-checker's own max_tokens");
                s.lock().unwrap().push(data.clone());
                let text = data["text"].as_str().unwrap_or("");
                if text.contains("fastest") {
                    json!({"verdict": "block", "reasons": ["exaggerated capability claim"], "confidence": 0.93})
                } else {
                    json!({"verdict": "pass", "reasons": [], "confidence": 0.9})
                }
            } else {
                json!({"decision": "approve", "reason": "ok", "confidence": 0.95})
            };
            let body = json!({"id": "j", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": answer.to_string()}}]});
            (200, body.to_string())
        }),
        Duration::ZERO,
    );
    (
        Judge {
            checks,
            seen: seen.clone(),
        },
        reply,
    )
}

/// An upstream proposing `message` with the channel and text named by the user
/// message `CHANNEL: TEXT`, or `exec` of TEXT for `exec: TEXT` (non-streaming).
fn messaging_upstream() -> Reply {
    func(
        Arc::new(|req: &Value| {
            let user = req["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["content"].as_str())
                .unwrap_or("");
            let (channel, text) = user.split_once(": ").unwrap_or(("slack", user));
            let (name, args) = if channel == "exec" {
                ("exec", json!({"command": text}))
            } else {
                ("message", json!({"channel": channel, "text": text}))
            };
            let call = json!({"id": "call_m", "type": "function", "function": {"name": name, "arguments": args.to_string()}});
            (200, json!({"id": "u", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": null, "tool_calls": [call]}}]}).to_string())
        }),
        Duration::ZERO,
    )
}

async fn say(gate: &Gate, line: &str) -> usize {
    let body = json!({"model": "m", "messages": [{"role": "user", "content": line}],
        "tools": [{"type": "function", "function": {"name": "message", "parameters": {"type": "object"}}},
                  {"type": "function", "function": {"name": "exec", "parameters": {"type": "object"}}}]});
    let a = post_chat_at(gate, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(a.status, 200, "{}", a.text());
    Acc::from_json(&a.body).all_calls().len()
}

async fn gate_with_judge(judge: &Mock, upstream: &Mock) -> Gate {
    let extra = format!(
        "[judge]\nbase_url = \"{}\"\napi_key_env = \"{KEY_ENV}\"\n",
        judge.base_url()
    );
    start_gate_files(&upstream.base_url(), &policies(&[]), &extra).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fact_checker_judges_only_external_messages_and_its_block_rejects() {
    let (j, reply) = judge(None);
    let judge_mock = start_mock(vec![reply]).await;
    let upstream = start_mock(vec![messaging_upstream()]).await;
    let gate = gate_with_judge(&judge_mock, &upstream).await;

    assert_eq!(
        say(&gate, "slack: we are the fastest team").await,
        1,
        "internal chat passes"
    );
    assert_eq!(
        j.checks.load(Ordering::SeqCst),
        0,
        "no fact-check for a non-external call"
    );

    assert_eq!(
        say(&gate, "twitter: toolgate is the fastest gateway on earth").await,
        0,
        "blocked"
    );
    assert_eq!(j.checks.load(Ordering::SeqCst), 1);
    let data = j.seen.lock().unwrap()[0].clone();
    assert_eq!(data["channel"], "message");
    assert_eq!(data["text"], "toolgate is the fastest gateway on earth");
    assert_eq!(
        data["known_facts"],
        json!([{"subject": "toolgate", "predicate": "license", "value": "Apache-2.0"}]),
        "the facts whose subject the text names"
    );

    assert_eq!(say(&gate, "linkedin: join our meetup on Friday").await, 1);
    assert_eq!(say(&gate, "linkedin: join our meetup on Friday").await, 1);
    assert_eq!(
        j.checks.load(Ordering::SeqCst),
        2,
        "the same text and facts are answered from the cache"
    );

    // The integration case: `exec` running `bird tweet` is an external communication.
    assert_eq!(
        say(&gate, "exec: grep fastest notes.txt").await,
        1,
        "not a tweet"
    );
    assert_eq!(j.checks.load(Ordering::SeqCst), 2);
    assert_eq!(
        say(&gate, "exec: bird tweet 'we ship the fastest agents'").await,
        0
    );
    assert_eq!(j.checks.load(Ordering::SeqCst), 3);

    let audit = gate.audit_flushed().await;
    let blocked = audit.iter().find(|r| r["verdict"] == "reject").unwrap();
    assert_eq!(blocked["rule"], "output-fact-check-blocks");
    assert_eq!(blocked["signals"]["output.verdict"]["value"], "block");
    assert_eq!(blocked["signals"]["output.verdict"]["method"], "assisted");
    assert!(
        blocked["signals"].get("output.reasons").is_none(),
        "reasons only with include_judge_reason"
    );
    let cached = audit.iter().rfind(|r| r["tool"] == "message").unwrap();
    assert_eq!(cached["verdict"], "allow");
    assert_eq!(cached["signals"]["output.cache_hit"]["value"], true);
    let tweet = audit.last().unwrap();
    assert_eq!(
        (tweet["tool"].as_str(), tweet["rule"].as_str()),
        (Some("exec"), Some("output-fact-check-blocks"))
    );
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_fact_checker_fails_closed() {
    let (j, reply) = judge(Some(503));
    let judge_mock = start_mock(vec![reply]).await;
    let upstream = start_mock(vec![messaging_upstream()]).await;
    let gate = gate_with_judge(&judge_mock, &upstream).await;
    assert_eq!(say(&gate, "email: see you on Friday").await, 0);
    assert!(j.checks.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        say(&gate, "slack: see you on Friday").await,
        1,
        "internal messages are not checked"
    );
    let audit = gate.audit_flushed().await;
    assert_eq!(audit[0]["reason"], "sensor_failed");
    assert_eq!(audit[0]["rule"], "output-fact-check");
    assert!(audit[0]["signals"]["output.error"]["value"]
        .as_str()
        .unwrap()
        .contains("503"));
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_findings_become_facts_that_reject_a_contradicting_email() {
    let work = TempDir::new();
    let traces = work.0.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let out = work.0.join("facts/generated.json");
    let wrong = email("Our nats-events count is 300,000 now.");
    let stream = one_call_stream("email.send", &wrong);
    let mock = start_mock((0..200).map(|_| Reply::sse(stream.clone())).collect()).await;
    let facts_policy = format!("[[facts]]\nfile = \"{}\"\n", out.display());
    let extra = format!(
        "[policy]\nreload_secs = 1\n\n[facts.bridge]\ndir = \"{}\"\nout = \"{}\"\n",
        traces.display(),
        out.display()
    );
    let gate = start_gate_files(
        &mock.base_url(),
        &policies(&[("90-facts.toml", &facts_policy)]),
        &extra,
    )
    .await;
    let req = chat_request(true, &["email.send"]);
    let released = |a: &Answer| Acc::from_sse(&a.body).calls_of(0).len();
    assert_eq!(released(&post_chat(&gate, &req).await), 1, "no facts yet");
    assert!(
        out.exists(),
        "the bridge wrote an empty registry at start-up"
    );

    std::fs::write(traces.join("broken.json"), "{ nope").unwrap();
    let finding = json!({"id": "F-42", "agent": "main",
        "signal": {"signal": "SIG-HALLUCINATION", "severity": "high", "summary": "claimed 300k events"},
        "factCorrection": {"subject": "nats-events", "claimed": "300000", "actual": "255908", "predicate": "count"}});
    std::fs::write(
        traces.join("report.json"),
        json!({"findings": [finding]}).to_string(),
    )
    .unwrap();
    let mut rejected = false;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if released(&post_chat(&gate, &req).await) == 0 {
            rejected = true;
            break;
        }
    }
    assert!(rejected, "the learned fact never took effect");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        file["facts"],
        json!([{"subject": "nats-events", "predicate": "count", "value": "255908", "source": "trace:F-42"}])
    );
    let audit = gate.audit_flushed().await;
    let last = audit.last().unwrap();
    assert_eq!(last["rule"], "output-contradicts-fact");
    assert_eq!(
        last["signals"]["output.contradictions"]["value"][0]["source"],
        "trace:F-42"
    );
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_fact_file_at_run_time_keeps_the_last_good_registry() {
    let work = TempDir::new();
    let facts = work.0.join("facts.json");
    std::fs::write(&facts, json!({"id": "ops", "facts": [{"subject": "nats-events", "predicate": "count", "value": "255908", "source": "ops"}]}).to_string()).unwrap();
    let wrong = email("Our nats-events count is 300,000 now.");
    let mock = start_mock(
        (0..2)
            .map(|_| Reply::sse(one_call_stream("email.send", &wrong)))
            .collect(),
    )
    .await;
    let policy = format!("[[facts]]\nfile = \"{}\"\n", facts.display());
    let gate = start_gate_files(
        &mock.base_url(),
        &policies(&[("90-facts.toml", &policy)]),
        "[policy]\nreload_secs = 1\n",
    )
    .await;
    let req = chat_request(true, &["email.send"]);
    assert!(Acc::from_sse(&post_chat(&gate, &req).await.body)
        .calls_of(0)
        .is_empty());
    std::fs::write(&facts, "{\"facts\": [").unwrap();
    let metrics = format!("{}/metrics", gate.admin);
    let mut noticed = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if send("GET", &metrics, &[], "")
            .await
            .text()
            .contains("toolgate_policy_reload_failures_total 1")
        {
            noticed = true;
            break;
        }
    }
    assert!(noticed, "the invalid fact file was not noticed");
    assert!(
        Acc::from_sse(&post_chat(&gate, &req).await.body)
            .calls_of(0)
            .is_empty(),
        "the last good facts still apply"
    );
    gate.stop().await;
}
