//! `ask` on the other wire formats: the anthropic SDK on the Messages API
//! and the openai SDK on the Responses API wait through keep-alives, and get
//! an approved call, or the neutral turn for a denied one.

use std::time::Duration;

use serde_json::{json, Value};

use crate::approval::{approval_config, decide, list, pending};
use crate::support::*;

const ASK_SHELL: &str = "[[rule]]\nname = \"ask-shell\"\ntools = [\"shell\"]\nverdict = \"ask\"\n";

/// Answers the script's three requests in turn as `plan` says, each after
/// a few keep-alives, and returns what the script printed.
async fn answer_in_turn(
    gate: &Gate,
    script: tokio::task::JoinHandle<Option<Value>>,
    plan: [&str; 3],
) -> Option<Value> {
    for decision in plan {
        let q = pending(gate, 1).await;
        assert_eq!(q[0]["tool"], "shell");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let a = decide(
            gate,
            q[0]["id"].as_str().unwrap(),
            json!({"decision": decision, "by": "ana"}),
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.text());
        for _ in 0..200 {
            if list(gate).await.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    script.await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_sdk_waits_for_approval_on_messages() {
    let s = crate::messages::scripted_stream();
    let whole = crate::messages_reader::Reader::read(s.as_bytes())
        .unwrap()
        .message()
        .to_string();
    let mock = start_mock(vec![
        Reply::sse(s.clone()),
        Reply::sse(s),
        Reply::json(200, whole),
    ])
    .await;
    let extra = format!(
        "{}{}",
        messages_upstream(&mock.base_url()),
        approval_config(30.0)
    );
    let gate = start_gate("http://127.0.0.1:9/v1", ASK_SHELL, &extra).await;
    let base = gate.url.clone();
    let script = tokio::task::spawn_blocking(move || {
        run_python("messages_check.py", vec![base, "sdk".into()])
    });
    let Some(r) = answer_in_turn(&gate, script, ["approve", "deny", "approve"]).await else {
        return;
    };
    assert!(r.get("raised").is_none(), "{r:#}");
    let both = json!([["toolu_W", "get_weather", {"city": "Paris"}], ["toolu_S", "shell", {"cmd": "rm -rf /srv/data"}]]);
    assert_eq!(r["stream"]["calls"], both, "{r:#}");
    assert_eq!(r["stream"]["stop_reason"], "tool_use");
    assert_eq!(
        r["create_stream"]["calls"],
        json!([["toolu_W", "get_weather", {"city": "Paris"}]]),
        "{r:#}"
    );
    assert!(r["create_stream"]["text"]
        .as_str()
        .unwrap()
        .starts_with("Let me check."));
    assert_eq!(r["create"]["calls"], both, "{r:#}");
    let rec: Vec<Value> = gate
        .audit_flushed()
        .await
        .into_iter()
        .filter(|r| r["gate"] == "approval")
        .collect();
    assert_eq!(
        rec.iter()
            .map(|r| r["approval"]["decision"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["approve", "deny", "approve"]
    );
    assert!(rec.iter().all(|r| r["protocol"] == "messages"), "{rec:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_waits_for_approval_on_responses() {
    let (sse, fin) = crate::responses::scripted_stream();
    let mock = start_mock(vec![
        Reply::sse(sse.clone()),
        Reply::sse(sse),
        Reply::json(200, fin.to_string()),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), ASK_SHELL, &approval_config(30.0)).await;
    let base = format!("{}/v1", gate.url);
    let script = tokio::task::spawn_blocking(move || {
        run_python("responses_check.py", vec![base, "sdk".into()])
    });
    let Some(r) = answer_in_turn(&gate, script, ["deny", "approve", "approve"]).await else {
        return;
    };
    assert!(r.get("raised").is_none(), "{r:#}");
    let weather = json!(["call_W", "get_weather", "{\"city\":\"Paris\"}"]);
    let shell = json!(["call_S", "shell", "{\"cmd\":\"rm -rf /srv/data\"}"]);
    assert_eq!(r["create_stream"]["calls"], json!([weather]), "{r:#}");
    assert!(r["create_stream"]["text"]
        .as_str()
        .unwrap()
        .contains(NEUTRAL));
    for mode in ["stream", "create"] {
        assert_eq!(r[mode]["calls"], json!([weather, shell]), "{mode}: {r:#}");
        assert!(
            !r[mode]["text"].as_str().unwrap().contains(NEUTRAL),
            "{mode}: {r:#}"
        );
    }
}
