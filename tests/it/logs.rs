//! The log through the real binary: `[log] format = "json"` and
//! `--log-format`, one access line per request with its verdict counts, the
//! request id in every line of a request, and never payload text.

use serde_json::{json, Value};

use crate::bin::Bin;
use crate::support::{call_delta, chat_request, chunk, send, start_mock, Reply};

const ALLOW_BOTH: &str =
    "[[rule]]\nname = \"both\"\ntools = [\"read_file\", \"shell\"]\nverdict = \"allow\"\n";

const ARGS_TEXT: &str = "args-text-that-must-not-be-logged";

fn stream_with_two_calls() -> String {
    let args = json!({ "path": ARGS_TEXT }).to_string();
    let mut body = String::new();
    body.push_str(&chunk(0, call_delta(0, "c1", "read_file", &args), None));
    body.push_str(&chunk(0, call_delta(1, "c2", "shell", &args), None));
    body.push_str(&chunk(0, json!({}), Some("tool_calls")));
    body.push_str("data: [DONE]\n\n");
    body
}

/// The access lines in a JSON log, waiting for the last one to be written.
async fn access_lines(bin: &Bin, n: usize) -> Vec<Value> {
    for _ in 0..100 {
        let lines: Vec<Value> = bin
            .stderr()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect();
        let access: Vec<Value> = lines
            .into_iter()
            .filter(|l| l["target"] == "toolgate::access")
            .collect();
        if access.len() >= n {
            return access;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("fewer than {n} access lines:\n{}", bin.stderr());
}

#[tokio::test]
async fn json_logs_write_one_access_line_per_request_with_its_verdicts() {
    let mock = start_mock(vec![Reply::Headed(
        vec![("x-request-id", "req_up_log".into())],
        Box::new(Reply::sse(stream_with_two_calls())),
    )])
    .await;
    let policy = "[[rule]]\nname = \"no-shell\"\ntools = [\"shell\"]\nverdict = \"deny\"\n\n[[rule]]\nname = \"reads\"\ntools = [\"read_file\"]\nverdict = \"allow\"\n";
    let bin = Bin::start(
        &mock.base_url(),
        &[("p.toml", policy)],
        "[log]\nformat = \"json\"\n",
    )
    .await;
    let mut req = chat_request(true, &["read_file", "shell"]);
    req["messages"][0]["content"] = json!("prompt-text-that-must-not-be-logged");
    let h = [
        ("content-type", "application/json"),
        ("x-request-id", "req-log-1"),
    ];
    let url = format!("{}/v1/chat/completions", bin.url);
    let a = send("POST", &url, &h, req.to_string()).await;
    assert_eq!(a.status, 200);
    let refused = send(
        "POST",
        &format!("{}/v1/assistants", bin.url),
        &[("x-request-id", "req-log-2")],
        "{}",
    )
    .await;
    assert_eq!(refused.status, 404);
    let bad = send("POST", &url, &[("x-request-id", "req-log-3")], "[").await;
    assert_eq!(bad.status, 400);

    let access = access_lines(&bin, 3).await;
    let by_id = |id: &str| {
        access
            .iter()
            .find(|l| l["fields"]["request_id"] == id)
            .unwrap_or_else(|| panic!("no access line for {id}: {access:?}"))["fields"]
            .clone()
    };
    let gated = by_id("req-log-1");
    assert_eq!(gated["method"], "POST");
    assert_eq!(gated["route"], "chat_completions");
    assert_eq!(gated["status"], 200);
    assert_eq!(gated["principal"], "anonymous");
    assert_eq!(
        gated["upstream_request_id"], "req_up_log",
        "the provider's id"
    );
    assert_eq!(
        (
            gated["allowed"].as_u64(),
            gated["denied"].as_u64(),
            gated["rejected"].as_u64()
        ),
        (Some(1), Some(1), Some(0))
    );
    assert!(
        gated["duration_us"].as_u64().is_some_and(|d| d > 0),
        "{gated}"
    );
    let refused = by_id("req-log-2");
    assert_eq!(
        (refused["route"].as_str(), refused["status"].as_u64()),
        (Some("refused"), Some(404))
    );
    assert_eq!(refused["upstream_request_id"], "-");
    assert_eq!(
        refused["refused"], "unknown_path",
        "the refused path's class"
    );
    assert_eq!(gated["refused"], "-");
    // The audit records of the answer's calls carry the provider's id too.
    let audit = bin.audit();
    assert_eq!(audit.len(), 2, "{audit:?}");
    for r in &audit {
        assert_eq!(r["upstream_request_id"], "req_up_log", "{r}");
        assert_eq!(r["request_id"], "req-log-1", "{r}");
    }
    let bad = by_id("req-log-3");
    assert_eq!(
        (bad["route"].as_str(), bad["status"].as_u64()),
        (Some("chat_completions"), Some(400))
    );
    assert_eq!(access.len(), 3, "one line per request: {access:?}");

    let log = bin.stderr();
    assert!(
        !log.contains(ARGS_TEXT) && !log.contains("prompt-text"),
        "{log}"
    );
    // Lines written while a request is handled carry its id in their span.
    let in_request: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["span"]["name"] == "request")
        .collect();
    assert!(
        in_request
            .iter()
            .all(|l| l["span"]["request_id"].is_string()),
        "{in_request:?}"
    );
}

#[tokio::test]
async fn the_log_format_flag_overrides_the_config() {
    let mock = start_mock(vec![Reply::sse(stream_with_two_calls())]).await;
    let bin = Bin::start_args(
        &mock.base_url(),
        &[("p.toml", ALLOW_BOTH)],
        "[log]\nformat = \"text\"\n",
        &["--log-format", "json"],
    )
    .await;
    let a = send(
        "POST",
        &format!("{}/v1/chat/completions", bin.url),
        &[("content-type", "application/json")],
        chat_request(true, &["read_file", "shell"]).to_string(),
    )
    .await;
    assert_eq!(a.status, 200);
    let access = access_lines(&bin, 1).await;
    assert_eq!(access[0]["fields"]["allowed"], 2);
    // And text is plain: no colour codes when stderr is not a terminal.
    let mock = start_mock(vec![]).await;
    let bin = Bin::start(&mock.base_url(), &[("p.toml", "rule = []\n")], "").await;
    send("GET", &format!("{}/v1/assistants", bin.url), &[], "").await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let log = bin.stderr();
    assert!(
        log.contains("access") && log.contains("route=refused refused=unknown_path status=404"),
        "{log}"
    );
    assert!(!log.contains('\u{1b}'), "{log}");
    assert!(serde_json::from_str::<Value>(log.lines().next().unwrap_or("")).is_err());
}

#[tokio::test]
async fn rust_log_sets_the_level_when_toolgate_log_is_unset() {
    let mock = start_mock(vec![]).await;
    let refused = |bin: &Bin| {
        let url = format!("{}/v1/assistants", bin.url);
        async move { send("GET", &url, &[], "").await.status }
    };
    let start = |toolgate_log: &'static str| {
        let upstream = mock.base_url();
        async move {
            let env = [("TOOLGATE_LOG", toolgate_log), ("RUST_LOG", "error")];
            Bin::start_env(&upstream, &[("p.toml", "rule = []\n")], "", &env).await
        }
    };
    // `RUST_LOG=error` quiets the access line (an info line)...
    let quiet = start("").await;
    // ...and `TOOLGATE_LOG` wins over it when both are set.
    let loud = start("info").await;
    assert_eq!(refused(&quiet).await, 404);
    assert_eq!(refused(&loud).await, 404);
    let mut waited = 0;
    while !loud.stderr().contains("route=refused") && waited < 100 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        waited += 1;
    }
    assert!(
        loud.stderr()
            .contains("route=refused refused=unknown_path status=404"),
        "{}",
        loud.stderr()
    );
    // Written by now if it were going to be: both lines come from the same
    // code when the response ends.
    assert!(!quiet.stderr().contains("access"), "{}", quiet.stderr());
}

#[tokio::test]
async fn the_documented_filter_turns_the_access_line_off_and_a_provider_error_is_one_line() {
    let too_long = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "prompt is too long: 210000 tokens > 200000 maximum"}});
    let broken = json!({"error": {"message": "upstream exploded", "type": "server_error"}});
    let mock = start_mock(vec![
        Reply::json(400, too_long.to_string()),
        Reply::json(500, broken.to_string()),
    ])
    .await;
    // The filter the operations guide documents.
    let env = [("TOOLGATE_LOG", "info,toolgate::access=off")];
    let bin = Bin::start_env(
        &mock.base_url(),
        &[("p.toml", "rule = []\n")],
        "[log]\nformat = \"json\"\n",
        &env,
    )
    .await;
    let url = format!("{}/v1/chat/completions", bin.url);
    let body = chat_request(false, &["t"]).to_string();
    let h = [("content-type", "application/json")];
    assert_eq!(send("POST", &url, &h, body.clone()).await.status, 400);
    assert_eq!(send("POST", &url, &h, body).await.status, 500);
    let lines = || -> Vec<Value> {
        bin.stderr()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let mut said = Vec::new();
    for _ in 0..100 {
        said = lines()
            .into_iter()
            .filter(|l| l["fields"]["message"] == "the provider answered with an error")
            .collect();
        if said.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // One line per provider error: `info` for the 4xx a client recovers
    // from by design, `warn` for a failure; no second "request failed".
    let levels: Vec<(&Value, &Value)> = said
        .iter()
        .map(|l| (&l["level"], &l["fields"]["status"]))
        .collect();
    assert_eq!(
        levels,
        [(&json!("INFO"), &json!(400)), (&json!("WARN"), &json!(500))],
        "{said:?}"
    );
    let all = lines();
    assert!(
        !all.iter()
            .any(|l| l["fields"]["message"] == "request failed"),
        "{all:?}"
    );
    assert!(
        !all.iter().any(|l| l["target"] == "toolgate::access"),
        "the documented filter turns the access line off: {all:?}"
    );
    assert!(all.iter().any(|l| l["target"] != "toolgate::access"));
}

/// Claude Code's reachability probes (`HEAD /`, `/api/hello`) are
/// answered as a provider answers them, before authentication, with
/// nothing forwarded; their access line says `route=probe`, while a
/// refused path still names its class.
#[tokio::test]
async fn a_reachability_probe_is_answered_and_logged_as_one_a_refused_path_is_not() {
    let mock = start_mock(vec![]).await;
    let bin = Bin::start(
        &mock.base_url(),
        &[("p.toml", "rule = []\n")],
        "[[client]]\nname = \"cc\"\ntoken_env = \"PATH\"\n",
    )
    .await;
    for (method, path) in [("HEAD", "/"), ("HEAD", "/api/hello"), ("GET", "/api/hello")] {
        let r = send(method, &format!("{}{path}", bin.url), &[], "").await;
        assert_eq!(r.status, 200, "{method} {path}");
        assert!(r.body.is_empty(), "{method} {path}");
    }
    let r = send("HEAD", &format!("{}/v1/messages/batches", bin.url), &[], "").await;
    assert_eq!(
        r.status, 401,
        "anything else still needs the client's token"
    );
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let log = bin.stderr();
    assert_eq!(
        log.matches("route=probe refused=- status=200").count(),
        3,
        "{log}"
    );
    assert!(
        log.contains("route=refused refused=unauthenticated"),
        "{log}"
    );
    assert_eq!(mock.requests().len(), 0, "a probe is not forwarded");
}
