//! The holes a black-box audit found, each through the real binary: denied
//! calls that reached the agent, operations that failed open, and memory
//! blow-ups. Where a client shows the harm, it is the oracle: the openai SDK,
//! and a decoder that matches keys without regard to case (as Go's
//! `encoding/json` and Newtonsoft do).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};

use crate::accumulate::Acc;
use crate::bin::Bin;
use crate::lenient;
use crate::support::*;

const DEFAULT: &str = toolgate::policy::DEFAULT_POLICY;

fn files(policy: &str) -> Vec<(&'static str, String)> {
    vec![
        ("00-default.toml", DEFAULT.to_string()),
        ("50-test.toml", policy.to_string()),
    ]
}

async fn start(mock: &Mock, policy: &str, extra: &str) -> Bin {
    let f = files(policy);
    let refs: Vec<(&str, &str)> = f.iter().map(|(n, t)| (*n, t.as_str())).collect();
    Bin::start(&mock.base_url(), &refs, extra).await
}

async fn post(bin: &Bin, path: &str, body: &Value, headers: &[(&str, &str)]) -> Answer {
    let mut h = vec![("content-type", "application/json")];
    h.extend_from_slice(headers);
    send("POST", &format!("{}{path}", bin.url), &h, body.to_string()).await
}

/// A chat request declaring `tools`, with no extra headers.
async fn ask(bin: &Bin, stream: bool, tools: &[&str]) -> Answer {
    post(
        bin,
        "/v1/chat/completions",
        &chat_request(stream, tools),
        &[],
    )
    .await
}

/// A non-streamed completion holding one call.
fn completion(name: &str, args: &str) -> String {
    json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}]}}]})
    .to_string()
}

fn labelled(content_type: &'static str, body: impl Into<Bytes>) -> Reply {
    Reply::Body {
        status: 200,
        content_type,
        body: body.into(),
        gzip: false,
        encoding: None,
    }
}

/// Every call a case-insensitive client reads from a received body (JSON or SSE).
fn calls_read_leniently(body: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(body);
    let mut docs: Vec<String> = Vec::new();
    if text.trim_start().starts_with('{') {
        docs.push(text.to_string());
    } else {
        for line in text.lines() {
            if let Some(d) = line.strip_prefix("data:") {
                docs.push(d.trim().to_string());
            } else if line.trim_start().starts_with('{') {
                docs.push(line.to_string());
            }
        }
    }
    let mut calls = Vec::new();
    for d in docs {
        let Some(v) = lenient::parse(&d) else {
            continue;
        };
        for ch in v.get("choices").map(|c| c.items()).unwrap_or_default() {
            for key in ["message", "delta"] {
                let Some(m) = ch.get(key) else { continue };
                for tc in m.get("tool_calls").map(|t| t.items()).unwrap_or_default() {
                    let f = tc.get("function");
                    let s = |k: &str| {
                        f.and_then(|f| f.get(k))
                            .and_then(|v| v.str())
                            .unwrap_or_default()
                    };
                    calls.push((s("name"), s("arguments")));
                }
            }
        }
    }
    calls
}

// 1. Content-type confusion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_answer_labelled_as_a_stream_or_the_reverse_is_refused() {
    let denied = completion("shell", r#"{"cmd":"rm -rf /"}"#);
    let mock = start_mock(vec![labelled("text/event-stream", denied.clone())]).await;
    let bin = start(&mock, &deny(&["shell"]), "").await;
    let a = ask(&bin, false, &["shell"]).await;
    assert_eq!(a.status, 502, "{}", a.text());
    assert!(!a.text().contains("rm -rf"), "{}", a.text());
    if let Some(py) = python() {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/whole_call.py");
        let base = format!("{}/v1", bin.url);
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(py)
                .arg(script)
                .arg(base)
                .arg("shell")
                .output()
        })
        .await
        .unwrap()
        .unwrap();
        let r: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(r["raised"], "InternalServerError", "the SDK saw: {r}");
    } else {
        assert!(
            std::env::var("CI").is_err(),
            "CI must provide the openai SDK"
        );
        eprintln!("SKIPPED the SDK oracle: no Python with the openai SDK");
    }
    assert!(
        bin.audit().is_empty(),
        "nothing was gated, nothing released"
    );

    // Asked for a stream, answered with JSON: refused too.
    let mock = start_mock(vec![labelled("application/json", denied.clone())]).await;
    let bin = start(&mock, &deny(&["shell"]), "").await;
    let a = ask(&bin, true, &["shell"]).await;
    assert_eq!(a.status, 502, "{}", a.text());

    // A stream whose block is a bare JSON line: no byte of it is forwarded.
    let sse_of_json = format!("{denied}\n\ndata: [DONE]\n\n");
    let mock = start_mock(vec![labelled("text/event-stream", sse_of_json)]).await;
    let bin = start(&mock, &deny(&["shell"]), "").await;
    let a = ask(&bin, true, &["shell"]).await;
    assert_eq!(a.status, 200);
    assert!(!a.text().contains("rm -rf"), "{}", a.text());
    assert!(calls_read_leniently(&a.body).is_empty());
}

// 2. Two choices with the same index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_or_out_of_range_choice_indices_fail_closed() {
    let call = |id: &str, name: &str| json!({"role": "assistant", "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}]});
    let twice = json!({"choices": [
        {"index": 0, "finish_reason": "tool_calls", "message": call("a", "get_weather")},
        {"index": 0, "finish_reason": "tool_calls", "message": call("b", "shell")}
    ]});
    let far = json!({"choices": [{"index": 7, "finish_reason": "tool_calls", "message": call("b", "shell")}]});
    let mock = start_mock(vec![
        Reply::json(200, twice.to_string()),
        Reply::json(200, far.to_string()),
    ])
    .await;
    let bin = start(&mock, &deny(&["shell"]), "").await;
    for _ in 0..2 {
        let mut req = chat_request(false, &["get_weather", "shell"]);
        req["n"] = json!(2);
        let a = post(&bin, "/v1/chat/completions", &req, &[]).await;
        assert_eq!(a.status, 502, "{}", a.text());
        assert!(calls_read_leniently(&a.body).is_empty(), "{}", a.text());
    }
}

// 3. Argument keys equal up to case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_whose_keys_collide_under_case_folding_are_rejected() {
    let policy = r#"
[[rule]]
name = "no-system-files"
tools = ["read_file"]
when = "args.path.startsWith('/etc')"
verdict = "deny"

[[rule]]
name = "small-payments"
tools = ["pay"]
when = "args.amount > 100"
verdict = "deny"
"#;
    let cases = [
        (
            "read_file",
            r#"{"path": "/tmp/notes.txt", "PATH": "/etc/shadow"}"#,
            "path",
            "/etc/shadow",
        ),
        ("pay", r#"{"amount": 5, "Amount": 5000}"#, "amount", "5000"),
    ];
    let mut replies = Vec::new();
    for (name, args, _, _) in cases {
        replies.push(Reply::json(200, completion(name, args)));
        replies.push(Reply::sse(one_call_stream(name, args)));
    }
    let mock = start_mock(replies).await;
    let bin = start(&mock, policy, "").await;
    for (name, args, key, hidden) in cases {
        // The harm: a case-insensitive decoder reads the other value.
        let read = lenient::parse(args).unwrap();
        assert_eq!(read.get(key).unwrap().to_text(), hidden);
        for stream in [false, true] {
            let a = ask(&bin, stream, &[name]).await;
            assert_eq!(a.status, 200);
            assert!(
                calls_read_leniently(&a.body).is_empty(),
                "{name}: {}",
                a.text()
            );
        }
    }
    let audit = bin.audit();
    assert_eq!(audit.len(), 4);
    assert!(
        audit.iter().all(|r| r["reason"] == "args_ambiguous_keys"),
        "{audit:?}"
    );
}

// 4. Response keys that fold to known keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_keys_that_fold_to_known_keys_fail_closed() {
    let entry = json!([{"index": 0, "id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}]);
    let mut replies = Vec::new();
    for key in ["TOOL_CALLS", "Tool_Calls", "tool_callſ"] {
        let mut delta = json!({"role": "assistant"});
        delta[key] = entry.clone();
        replies.push(Reply::sse(
            [
                chunk(0, delta.clone(), None),
                chunk(0, json!({}), Some("tool_calls")),
                "data: [DONE]\n\n".into(),
            ]
            .concat(),
        ));
        let body =
            json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": delta}]});
        replies.push(Reply::json(200, body.to_string()));
    }
    // Inside a proper entry: `Name` and `ARGUMENTS`.
    let odd = json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"Name": "shell", "ARGUMENTS": "{}"}}]});
    replies.push(Reply::sse(
        [
            chunk(0, odd.clone(), None),
            chunk(0, json!({}), Some("tool_calls")),
            "data: [DONE]\n\n".into(),
        ]
        .concat(),
    ));
    replies.push(Reply::json(
        200,
        json!({"choices": [{"index": 0, "message": odd}]}).to_string(),
    ));
    let n = replies.len();
    let mock = start_mock(replies).await;
    let bin = start(&mock, &deny(&["shell"]), "").await;
    for i in 0..n {
        let stream = i % 2 == 0;
        let a = ask(&bin, stream, &["shell"]).await;
        let seen = calls_read_leniently(&a.body);
        assert!(
            seen.is_empty(),
            "reply {i}: a lenient client reads {seen:?} in {}",
            a.text()
        );
        if stream {
            assert!(Acc::from_sse(&a.body).error, "reply {i}: {}", a.text());
        } else {
            assert_eq!(a.status, 502, "reply {i}: {}", a.text());
        }
    }
}

// 5. Path spellings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_spelling_of_a_path_reaches_the_provider_ungated() {
    let mock = start_mock(vec![Reply::json(200, completion("shell", "{}"))]).await;
    let bin = start(&mock, &deny(&["shell"]), "").await;
    for path in [
        "/v1/chat/completions;",
        "/v1/chat;x/completions",
        "/v1/chat/completions.json",
        "/v1/chat/completions:stream",
        "/v1/responses;",
        "/v1/responses.json",
        "/v1/responses/x/y",
        "/v1/something/new",
    ] {
        let a = post(&bin, path, &chat_request(false, &["shell"]), &[]).await;
        assert_eq!(a.status, 404, "{path}: {}", a.text());
        assert!(!a.text().contains("shell"), "{path}");
    }
    assert!(mock.requests().is_empty(), "nothing went upstream");
    // The allow-list still passes what it names.
    let a = send("GET", &format!("{}/v1/models", bin.url), &[], "").await;
    assert_eq!(a.status, 200);
    assert_eq!(mock.requests().len(), 1);
}

// 6. The phase gate by spelling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_phase_gate_holds_for_every_spelling_of_a_name() {
    let spellings = [
        "comm.send",
        "Comm.send",
        "comm-send",
        "COMM__send",
        "ｃｏｍｍ.send",
    ];
    let mut replies: Vec<Reply> = spellings
        .iter()
        .map(|n| Reply::json(200, completion(n, "{}")))
        .collect();
    // Declared `comm.send`, called with an invisible character: undeclared.
    replies.push(Reply::json(200, completion("comm\u{200B}.send", "{}")));
    replies.push(Reply::json(200, completion("comm-send", "{}")));
    let mock = start_mock(replies).await;
    let bin = start(&mock, ALLOW_ALL, "").await;
    let planning = [("x-toolgate-phase", "planning")];
    for name in spellings {
        let a = post(
            &bin,
            "/v1/chat/completions",
            &chat_request(false, &[name]),
            &planning,
        )
        .await;
        assert!(
            calls_read_leniently(&a.body).is_empty(),
            "{name}: {}",
            a.text()
        );
    }
    let execution = [("x-toolgate-phase", "execution")];
    let a = post(
        &bin,
        "/v1/chat/completions",
        &chat_request(false, &["comm.send"]),
        &execution,
    )
    .await;
    assert!(calls_read_leniently(&a.body).is_empty(), "{}", a.text());
    let a = post(
        &bin,
        "/v1/chat/completions",
        &chat_request(false, &["comm-send"]),
        &execution,
    )
    .await;
    assert_eq!(
        calls_read_leniently(&a.body).len(),
        1,
        "released in execution"
    );
    let audit = bin.audit();
    let rules: Vec<&str> = audit
        .iter()
        .map(|r| r["rule"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        rules,
        [
            "phase-gate-comm",
            "phase-gate-comm",
            "phase-gate-comm",
            "phase-gate-comm",
            "phase-gate-comm",
            "undeclared-tool",
            ""
        ]
    );
}

/// Posts non-streamed calls to `shell` until `stop`, counting those released.
fn shell_load(
    bin: &Bin,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
    tokio::task::JoinHandle<()>,
) {
    let released = Arc::new(AtomicUsize::new(0));
    let sent = Arc::new(AtomicUsize::new(0));
    let (r, s, url) = (
        released.clone(),
        sent.clone(),
        format!("{}/v1/chat/completions", bin.url),
    );
    let task = tokio::spawn(async move {
        while !stop.load(Ordering::SeqCst) {
            let a = send(
                "POST",
                &url,
                &[("content-type", "application/json")],
                chat_request(false, &["shell"]).to_string(),
            )
            .await;
            s.fetch_add(1, Ordering::SeqCst);
            if !calls_read_leniently(&a.body).is_empty() {
                r.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    (released, sent, task)
}

// 7. Policy reload: a truncated file under traffic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncating_a_deny_file_under_load_releases_nothing() {
    let mock = start_mock(vec![Reply::json(200, completion("shell", "{}"))]).await;
    let bin = start(&mock, &deny(&["shell"]), "policy.reload_secs = 1").await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (released, sent, task) = shell_load(&bin, stop.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let file = bin.path("policies/50-test.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    // As `>` or open('w') does: empty first, written back moments later ...
    std::fs::File::create(&file).unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    std::fs::write(&file, &text).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // ... and left empty long enough to settle.
    std::fs::File::create(&file).unwrap();
    tokio::time::sleep(Duration::from_millis(3500)).await;
    stop.store(true, Ordering::SeqCst);
    task.await.unwrap();
    assert!(sent.load(Ordering::SeqCst) > 20, "the load ran");
    assert_eq!(
        released.load(Ordering::SeqCst),
        0,
        "denied calls were released"
    );
    assert!(
        bin.metrics()
            .await
            .contains("toolgate_policy_reload_failures_total 1"),
        "the empty file was refused: {}",
        bin.stderr()
    );
    assert!(bin.stderr().contains("no rules or settings"));
}

// 7. Policy reload: a file-system event wakes the reload at once; polling
// (here once an hour) is only the fallback for filesystems without events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_edit_is_loaded_on_its_file_event_without_waiting_for_the_poll() {
    let mock = start_mock(vec![Reply::json(200, completion("shell", "{}"))]).await;
    let bin = start(
        &mock,
        &deny(&["shell"]),
        "policy.reload_secs = 3600\npolicy.settle_ms = 200",
    )
    .await;
    // An edit that keeps every deny rule (one that dropped one would be refused).
    std::fs::write(bin.path("policies/50-test.toml"), deny(&["shell", "rm"])).unwrap();
    let mut reloaded = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if bin.stderr().contains("policy reloaded") {
            reloaded = true;
            break;
        }
    }
    assert!(reloaded, "{}", bin.stderr());
}

// 7. Policy reload: dropped deny rules are told; `reload = "signal"` waits to be asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_deny_rules_is_refused_unless_asked_and_signal_mode_reloads_only_when_asked() {
    let mock = start_mock(vec![Reply::json(200, completion("shell", "{}"))]).await;
    let bin = start(
        &mock,
        &deny(&["shell"]),
        "policy.reload_secs = 1\npolicy.settle_ms = 200",
    )
    .await;
    std::fs::write(bin.path("policies/50-test.toml"), "rule = []\n").unwrap();
    let mut refused = false;
    // Waits up to 10 s: a loaded machine (a build beside the tests) has
    // taken more than 5.
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if bin.stderr().contains("policy reload refused") {
            refused = true;
            break;
        }
    }
    assert!(refused, "{}", bin.stderr());
    assert!(bin.stderr().contains("test-deny"));
    let a = ask(&bin, false, &["shell"]).await;
    assert!(
        calls_read_leniently(&a.body).is_empty(),
        "a reload dropping a deny rule is refused by default"
    );

    let mock = start_mock(vec![Reply::json(200, completion("shell", "{}"))]).await;
    let f = files(&deny(&["shell"]));
    let refs: Vec<(&str, &str)> = f.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let bin = Bin::start_env(
        &mock.base_url(),
        &refs,
        "policy.reload_secs = 1\npolicy.settle_ms = 0\npolicy.reload = \"signal\"",
        &[("TOOLGATE_ADMIN_TOKEN", "admin-token-7")],
    )
    .await;
    std::fs::write(bin.path("policies/50-test.toml"), "rule = []\n").unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let req = chat_request(false, &["shell"]);
    let a = post(&bin, "/v1/chat/completions", &req, &[]).await;
    assert!(
        calls_read_leniently(&a.body).is_empty(),
        "not reloaded by itself"
    );
    let reload = format!("{}/reload", bin.admin);
    assert_eq!(send("POST", &reload, &[], "").await.status, 401, "no token");
    let token = [("authorization", "Bearer admin-token-7")];
    let r = send("POST", &reload, &token, "").await;
    assert_eq!(r.status, 202);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let a = post(&bin, "/v1/chat/completions", &req, &[]).await;
    assert!(
        calls_read_leniently(&a.body).is_empty(),
        "a reload that drops a deny rule is refused unless asked"
    );
    // The operator means it.
    let r = send("POST", &format!("{reload}?drops=apply"), &token, "").await;
    assert_eq!(r.status, 202);
    let mut released = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let a = post(&bin, "/v1/chat/completions", &req, &[]).await;
        if !calls_read_leniently(&a.body).is_empty() {
            released = true;
            break;
        }
    }
    assert!(released, "POST /reload?drops=apply loaded the new policy");
}

// 8. Audit write failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_call_is_released_whose_audit_record_could_not_be_written() {
    let mock = start_mock(vec![
        Reply::json(200, completion("get_weather", "{}")),
        Reply::sse(one_call_stream("get_weather", "{}")),
        Reply::json(200, completion("get_weather", "{}")),
    ])
    .await;
    let bin = start(&mock, ALLOW_ALL, "audit.path = \"/dev/full\"").await;
    for stream in [false, true] {
        let a = ask(&bin, stream, &["get_weather"]).await;
        assert!(
            calls_read_leniently(&a.body).is_empty(),
            "released without a record: {}",
            a.text()
        );
    }
    let bin = start(
        &mock,
        ALLOW_ALL,
        "audit.path = \"/dev/full\"\naudit.on_error = \"continue\"",
    )
    .await;
    let a = ask(&bin, false, &["get_weather"]).await;
    assert_eq!(calls_read_leniently(&a.body).len(), 1, "continue releases");
}

// 9. Redaction of a key with no END line and of a secret in base64.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_key_without_its_end_line_and_an_encoded_secret_never_go_upstream() {
    let mock = start_mock(vec![Reply::json(200, json!({"choices": []}).to_string())]).await;
    let bin = start(&mock, ALLOW_ALL, "").await;
    let line = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj";
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{line}\n{line}\n{line}\nMIIEtail0123456789\n\nend of file"
    );
    // base64 of "api token: sk-proj-abcdefghijklmnopqrstuvwxyz012345"
    let encoded = "YXBpIHRva2VuOiBzay1wcm9qLWFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6MDEyMzQ1";
    let req = json!({"model": "m", "messages": [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": format!("{pem}\nblob: {encoded}")}
    ]});
    let a = post(&bin, "/v1/chat/completions", &req, &[]).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let up = String::from_utf8_lossy(&mock.requests()[0].body).to_string();
    assert!(!up.contains("MIIE"), "{up}");
    assert!(!up.contains(encoded), "{up}");
    assert!(
        up.contains("end of file") && up.contains("[REDACTED:base64_secret]"),
        "{up}"
    );
}

// 10. An unbounded tool-call name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_name_fragments_or_unknown_keys_is_cut_off_at_once() {
    let piece = "n".repeat(2048);
    let mut names = chunk(
        0,
        json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "x", "arguments": ""}}]}),
        None,
    );
    let mut keys = names.clone();
    for i in 0..2000 {
        names.push_str(&chunk(
            0,
            json!({"tool_calls": [{"index": 0, "function": {"name": piece}}]}),
            None,
        ));
        let mut e = json!({"index": 0, "function": {"arguments": ""}});
        e[format!("k{i}")] = json!(piece);
        keys.push_str(&chunk(0, json!({"tool_calls": [e]}), None));
    }
    for body in [&mut names, &mut keys] {
        body.push_str(&chunk(0, json!({}), Some("tool_calls")));
        body.push_str("data: [DONE]\n\n");
    }
    let mock = start_mock(vec![
        Reply::Sse {
            body: names.into(),
            chunk: 64 * 1024,
            delay: Duration::ZERO,
            reset: false,
            gzip: false,
        },
        Reply::Sse {
            body: keys.into(),
            chunk: 64 * 1024,
            delay: Duration::ZERO,
            reset: false,
            gzip: false,
        },
    ])
    .await;
    let bin = start(&mock, ALLOW_ALL, "").await;
    for _ in 0..2 {
        let a = ask(&bin, true, &["x"]).await;
        assert!(
            calls_read_leniently(&a.body).is_empty(),
            "{}",
            &a.text()[..200]
        );
    }
    // The record opening the trail, then the two calls'.
    let lines = bin.audit_lines();
    assert_eq!(lines.len(), 3);
    assert!(
        lines.iter().all(|l| l.len() < 16 * 1024),
        "audit lines are capped"
    );
    let reasons: Vec<Value> = bin.audit().iter().map(|r| r["reason"].clone()).collect();
    assert_eq!(reasons, [json!("name_too_long"), json!("args_too_large")]);
}

// 11. Amplification: a large non-streamed answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_answer_with_a_rejected_call_costs_under_three_times_its_size() {
    // 20 MB of log-probabilities (small objects, the worst case for a tree)
    // and a denied call.
    let entry = r#"{"token":"a","logprob":-0.1,"bytes":[97],"top_logprobs":[]}"#;
    let n = 20_000_000 / (entry.len() + 1);
    let mut lp = String::with_capacity(20_100_000);
    lp.push('[');
    for i in 0..n {
        if i > 0 {
            lp.push(',');
        }
        lp.push_str(entry);
    }
    lp.push(']');
    let body = format!(
        r#"{{"id":"c","choices":[{{"index":0,"finish_reason":"tool_calls","logprobs":{{"content":{lp}}},"message":{{"role":"assistant","content":null,"tool_calls":[{{"id":"c1","type":"function","function":{{"name":"shell","arguments":"{{}}"}}}}]}}}}]}}"#
    );
    drop(lp);
    let size = body.len() as u64;
    let small = completion("shell", "{}");
    let mock = start_mock(vec![Reply::json(200, small), Reply::json(200, body)]).await;
    let bin = start(&mock, &deny(&["shell"]), "").await;
    // A small answer first, so that what the first request sets up once
    // (compiled patterns, tables, connections) is not counted.
    let req = chat_request(false, &["shell"]);
    let warm = post(&bin, "/v1/chat/completions", &req, &[]).await;
    assert_eq!(warm.status, 200);
    let before = bin.memory_kib("VmHWM");
    let anon_before = bin.memory_kib("RssAnon");
    let started = Instant::now();
    let a = ask(&bin, false, &["shell"]).await;
    assert_eq!(a.status, 200);
    assert!(calls_read_leniently(&a.body).is_empty());
    assert!(
        a.body.len() as u64 > size - 1000,
        "everything else was kept"
    );
    let grown = (bin.memory_kib("VmHWM") - before) * 1024;
    eprintln!(
        "20 MB answer: peak RSS grew {} MB in {:?}",
        grown >> 20,
        started.elapsed()
    );
    assert!(
        grown < 3 * size,
        "peak memory grew {grown} bytes for a {size}-byte body"
    );
    drop(a);
    // A second burst reuses what the first left, and after it most of the
    // memory has gone back to the OS (what the allocator keeps cached is
    // returned as traffic goes on).
    let peak = bin.memory_kib("VmHWM");
    let a = ask(&bin, false, &["shell"]).await;
    assert_eq!(a.status, 200);
    drop(a);
    let peak2 = bin.memory_kib("VmHWM");
    // Anonymous memory only: the program's own code pages, read in as new
    // paths run, count in RSS too but are not the bodies'.
    // What stays is a fixed ~10 MiB of warmed-up allocator and thread state,
    // whatever the body's size (40 MB bodies leave the same); the 20 MB
    // bodies themselves must be gone.
    let kept_max = 16 * 1024;
    let mut now = bin.memory_kib("RssAnon");
    for _ in 0..30 {
        if now < anon_before + kept_max {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        now = bin.memory_kib("RssAnon");
    }
    eprintln!("RSS: {before} KiB before, {peak} KiB at peak, {peak2} KiB at the second peak; anonymous {anon_before} KiB before, {now} KiB after");
    // A burst served on another worker thread may take a fresh malloc arena
    // while the first one's cache is still held: up to half a body more is
    // that; a body kept alive would add all of it.
    assert!(
        peak2 < peak + (peak - before) / 2,
        "the second burst added {} KiB",
        peak2 - peak
    );
    assert!(
        now < anon_before + kept_max,
        "anonymous memory stayed at {now} KiB (peak {peak} KiB, {anon_before} KiB before)"
    );
}

// 11. Amplification: requests of tiny values, and the budget of bodies in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_bounded_by_their_parsed_size_and_by_the_budget_in_flight() {
    let mock = start_mock(vec![Reply::json(200, json!({"choices": []}).to_string())]).await;
    let bin = start(&mock, ALLOW_ALL, "").await;
    // A request of many tiny values is refused before it is parsed.
    let dense = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"v": vec![0; 6_000_000]}});
    let a = post(&bin, "/v1/chat/completions", &dense, &[]).await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert!(mock.requests().is_empty());

    // Bodies over the budget in flight get a 503 with Retry-After.
    let bin = start(
        &mock,
        ALLOW_ALL,
        "limits.max_body_bytes_in_flight = 4000000",
    )
    .await;
    let text = "x".repeat(3_000_000);
    let big = json!({"model": "m", "messages": [{"role": "user", "content": text}]});
    let a = post(&bin, "/v1/chat/completions", &big, &[]).await;
    assert_eq!(a.status, 503, "{}", a.text());
    assert_eq!(a.headers["retry-after"], "1");
    let small =
        json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(1_000_000)}]});
    let a = post(&bin, "/v1/chat/completions", &small, &[]).await;
    assert_eq!(a.status, 200, "the budget is given back: {}", a.text());

    // Four large requests at once, their tool results fenced (so rewritten).
    // Each request holds at most two body-sized buffers at a time: the bytes
    // and the tree, the tree and the fenced result, the tree and the body
    // written upstream. A rule that reads the texts (the default policy's
    // provenance rules) adds a third by design: the tool results' text,
    // kept for the decisions on the response. Each bound has its own
    // process, so one peak does not hide the other.
    let size = 8_000_000u64;
    let lean = Bin::start(&mock.base_url(), &[("50-test.toml", ALLOW_ALL)], "").await;
    let grown = burst(&lean, size).await;
    assert!(
        grown < 5 * 4 * size / 2,
        "no rule reads the texts: peak grew {grown} bytes for 4 x {size}"
    );
    let texts = start(&mock, ALLOW_ALL, "").await;
    let grown = burst(&texts, size).await;
    assert!(
        grown < 7 * 4 * size / 2,
        "the default policy reads the texts: peak grew {grown} bytes for 4 x {size}"
    );
}

/// Sends four requests of a `size`-byte tool result at once; how much the
/// peak memory grew. Checks that the memory goes back after.
async fn burst(bin: &Bin, size: u64) -> u64 {
    let tool_request = |n: usize| {
        json!({"model": "m", "messages": [
            {"role": "user", "content": "read"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "line of text\n".repeat(n / 13)}
        ]})
    };
    let a = post(bin, "/v1/chat/completions", &tool_request(1000), &[]).await;
    assert_eq!(a.status, 200);
    let (before, anon_before) = (bin.memory_kib("VmHWM"), bin.memory_kib("RssAnon"));
    let body = tool_request(size as usize);
    let sends = (0..4).map(|_| post(bin, "/v1/chat/completions", &body, &[]));
    for a in futures_util::future::join_all(sends).await {
        assert_eq!(a.status, 200);
    }
    let grown = (bin.memory_kib("VmHWM") - before) * 1024;
    // Given back within a few reload ticks (2 s each); a fixed ~10-15 MiB
    // of warmed-up allocator and thread state stays, the 32 MB of bodies
    // must not.
    let kept_max = 24 * 1024;
    let mut kept = u64::MAX;
    for _ in 0..100 {
        kept = bin.memory_kib("RssAnon").saturating_sub(anon_before);
        if kept < kept_max {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "4 x {} MB requests: peak grew {} MB, {kept} KiB kept after",
        size / 1_000_000,
        grown >> 20
    );
    assert!(kept < kept_max, "{kept} KiB of anonymous memory kept");
    grown
}
