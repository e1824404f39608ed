//! toolgate's own quirk fixtures (`tests/fixtures/`), each with what the agent
//! must receive, over HTTP with the mock sending 5-byte pieces.

use serde_json::json;

use crate::accumulate::Acc;
use crate::support::*;

struct Case {
    file: &'static str,
    /// Tool names the request declares.
    declared: &'static [&'static str],
    /// Tool names the policy denies.
    denied: &'static [&'static str],
    /// (call id, name) the agent must receive, in order.
    calls: &'static [(&'static str, &'static str)],
    error: bool,
    finish: Option<&'static str>,
}

impl Case {
    /// A choice whose calls were all gated away ends with the neutral message.
    fn neutral(&self) -> bool {
        self.calls.is_empty() && !self.error && self.file != "late-call-after-finish.sse"
    }
}

const CASES: &[Case] = &[
    Case {
        file: "escaped-key.sse",
        declared: &["danger"],
        denied: &["danger"],
        calls: &[],
        error: false,
        finish: Some("stop"),
    },
    Case {
        file: "escaped-key.sse",
        declared: &["danger"],
        denied: &[],
        calls: &[("call_x", "danger")],
        error: false,
        finish: Some("tool_calls"),
    },
    Case {
        file: "late-call-after-finish.sse",
        declared: &["danger"],
        denied: &[],
        calls: &[],
        error: false,
        finish: Some("stop"),
    },
    Case {
        file: "duplicate-finish.sse",
        declared: &["danger"],
        denied: &["danger"],
        calls: &[],
        error: false,
        finish: Some("stop"),
    },
    Case {
        file: "duplicate-finish.sse",
        declared: &["danger"],
        denied: &[],
        calls: &[("call_a", "danger")],
        error: false,
        finish: Some("tool_calls"),
    },
    Case {
        file: "bom-crlf-multiline-data.sse",
        declared: &["safe"],
        denied: &[],
        calls: &[("call_m", "safe")],
        error: false,
        finish: Some("tool_calls"),
    },
    Case {
        file: "missing-index-parallel.sse",
        declared: &["safe", "danger"],
        denied: &["danger"],
        calls: &[("call_1", "safe")],
        error: false,
        finish: Some("tool_calls"),
    },
    Case {
        file: "missing-index-parallel.sse",
        declared: &["safe", "danger"],
        denied: &[],
        calls: &[("call_1", "safe"), ("call_2", "danger")],
        error: false,
        finish: Some("tool_calls"),
    },
    Case {
        file: "error-after-tool-fragments.sse",
        declared: &["safe"],
        denied: &[],
        calls: &[],
        error: true,
        finish: None,
    },
    Case {
        file: "index-gaps.sse",
        declared: &["safe"],
        denied: &[],
        calls: &[("call_g1", "safe"), ("call_g3", "safe")],
        error: false,
        finish: Some("tool_calls"),
    },
    Case {
        file: "message-in-stream-chunk.sse",
        declared: &["danger"],
        denied: &["danger"],
        calls: &[],
        error: false,
        finish: Some("stop"),
    },
    Case {
        file: "custom-tool-type.sse",
        declared: &["safe"],
        denied: &[],
        calls: &[],
        error: false,
        finish: Some("stop"),
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_quirk_fixture_gives_its_expected_answer() {
    for case in CASES {
        let body = own_fixture(case.file);
        let mock = start_mock(vec![Reply::Sse {
            body: body.clone(),
            chunk: 5,
            delay: std::time::Duration::ZERO,
            reset: false,
            gzip: false,
        }])
        .await;
        let gate = start_gate(&mock.base_url(), &deny(case.denied), "").await;
        let a = post_chat(&gate, &chat_request(true, case.declared)).await;
        let acc = Acc::from_sse(&a.body);
        let ctx = format!("{} denied={:?}: {}", case.file, case.denied, a.text());
        let got: Vec<(String, String)> = acc
            .all_calls()
            .into_iter()
            .map(|c| (c.id, c.name))
            .collect();
        let want: Vec<(String, String)> = case
            .calls
            .iter()
            .map(|(i, n)| (i.to_string(), n.to_string()))
            .collect();
        assert_eq!(got, want, "{ctx}");
        assert_eq!(acc.error, case.error, "{ctx}");
        if let Some(f) = case.finish {
            assert_eq!(acc.finish.get(&0).map(String::as_str), Some(f), "{ctx}");
            // Every finish the agent sees agrees (duplicates included).
            let finishes: Vec<String> = Acc::sse_events(&a.body)
                .iter()
                .filter_map(|(_, d)| serde_json::from_str::<serde_json::Value>(d).ok())
                .filter_map(|v| v["choices"][0]["finish_reason"].as_str().map(String::from))
                .collect();
            assert!(finishes.iter().all(|x| x == f), "{finishes:?} in {ctx}");
        }
        if case.neutral() {
            assert!(
                acc.content
                    .get(&0)
                    .is_some_and(|t| t.ends_with("I wasn't able to complete that action.")),
                "{ctx}"
            );
        }
        let sent: serde_json::Value = serde_json::from_slice(&mock.requests()[0].body).unwrap();
        let sent_tools: Vec<&str> = sent["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["function"]["name"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        let visible: Vec<&str> = case
            .declared
            .iter()
            .copied()
            .filter(|t| !case.denied.contains(t))
            .collect();
        assert_eq!(
            sent_tools, visible,
            "always-denied tools are hidden from the upstream"
        );
        gate.stop().await;
    }
}

#[tokio::test]
async fn the_native_finish_reason_does_not_betray_a_removed_call() {
    let mock = start_mock(vec![Reply::sse(own_fixture("duplicate-finish.sse"))]).await;
    let gate = start_gate(&mock.base_url(), &deny(&["danger"]), "").await;
    let a = post_chat(&gate, &chat_request(true, &["danger"])).await;
    assert!(
        !a.text().contains("\"native_finish_reason\":\"tool_calls\""),
        "{}",
        a.text()
    );
    assert!(!a.text().contains("call_a"));
    let _ = json!({});
    gate.stop().await;
}

#[tokio::test]
async fn reasoning_that_names_a_withheld_call_is_dropped_and_the_rest_released() {
    let mock = start_mock(vec![
        Reply::sse(own_fixture("reasoning-names-call.sse")),
        Reply::sse(own_fixture("reasoning-names-call.sse")),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), &deny(&["danger"]), "").await;
    let a = post_chat(&gate, &chat_request(true, &["danger", "safe"])).await;
    let text = a.text();
    assert!(
        !text.contains("tool_danger_Q1w2e3") && !text.contains("c2lnLWRhbmdlcg"),
        "{text}"
    );
    let calls: Vec<(String, String)> = Acc::from_sse(&a.body)
        .all_calls()
        .into_iter()
        .map(|c| (c.id, c.name))
        .collect();
    assert_eq!(
        calls,
        [("tool_safe_R4t5y6".to_string(), "safe".to_string())]
    );
    // The allowed call's signature goes out, before its call; the plain
    // reasoning text was never held.
    let sig = text.find("c2lnLXNhZmU=").expect("the kept signature");
    assert!(sig < text.find("\"name\":\"safe\"").unwrap(), "{text}");
    assert!(text.contains("Thinking."));
    gate.stop().await;
    // With every call allowed, both signatures go out.
    let gate = start_gate(&mock.base_url(), &deny(&[]), "").await;
    let a = post_chat(&gate, &chat_request(true, &["danger", "safe"])).await;
    assert!(
        a.text().contains("c2lnLWRhbmdlcg==") && a.text().contains("c2lnLXNhZmU="),
        "{}",
        a.text()
    );
    gate.stop().await;
}

#[tokio::test]
async fn a_whole_answer_drops_reasoning_that_names_a_withheld_call() {
    let body = json!({"id": "gen-1", "object": "chat.completion", "created": 1, "model": "g",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "reasoning_details": [
                {"type": "reasoning.encrypted", "data": "c2lnLWRhbmdlcg==", "id": "tool_danger_Q1w2e3", "index": 0},
                {"type": "reasoning.encrypted", "data": "c2lnLXNhZmU=", "id": "tool_safe_R4t5y6", "index": 1}],
            "tool_calls": [
                {"id": "tool_danger_Q1w2e3", "type": "function", "function": {"name": "danger", "arguments": "{}"}},
                {"id": "tool_safe_R4t5y6", "type": "function", "function": {"name": "safe", "arguments": "{}"}}]}}]});
    let mock = start_mock(vec![Reply::json(200, body.to_string())]).await;
    let gate = start_gate(&mock.base_url(), &deny(&["danger"]), "").await;
    let a = post_chat(&gate, &chat_request(false, &["danger", "safe"])).await;
    let v: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
    let msg = &v["choices"][0]["message"];
    assert_eq!(msg["tool_calls"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(
        msg["reasoning_details"],
        json!([{"type": "reasoning.encrypted", "data": "c2lnLXNhZmU=", "id": "tool_safe_R4t5y6", "index": 1}])
    );
    assert!(!a.text().contains("tool_danger"), "{}", a.text());
    gate.stop().await;
}
