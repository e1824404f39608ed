//! The same verdict whole or by reference: a conversation an agent drives
//! turn by turn with `previous_response_id` (each request carries only the
//! new tool result) is read as though it had come whole, through a real
//! toolgate with the recommended policy; one continued from a response
//! toolgate does not remember is held (`context.history_complete`).

use std::sync::Arc;

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
fn answer(id: &str, call_id: &str, call: &Value) -> Value {
    json!({"id": id, "object": "response", "status": "completed", "output": [
        {"id": format!("fc_{call_id}"), "type": "function_call", "status": "completed",
         "call_id": call_id, "name": call["name"], "arguments": call["arguments"].to_string()}]})
}

fn calling(id: &str, call_id: &str, call: &Value) -> Reply {
    Reply::json(200, answer(id, call_id, call).to_string())
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

/// An input item naming a stored item (`item_reference`) has the model read
/// what toolgate sees only the id of: the history is not known whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_naming_a_stored_item_is_held() {
    let it = item("shop-benign-cancel-000");
    for (reference, held) in [(true, true), (false, false)] {
        let mock = start_mock(vec![calling("resp_x", "call_9", &it["call"])]).await;
        let gate = gate(&mock, "").await;
        let mut input = vec![json!({"role": "user", "content": it["user"]})];
        if reference {
            input.insert(0, json!({"type": "Item_Reference", "id": "fco_elsewhere"}));
        }
        let body = json!({"model": "m", "input": input, "tools": tools(&it)});
        let a = post_chat_at(&gate, "/v1/responses", &body, &[]).await;
        let call = ("call_9", it["call"]["name"].as_str().unwrap_or_default());
        crate::unseen::expect_held(&gate, &a, call, held, "").await;
        gate.stop().await;
    }
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

/// A provider holding conversations, answering `item`'s turns in order
/// (the last one again for every later request).
fn conversing(item: &Value) -> (Arc<Conversations>, Reply) {
    let mut calls: Vec<Value> = item["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["call"].clone())
        .collect();
    calls.push(item["call"].clone());
    let turn = std::sync::atomic::AtomicUsize::new(0);
    let respond: Responder = Arc::new(move |_| {
        let i = turn
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            .min(calls.len() - 1);
        let a = answer(&format!("resp_{i}"), &format!("call_{i}"), &calls[i]);
        (200, a.to_string())
    });
    let store = Arc::new(Conversations::default());
    (store.clone(), conversation_provider(store, respond))
}

/// Whether the final call of `item` reached the agent, driven in a
/// conversation of the Conversations API: one tool result a request,
/// each naming the conversation.
async fn drive_conversation(item: &Value, gate: &Gate) -> bool {
    drive_conversation_on(item, gate, gate).await
}

/// The same, the last request through `late` (another replica).
async fn drive_conversation_on(item: &Value, gate: &Gate, late: &Gate) -> bool {
    let steps = item["steps"].as_array().unwrap();
    let n = steps.len();
    let tools = tools(item);
    let c = post_chat_at(gate, "/v1/conversations", &json!({"items": []}), &[]).await;
    assert_eq!(c.status, 200, "{}", c.text());
    let id = c.json()["id"].as_str().unwrap().to_string();
    let user = json!({"role": "user", "content": item["user"]});
    let first = json!({"model": "m", "conversation": id, "input": [user], "tools": tools});
    let mut a = post_chat_at(gate, "/v1/responses", &first, &[]).await;
    for (i, s) in steps.iter().enumerate() {
        assert!(
            a.text().contains(&format!("call_{i}")),
            "step {i}: {}",
            a.text()
        );
        let next = json!({"model": "m", "conversation": {"id": id},
            "input": [output_item(i, &s["result"])], "tools": tools});
        // A conversation's records are shared before its answer goes
        // back: another replica goes on at once.
        let on = if i + 1 == n { late } else { gate };
        a = post_chat_at(on, "/v1/responses", &next, &[]).await;
        assert_eq!(a.status, 200, "step {i}: {}", a.text());
    }
    a.text().contains(&format!("call_{n}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_of_the_conversations_api_gets_the_verdict_it_gets_whole() {
    for (id, released) in [
        ("shop-injected-s_remark-006", false),
        ("shop-injected-s_banner-010", false),
        ("shop-injected-s_plain-017", false),
        ("shop-benign-cancel-000", true),
        ("shop-benign-return-008", true),
    ] {
        let it = item(id);
        let (_store, reply) = conversing(&it);
        let mock = start_mock(vec![reply]).await;
        let gate = gate(&mock, "").await;
        assert_eq!(drive_conversation(&it, &gate).await, released, "{id}");
        gate.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_toolgate_has_not_seen_is_held_and_another_clients_is_not_found() {
    let it = item("shop-benign-cancel-000");
    // Asked for the write at once.
    let (store, reply) = conversing(&json!({"steps": [], "call": it["call"]}));
    store.plant(
        "conv_elsewhere",
        json!({"type": "message", "role": "user", "content": "hi", "id": "m0"}),
    );
    let mock = start_mock(vec![reply]).await;
    std::env::set_var("TG_IT_CONV_A", "tg-conv-token-a-1");
    std::env::set_var("TG_IT_CONV_B", "tg-conv-token-b-2");
    let clients = "[[client]]\nname = \"a\"\ntoken_env = \"TG_IT_CONV_A\"\n\n\
        [[client]]\nname = \"b\"\ntoken_env = \"TG_IT_CONV_B\"\n";
    let gate = gate(&mock, clients).await;
    let (ha, hb) = (
        [("authorization", "Bearer tg-conv-token-a-1")],
        [("authorization", "Bearer tg-conv-token-b-2")],
    );
    // Opened elsewhere: its earlier turns are not known, so the write waits.
    let body = json!({"model": "m", "conversation": "conv_elsewhere",
        "input": [{"role": "user", "content": it["user"]}], "tools": tools(&it)});
    let a = post_chat_at(&gate, "/v1/responses", &body, &ha).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(!a.text().contains("call_0"), "{}", a.text());
    assert!(a.text().contains(NEUTRAL), "{}", a.text());
    let audit = gate.audit_flushed().await;
    assert!(
        audit.iter().any(|r| r["rule"] == "history-unknown"),
        "{audit:#?}"
    );
    // Now a's: b can neither continue it nor read it.
    let a = post_chat_at(&gate, "/v1/responses", &body, &hb).await;
    assert_eq!(a.status, 404, "{}", a.text());
    let url = format!("{}/v1/conversations/conv_elsewhere/items", gate.url);
    let a = send("GET", &url, &hb, "").await;
    assert_eq!(a.status, 404, "{}", a.text());
    let a = send("GET", &url, &ha, "").await;
    assert_eq!(a.status, 200, "{}", a.text());
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_of_the_conversations_api_goes_on_on_another_replica() {
    let port = crate::bin::free_port();
    let Some(_redis) = crate::shared_state::redis(port).await else {
        return;
    };
    for (id, released) in [
        ("shop-injected-s_remark-006", false),
        ("shop-benign-return-008", true),
    ] {
        // The provider below gives each run the same ids: each run its
        // own records.
        let state = format!(
            "{}key_prefix = \"{id}:\"\n",
            crate::shared_state::shared_records(port)
        );
        let it = item(id);
        let (_store, reply) = conversing(&it);
        let mock = start_mock(vec![reply]).await;
        let a = gate(&mock, &state).await;
        let b = gate(&mock, &state).await;
        assert_eq!(drive_conversation_on(&it, &a, &b).await, released, "{id}");
        a.stop().await;
        b.stop().await;
    }
}

/// An item written into a conversation that names a stored item
/// (`item_reference`) has the conversation hold what toolgate sees only the
/// id of: every later turn of it reads its history as not known whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_given_a_stored_item_by_reference_is_held() {
    let it = item("shop-benign-cancel-000");
    for (reference, held) in [(true, true), (false, false)] {
        let (_store, reply) = conversing(&json!({"steps": [], "call": it["call"]}));
        let mock = start_mock(vec![reply]).await;
        let gate = gate(&mock, "").await;
        let mut items = vec![json!({"type": "message", "role": "user", "content": "hello"})];
        if reference {
            items.push(json!({"type": "item_reference", "id": "fco_elsewhere"}));
        }
        let c = post_chat_at(&gate, "/v1/conversations", &json!({"items": items}), &[]).await;
        assert_eq!(c.status, 200, "{}", c.text());
        let id = c.json()["id"].as_str().unwrap().to_string();
        let body = json!({"model": "m", "conversation": id,
            "input": [{"role": "user", "content": it["user"]}], "tools": tools(&it)});
        let a = post_chat_at(&gate, "/v1/responses", &body, &[]).await;
        let call = ("call_0", it["call"]["name"].as_str().unwrap_or_default());
        crate::unseen::expect_held(&gate, &a, call, held, "").await;
        gate.stop().await;
    }
}
