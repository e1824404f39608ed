//! The same verdict whole or by reference: a conversation an agent drives
//! turn by turn with `previous_response_id` (each request carries only the
//! new tool result) is read as though it had come whole, through a real
//! toolgate with the recommended policy; one continued from a response
//! toolgate does not remember is held (`context.history_complete`).

use serde_json::{json, Value};

use crate::support::*;

/// A conversation of the shop domain (`tests/data/injection/domains/`).
fn item(id: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/injection/domains/shop.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["id"] == id)
        .unwrap()
}

fn tools(item: &Value) -> Value {
    let mut names: Vec<&str> = item["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["call"]["name"].as_str().unwrap())
        .collect();
    names.push(item["call"]["name"].as_str().unwrap());
    names.dedup();
    Value::Array(
        names
            .into_iter()
            .map(|n| json!({"type": "function", "name": n, "parameters": {"type": "object"}}))
            .collect(),
    )
}

/// The provider's answer `id` calling `call` as `call_id`.
fn calling(id: &str, call_id: &str, call: &Value) -> Reply {
    Reply::json(
        200,
        json!({"id": id, "object": "response", "status": "completed", "output": [
            {"id": format!("fc_{call_id}"), "type": "function_call", "status": "completed",
             "call_id": call_id, "name": call["name"], "arguments": call["arguments"].to_string()}]})
        .to_string(),
    )
}

fn call_item(i: usize, call: &Value) -> Value {
    json!({"type": "function_call", "id": format!("fc_call_{i}"), "call_id": format!("call_{i}"),
        "name": call["name"], "arguments": call["arguments"].to_string()})
}

fn output_item(i: usize, result: &Value) -> Value {
    json!({"type": "function_call_output", "call_id": format!("call_{i}"), "output": result})
}

/// The recommended policy with the domains' catalog, approvals that
/// nobody answers (an `ask` fails closed within a second), and `extra`.
async fn gate(mock: &Mock, extra: &str) -> Gate {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = shipped(&["default.toml", "examples/taint.toml"]);
    files.push((
        "catalog.toml".into(),
        std::fs::read_to_string(root.join("tests/data/injection/domains/catalog.toml")).unwrap(),
    ));
    let config = format!("[approval]\ntimeout_secs = 1\n\n{extra}");
    start_gate_files(&mock.base_url(), &files, &config).await
}

/// A provider answering `item`'s conversation turn by turn, then the
/// final call once more for the conversation sent whole.
async fn provider(item: &Value) -> Mock {
    let steps = item["steps"].as_array().unwrap();
    let n = steps.len();
    let mut replies: Vec<Reply> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| calling(&format!("resp_{i}"), &format!("call_{i}"), &s["call"]))
        .collect();
    replies.push(calling(
        &format!("resp_{n}"),
        &format!("call_{n}"),
        &item["call"],
    ));
    replies.push(calling("resp_whole", &format!("call_{n}"), &item["call"]));
    start_mock(replies).await
}

/// Whether the final call of `item` reached the agent: driven by
/// reference, one tool result a request (the turns through `early`, the
/// last request through `late`), and sent whole (through `late`).
async fn drive(item: &Value, early: &Gate, late: &Gate) -> (bool, bool) {
    let steps = item["steps"].as_array().unwrap();
    let n = steps.len();
    let tools = tools(item);
    let user = json!({"role": "user", "content": item["user"]});
    let first = json!({"model": "m", "input": [user], "tools": tools});
    let mut a = post_chat_at(early, "/v1/responses", &first, &[]).await;
    for (i, s) in steps.iter().enumerate() {
        assert!(
            a.text().contains(&format!("call_{i}")),
            "step {i}: {}",
            a.text()
        );
        let next = json!({"model": "m", "previous_response_id": format!("resp_{i}"),
            "input": [output_item(i, &s["result"])], "tools": tools});
        let gate = if i + 1 == n { late } else { early };
        if !std::ptr::eq(gate, early) {
            // Another replica: the records are written behind the answer,
            // as an agent's tool takes a moment to run.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
        a = post_chat_at(gate, "/v1/responses", &next, &[]).await;
    }
    let by_reference = a.text().contains(&format!("call_{n}"));
    let mut input = vec![user];
    for (i, s) in steps.iter().enumerate() {
        input.push(call_item(i, &s["call"]));
        input.push(output_item(i, &s["result"]));
    }
    let whole = json!({"model": "m", "input": input, "tools": tools});
    let w = post_chat_at(late, "/v1/responses", &whole, &[]).await;
    (by_reference, w.text().contains(&format!("call_{n}")))
}

async fn by_reference_and_whole(item: &Value) -> (bool, bool) {
    let mock = provider(item).await;
    let gate = gate(&mock, "").await;
    let seen = drive(item, &gate, &gate).await;
    gate.stop().await;
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_call_is_held_by_reference_as_it_is_whole() {
    // Planted in the user's record (the second turn's result): by
    // reference, the request that gets the call carries only the order's.
    for id in [
        "shop-injected-s_remark-006",
        "shop-injected-s_banner-010",
        "shop-injected-s_plain-017",
    ] {
        let (by_reference, whole) = by_reference_and_whole(&item(id)).await;
        assert!(!whole, "{id}: released whole");
        assert!(!by_reference, "{id}: released by reference, held whole");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legitimate_write_is_released_by_reference_as_it_is_whole() {
    for id in ["shop-benign-cancel-000", "shop-benign-return-008"] {
        let (by_reference, whole) = by_reference_and_whole(&item(id)).await;
        assert!(whole, "{id}: held whole");
        assert!(by_reference, "{id}: held by reference, released whole");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_continued_from_a_response_nobody_remembers_is_held() {
    let it = item("shop-benign-cancel-000");
    let mock = start_mock(vec![calling("resp_x", "call_9", &it["call"])]).await;
    let gate = gate(&mock, "").await;
    let body = json!({"model": "m", "previous_response_id": "resp_unknown",
        "input": [{"role": "user", "content": it["user"]}], "tools": tools(&it)});
    let a = post_chat_at(&gate, "/v1/responses", &body, &[]).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(!a.text().contains("call_9"), "{}", a.text());
    let audit = gate.audit_flushed().await;
    assert!(
        audit.iter().any(|r| r["rule"] == "history-unknown"),
        "{audit:#?}"
    );
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_continued_on_another_replica_is_read_whole() {
    let port = crate::bin::free_port();
    let Some(_redis) = crate::shared_state::redis(port).await else {
        return;
    };
    let state = format!(
        "{}key_prefix = \"byref:\"\n",
        crate::shared_state::shared_records(port)
    );
    for (id, released) in [
        ("shop-injected-s_remark-006", false),
        ("shop-benign-return-008", true),
    ] {
        let it = item(id);
        let mock = provider(&it).await;
        let a = gate(&mock, &state).await;
        let b = gate(&mock, &state).await;
        let seen = drive(&it, &a, &b).await;
        assert_eq!(
            seen,
            (released, released),
            "{id}: (by reference on B, whole)"
        );
        a.stop().await;
        b.stop().await;
    }
}
