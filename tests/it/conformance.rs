//! Every chat-completions fixture in `../shared/fixtures/sse` through a real
//! toolgate, twice: allowing every tool, and denying the first tool called.
//! Text must be identical, allowed calls complete and identical, denied calls
//! absent, and the neutral message present when no call is left.

use std::path::Path;

use serde_json::{json, Value};

use crate::accumulate::{Acc, Call};
use crate::support::*;

/// What the fixture itself says (the reference reading).
fn expected(path: &Path, stream: bool) -> Acc {
    let bytes = std::fs::read(path).unwrap();
    if path.extension().unwrap() == "json" {
        return Acc::from_json(&bytes);
    }
    let acc = Acc::from_sse(&bytes);
    if stream {
        acc
    } else {
        Acc::from_json(acc.to_completion().to_string().as_bytes())
    }
}

/// The fixture's recorded request, or one declaring the tools it calls.
fn request_for(path: &Path, name: &str, stream: bool, calls: &[Call]) -> Value {
    let req_path =
        path.with_file_name(format!("{}.request.json", name.rsplit_once('.').unwrap().0));
    let mut req: Value = match std::fs::read(&req_path) {
        Ok(b) => serde_json::from_slice(&b).unwrap(),
        Err(_) => {
            let names: Vec<&str> = calls
                .iter()
                .filter(|c| !c.legacy)
                .map(|c| c.name.as_str())
                .collect();
            let mut r = chat_request(stream, &names);
            let legacy: Vec<Value> = calls
                .iter()
                .filter(|c| c.legacy)
                .map(|c| json!({"name": c.name, "parameters": {"type": "object"}}))
                .collect();
            if !legacy.is_empty() {
                r["functions"] = Value::Array(legacy);
            }
            r
        }
    };
    req["stream"] = json!(stream);
    req["messages"] = json!([{"role": "user", "content": format!("fixture:{name}")}]);
    req
}

async fn check(path: &Path, deny_first: bool, stream: bool) -> Result<(), String> {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let is_json = name.ends_with(".json");
    let want = expected(path, stream || is_json);
    let first = want.all_calls().first().map(|c| c.name.clone());
    let denied: Vec<String> = if deny_first {
        first.clone().into_iter().collect()
    } else {
        Vec::new()
    };
    let policy = if denied.is_empty() {
        ALLOW_ALL.to_string()
    } else {
        deny(&[denied[0].as_str()])
    };
    let mock = start_mock(vec![fixture(37)]).await;
    let gate = start_gate(&mock.base_url(), &policy, "").await;
    let req = request_for(path, &name, stream && !is_json, &want.all_calls());
    let ans = post_chat(&gate, &req).await;
    let got = if ans
        .headers
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"))
    {
        Acc::from_sse(&ans.body)
    } else {
        Acc::from_json(&ans.body)
    };
    let ctx = format!(
        "{name} (stream={stream}, denied={denied:?}): {}",
        ans.text()
    );
    if want.error != got.error {
        return Err(format!(
            "error mismatch: want {} got {} in {ctx}",
            want.error, got.error
        ));
    }
    for choice in want.choices() {
        let want_calls = want.calls_of(choice);
        let allowed: Vec<Call> = want_calls
            .iter()
            .filter(|c| !denied.contains(&c.name))
            .cloned()
            .collect();
        let got_calls = got.calls_of(choice);
        if got_calls != allowed {
            return Err(format!(
                "calls differ: want {allowed:?} got {got_calls:?} in {ctx}"
            ));
        }
        let text = want.content.get(&choice).cloned().unwrap_or_default();
        let got_text = got.content.get(&choice).cloned().unwrap_or_default();
        let want_text = if !want_calls.is_empty() && allowed.is_empty() {
            if text.is_empty() {
                NEUTRAL.to_string()
            } else {
                format!("{text}\n\n{NEUTRAL}")
            }
        } else {
            text
        };
        if got_text != want_text {
            return Err(format!(
                "text differs: want {want_text:?} got {got_text:?} in {ctx}"
            ));
        }
        if !want_calls.is_empty()
            && allowed.is_empty()
            && got.finish.get(&choice).map(String::as_str) != Some("stop")
        {
            return Err(format!("finish should be stop: {:?} in {ctx}", got.finish));
        }
    }
    // Denied calls are absent: the exact call lists above prove it. (The model's
    // own text and reasoning may still mention a tool or, on OpenRouter, carry
    // the call id in `reasoning_details`; that is upstream text, not the gate.)
    let audit = gate.audit_flushed().await;
    if audit.len() != want.all_calls().len() {
        return Err(format!(
            "{} audit records for {} calls in {ctx}",
            audit.len(),
            want.all_calls().len()
        ));
    }
    gate.stop().await;
    Ok(())
}

async fn run_all(deny_first: bool, stream: bool) {
    let mut failures = Vec::new();
    let fixtures = chat_fixtures();
    assert!(
        fixtures.len() >= 25,
        "expected the shared chat fixtures, found {}",
        fixtures.len()
    );
    for f in &fixtures {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let error_fixture = Acc::from_sse(&std::fs::read(f).unwrap()).error;
        if !stream && error_fixture {
            continue; // a mid-stream error has no non-streaming equivalent
        }
        if let Err(e) = check(f, deny_first, stream).await {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        fixtures.len(),
        failures.join("\n\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_streams_identically_when_all_tools_are_allowed() {
    crate::need_fixtures!();
    run_all(false, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_loses_exactly_its_denied_calls_when_streamed() {
    crate::need_fixtures!();
    run_all(true, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_as_a_non_streaming_response_is_gated_the_same_way() {
    crate::need_fixtures!();
    run_all(false, false).await;
    run_all(true, false).await;
}
