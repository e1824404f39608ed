//! Anthropic message threads (`tool_runner`'s default): the anthropic SDK
//! over several turns with the shipped default policy, against a scripted
//! provider that enforces the thread contract: a continue sends neither
//! `system` nor `tools`, answers every `tool_use` of the reply it continues
//! (withheld ones included: the provider holds them), and the provider
//! loses the thread once, which the SDK recovers from by replaying.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use toolgate::mock::{render, Asked, Turn, Use, Wire};

use crate::support::*;

#[derive(Default)]
struct Provider {
    /// The whole conversation held under each answer's id.
    threads: HashMap<String, Vec<Value>>,
    answers: usize,
    /// Lose the thread when continued from this answer.
    lose: Option<String>,
    /// What each request was: ("create" | "continue" | "none", declared tools).
    log: Vec<(String, Vec<String>)>,
}

fn error(status: u16, kind: &str, message: &str, code: Option<&str>) -> Reply {
    let mut e = json!({"type": "error", "error": {"type": kind, "message": message}});
    if let Some(c) = code {
        e["error"]["details"] = json!({"error_code": c});
    }
    Reply::json(status, e.to_string())
}

/// The `tool_use` ids of `message` (an assistant turn).
fn uses(message: &Value) -> Vec<String> {
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_use")
        .filter_map(|b| b["id"].as_str().map(str::to_string))
        .collect()
}

fn answered(message: &Value) -> Vec<String> {
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .filter_map(|b| b["tool_use_id"].as_str().map(str::to_string))
        .collect()
}

impl Provider {
    fn answer(&mut self, req: &Value) -> Reply {
        let thread = req["thread"]["type"].as_str().unwrap_or("none").to_string();
        let declared: Vec<String> = req["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect();
        self.log.push((thread.clone(), declared.clone()));
        let new = req["messages"].as_array().cloned().unwrap_or_default();
        let mut history = match thread.as_str() {
            "continue" => {
                if req.get("system").is_some() || req.get("tools").is_some() {
                    return error(
                        400,
                        "invalid_request_error",
                        "system and tools cannot be sent when continuing a thread",
                        None,
                    );
                }
                let prev = req["thread"]["previous_message_id"].as_str().unwrap_or("");
                if self.lose.as_deref() == Some(prev) {
                    self.lose = None;
                    self.threads.remove(prev);
                }
                let Some(h) = self.threads.get(prev) else {
                    return error(
                        404,
                        "not_found_error",
                        "thread not found",
                        Some("thread_not_found"),
                    );
                };
                h.clone()
            }
            _ => Vec::new(),
        };
        // Every tool_use of the last reply is answered first.
        if let (Some(last), Some(first)) = (history.last(), new.first()) {
            let (mut want, mut got) = (uses(last), answered(first));
            want.sort();
            got.sort();
            if want != got {
                return error(
                    400,
                    "invalid_request_error",
                    &format!(
                        "tool_use ids were found without tool_result blocks: {want:?} vs {got:?}"
                    ),
                    None,
                );
            }
        }
        history.extend(new);
        let turns = history.iter().filter(|m| m["role"] == "assistant").count();
        let turn = match turns {
            0 => Turn {
                text: "Checking.".into(),
                calls: vec![Use {
                    name: "get_weather".into(),
                    arguments: json!({"city": "Paris"}),
                }],
            },
            1 => Turn {
                text: "Emailing.".into(),
                calls: vec![
                    Use {
                        name: "comm__email".into(),
                        arguments: json!({"to": "bob@example.com", "body": "Sunny."}),
                    },
                    Use {
                        name: "get_weather".into(),
                        arguments: json!({"city": "Lyon"}),
                    },
                ],
            },
            _ => Turn {
                text: "Done.".into(),
                calls: vec![],
            },
        };
        self.answers += 1;
        let id = format!("msg_{:02}", self.answers);
        let asked = Asked {
            wire: Wire::Messages,
            stream: req["stream"] == true,
            include_usage: false,
            model: "claude-test".into(),
            last_user_text: String::new(),
            declared,
            namespaces: vec![],
            tool_results: vec![],
        };
        let cut = toolgate::mock::Cut {
            fragments: 3,
            usage: false,
        };
        let (_, body) = render(&turn, &asked, cut);
        let text = String::from_utf8_lossy(&body)
            .replace("toolu_mock", &format!("toolu_{id}_"))
            .replace("msg_mock", &id);
        // The reply as stored: the whole message, withheld calls included.
        let message = json!({"role": "assistant", "content": turn.calls.iter().enumerate()
            .map(|(i, u)| json!({"type": "tool_use", "id": format!("toolu_{id}_{i}"), "name": u.name, "input": u.arguments}))
            .collect::<Vec<_>>()});
        history.push(message);
        if thread != "none" {
            self.threads.insert(id, history);
        }
        match asked.stream {
            true => Reply::sse(text),
            false => Reply::json(200, text),
        }
    }
}

async fn run(mode: &str) {
    let provider = Arc::new(Mutex::new(Provider {
        lose: Some("msg_01".into()),
        ..Provider::default()
    }));
    let p = provider.clone();
    let mock = start_mock(vec![Reply::computed(move |seen| {
        let req: Value = serde_json::from_slice(&seen.body).unwrap_or(Value::Null);
        p.lock().unwrap().answer(&req)
    })])
    .await;
    let upstream = mock.base_url();
    let gate = start_gate_files(
        &upstream,
        &shipped(&["default.toml"]),
        &messages_upstream(&upstream),
    )
    .await;
    let Some(out) = run_sdk("thread_runner.py", vec![gate.url.clone(), mode.into()]).await else {
        return;
    };
    assert!(out.get("raised").is_none(), "{mode}: {out}");
    // Turn 1 get_weather ran; turn 2's comm__email was denied (the phase
    // gate) and its get_weather ran; turn 3 answered.
    assert_eq!(
        out["ran"],
        json!([["get_weather", {"city": "Paris"}], ["get_weather", {"city": "Lyon"}]]),
        "{mode}: {out}"
    );
    assert_eq!(out["text"], "Done.", "{mode}: {out}");
    let log = provider.lock().unwrap().log.clone();
    let kinds: Vec<&str> = log.iter().map(|(k, _)| k.as_str()).collect();
    // create, continue (lost: 404), the replay under a new thread, and a
    // continue that must answer the withheld comm__email call.
    assert_eq!(
        kinds,
        ["create", "continue", "create", "continue"],
        "{mode}: {log:?}"
    );
    // The phase gate denies comm__email whatever its arguments: the
    // default policy hides it from the thread's tools.
    assert_eq!(log[0].1, ["get_weather"], "the create declares the tools");
    assert!(
        log[1].1.is_empty() && log[3].1.is_empty(),
        "a continue declares none: {log:?}"
    );
    let audit = gate.audit_flushed().await;
    let verdict = |tool: &str| -> Vec<String> {
        audit
            .iter()
            .filter(|r| r["tool"] == tool)
            .map(|r| r["verdict"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        verdict("get_weather"),
        ["allow", "allow"],
        "{mode}: {audit:?}"
    );
    assert_eq!(verdict("comm__email"), ["deny"], "{mode}: {audit:?}");
    assert!(audit
        .iter()
        .filter(|r| r["tool"].is_string())
        .all(|r| r["rule"] != "undeclared-tool"));
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_runner_threads_are_gated_with_the_default_policy() {
    run("plain").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_runner_threads_are_gated_streaming() {
    run("stream").await;
}

#[tokio::test]
async fn a_continue_from_an_unknown_answer_is_a_lost_thread_and_never_sent() {
    let mock = start_mock(vec![Reply::json(500, "{}")]).await;
    let gate = start_gate(
        &mock.base_url(),
        ALLOW_ALL,
        &messages_upstream(&mock.base_url()),
    )
    .await;
    let body = json!({"model": "m", "max_tokens": 10,
        "thread": {"type": "continue", "previous_message_id": "msg_never_seen"},
        "messages": [{"role": "user", "content": "go on"}]});
    let url = format!("{}/v1/messages", gate.url);
    let a = send(
        "POST",
        &url,
        &[("anthropic-version", "2023-06-01")],
        body.to_string(),
    )
    .await;
    assert_eq!(a.status, 404, "{}", a.text());
    let v = a.json();
    assert_eq!(v["error"]["type"], "not_found_error");
    assert_eq!(v["error"]["details"]["error_code"], "thread_not_found");
    assert!(mock.requests().is_empty());
    // A malformed thread is the agent's error.
    let bad =
        json!({"model": "m", "max_tokens": 10, "thread": {"type": "continue"}, "messages": []});
    let a = send("POST", &url, &[], bad.to_string()).await;
    assert_eq!(a.status, 400);
    gate.stop().await;
}
