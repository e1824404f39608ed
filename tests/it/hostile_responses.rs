//! A hostile Responses provider, through the binary, judged by the clients
//! an agent runs: every place a client may read a call from (an item's
//! first event, its deltas, its last event, the response's `output`) must
//! carry the call that was gated, or the response fails. The judges are
//! openai-python's stream snapshot and final response, the
//! `response.completed` output the Agents SDK runs from, the Agents SDK
//! itself with tools that record whether they ran, LangChain's
//! `ChatOpenAI(use_responses_api=True)`, and a case-blind reader.

use std::sync::Arc;
use std::time::Duration;
use toolgate::protocol::Stored;

use serde_json::{json, Value};

use crate::bin::Bin;
use crate::lenient;
use crate::support::*;

/// The default policy, with `delete_file` and the namespaced
/// `crm.delete_contact` denied.
fn files() -> Vec<(&'static str, String)> {
    vec![
        (
            "00-default.toml",
            toolgate::policy::DEFAULT_POLICY.to_string(),
        ),
        ("50-test.toml", deny(&["delete_file", "crm.delete_contact"])),
    ]
}

const READ: &str = "{\"path\":\"notes.txt\"}";
const FIND: &str = "{\"who\":\"ana\"}";

fn item(id: &str, call: &str, name: &str, args: &str, done: bool) -> Value {
    json!({"id": id, "type": "function_call", "status": if done {"completed"} else {"in_progress"},
        "call_id": call, "name": name, "arguments": args})
}

/// One call item's four events, consistent.
fn call_events(oi: u64, it: &Value) -> Vec<Value> {
    let id = it["id"].as_str().unwrap_or("");
    let args = it["arguments"].as_str().unwrap_or("");
    let mut added = it.clone();
    added["arguments"] = json!("");
    added["status"] = json!("in_progress");
    vec![
        json!({"type": "response.output_item.added", "output_index": oi, "item": added}),
        json!({"type": "response.function_call_arguments.delta", "output_index": oi, "item_id": id, "delta": args}),
        json!({"type": "response.function_call_arguments.done", "output_index": oi, "item_id": id, "arguments": args}),
        json!({"type": "response.output_item.done", "output_index": oi, "item": it}),
    ]
}

fn envelope(ty: &str, output: Value) -> Value {
    let status = if ty == "response.created" {
        "in_progress"
    } else {
        "completed"
    };
    json!({"type": ty, "response": {"id": "resp_h", "object": "response", "created_at": 1,
        "model": "test-model", "status": status, "output": output, "tools": [],
        "tool_choice": "auto", "parallel_tool_calls": true}})
}

/// A stream of `calls`, consistent, with `edit` applied to its events
/// before they are numbered.
fn stream_of(calls: &[Value], edit: impl Fn(&mut Vec<Value>)) -> String {
    let mut events = vec![envelope("response.created", json!([]))];
    for (i, c) in calls.iter().enumerate() {
        events.extend(call_events(i as u64, c));
    }
    events.push(envelope("response.completed", json!(calls)));
    edit(&mut events);
    numbered_events(events)
}

fn read_call() -> Value {
    item("fc_1", "call_1", "read_file", READ, true)
}

fn last(events: &mut [Value]) -> &mut Value {
    events.last_mut().unwrap()
}

/// The scenarios: a name (the model the client asks for) and the stream.
fn scenarios() -> Vec<(&'static str, String)> {
    let evil = || item("fc_1", "call_1", "delete_file", "{\"path\":\"/etc\"}", true);
    let mut ns_item = item(
        "fc_1",
        "call_1",
        "delete_contact",
        "{\"who\":\"boss\"}",
        true,
    );
    ns_item["namespace"] = json!("crm");
    let mut ns_find = item("fc_1", "call_1", "find_contact", FIND, true);
    ns_find["namespace"] = json!("crm");
    let mut spelled = evil();
    spelled["type"] = json!("function_call ");
    // A namespace the request never declared, on a declared, denied tool:
    // a client that reads no namespace runs `delete_file`.
    let mut undeclared_ns = evil();
    undeclared_ns["namespace"] = json!("x");
    vec![
        ("clean", stream_of(&[read_call()], |_| {})),
        (
            "final-renamed",
            stream_of(&[read_call()], |e| {
                last(e)["response"]["output"][0]["name"] = json!("delete_file");
            }),
        ),
        (
            "final-other-call-id",
            stream_of(&[read_call()], |e| {
                last(e)["response"]["output"] = json!([evil()]);
                last(e)["response"]["output"][0]["call_id"] = json!("call_9");
            }),
        ),
        (
            "final-twice",
            stream_of(&[read_call()], |e| {
                last(e)["response"]["output"] = json!([read_call(), evil()]);
            }),
        ),
        (
            "final-idless",
            stream_of(&[read_call()], |e| {
                let mut c = evil();
                c.as_object_mut().unwrap().remove("id");
                c["call_id"] = json!("call_9");
                last(e)["response"]["output"] = json!([read_call(), c]);
            }),
        ),
        (
            "final-Output",
            stream_of(&[read_call()], |e| {
                last(e)["response"]["Output"] = json!([evil()]);
            }),
        ),
        (
            "added-differs",
            stream_of(&[read_call()], |e| {
                e[1]["item"]["name"] = json!("delete_file");
                e[1]["item"]["arguments"] = json!("");
                e[2]["delta"] = json!("{\"path\":\"/etc\"}");
                e[3]["arguments"] = json!("{\"path\":\"/etc\"}");
            }),
        ),
        (
            "late-delta",
            stream_of(&[read_call()], |e| {
                let at = e.len() - 1;
                e.insert(at, json!({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{\"path\":\"/etc\"}"}));
            }),
        ),
        ("namespaced-denied", stream_of(&[ns_item], |_| {})),
        ("namespaced-allowed", stream_of(&[ns_find], |_| {})),
        ("namespace-undeclared", stream_of(&[undeclared_ns], |_| {})),
        (
            "spelled-type",
            stream_of(&[spelled], |e| {
                // A whole item in each event, as a provider without deltas sends it.
                e.retain(|v| !v["type"].as_str().unwrap_or("").contains("arguments"));
                e[1]["item"]["arguments"] = json!("{\"path\":\"/etc\"}");
            }),
        ),
    ]
}

/// Set when a request reached the provider declaring a denied tool.
static DENIED_DECLARED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The mock provider: the scenario named by the request's model, and a
/// plain answer once a tool result comes back.
fn provider(req: &Value) -> (u16, String) {
    let tools = req["tools"].to_string();
    if tools.contains("delete_file") || tools.contains("delete_contact") {
        DENIED_DECLARED.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    let answered = req["input"]
        .as_array()
        .is_some_and(|items| items.iter().any(|i| i["type"] == "function_call_output"));
    let model = req["model"].as_str().unwrap_or("");
    if answered {
        let msg = json!({"id": "msg_2", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}]});
        if req["stream"] != true {
            return (
                200,
                envelope("response.completed", json!([msg]))["response"].to_string(),
            );
        }
        let mut events = vec![envelope("response.created", json!([]))];
        events.push(json!({"type": "response.output_item.added", "output_index": 0, "item": msg}));
        events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": msg}));
        events.push(envelope("response.completed", json!([msg])));
        return (200, numbered_events(events));
    }
    let body = scenarios()
        .into_iter()
        .find(|(n, _)| *n == model)
        .map(|(_, s)| s)
        .unwrap_or_default();
    if req["stream"] == true {
        return (200, body);
    }
    // Not streamed (the Agents SDK's `Runner.run`): the response the
    // stream's end carries, doctored as it is there.
    let end = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|e| e["type"] == "response.completed")
        .map(|e| e["response"].clone())
        .unwrap_or_default();
    (200, end.to_string())
}

/// The calls a case-blind, last-key-wins reader finds anywhere in a
/// Responses stream: items of added, done and envelope events (an added
/// item's arguments are still to come: only its name is read).
fn lenient_calls(sse: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in sse.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let Some(ev) = lenient::parse(data.trim()) else {
            continue;
        };
        let added = ev.get("type").and_then(|t| t.str()).unwrap_or_default()
            == "response.output_item.added";
        let mut items: Vec<&lenient::L> = ev.get("item").into_iter().collect();
        if let Some(r) = ev.get("response") {
            items.extend(r.get("output").map(|o| o.items()).unwrap_or_default());
        }
        for i in items {
            let ty = i.get("type").and_then(|t| t.str()).unwrap_or_default();
            if ty.trim().eq_ignore_ascii_case("function_call") {
                let name = i.get("name").and_then(|n| n.str()).unwrap_or_default();
                let args = i.get("arguments").and_then(|a| a.str()).unwrap_or_default();
                let args = match (added, name.as_str()) {
                    (true, "read_file") => READ.to_string(),
                    (true, "find_contact") => FIND.to_string(),
                    _ => args,
                };
                let ns = i.get("namespace").and_then(|n| n.str());
                out.push((ns.map_or(name.clone(), |ns| format!("{ns}.{name}")), args));
            }
        }
    }
    out
}

/// What a judge may see of a call: the gated ones, exactly.
fn gated(call: &Value) -> bool {
    call == &json!(["read_file", READ]) || call == &json!(["crm.find_contact", FIND])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_clients_read_only_gated_calls_from_a_hostile_provider() {
    let mock = start_mock(vec![func(Arc::new(provider), Duration::ZERO)]).await;
    let f = files();
    let refs: Vec<(&str, &str)> = f.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let bin = Bin::start(&mock.base_url(), &refs, "").await;

    // The case-blind reader, over what the binary sends.
    for (name, _) in scenarios() {
        let body = json!({"model": name, "input": "go", "stream": true, "tools": [
            {"type": "function", "name": "read_file"}, {"type": "function", "name": "delete_file"},
            {"type": "namespace", "name": "crm", "description": "", "tools": [
                {"type": "function", "name": "find_contact"}, {"type": "function", "name": "delete_contact"}]}]});
        let a = send(
            "POST",
            &format!("{}/v1/responses", bin.url),
            &[("content-type", "application/json")],
            body.to_string(),
        )
        .await;
        let text = a.text();
        for (n, args) in lenient_calls(&text) {
            assert!(
                gated(&json!([n, args])),
                "{name}: a lenient reader saw {n} {args}: {text}"
            );
        }
        assert!(
            !text.contains("/etc") && !text.contains("boss"),
            "{name}: {text}"
        );
    }

    let names: Vec<String> = scenarios().iter().map(|(n, _)| n.to_string()).collect();
    let mut args = vec![format!("{}/v1", bin.url)];
    args.extend(names.iter().cloned());
    let Some(r) = run_sdk("hostile_check.py", args).await else {
        return;
    };
    for name in &names {
        let s = &r[name];
        assert!(s.get("harness").is_none(), "{name}: {s:#}");
        for judge in ["snapshot", "completed", "langchain"] {
            for key in ["calls", "final"] {
                for c in s[judge][key].as_array().into_iter().flatten() {
                    assert!(gated(c), "{name}: {judge} {key} read {c}: {s:#}");
                }
            }
        }
        for n in s["snapshot"]["names"].as_array().into_iter().flatten() {
            assert!(
                n == "read_file" || n == "crm.find_contact",
                "{name}: a snapshot showed {n}: {s:#}"
            );
        }
        for ran in s["agents"]["ran"].as_array().into_iter().flatten() {
            assert!(gated(ran), "{name}: the Agents SDK ran {ran}: {s:#}");
        }
    }
    // The controls: a consistent stream's allowed calls run, plain and
    // namespaced; the doctored ones fail or run nothing denied.
    assert_eq!(
        r["clean"]["agents"]["ran"],
        json!([["read_file", READ]]),
        "{r:#}"
    );
    assert_eq!(
        r["clean"]["snapshot"]["final"],
        json!([["read_file", READ]]),
        "{r:#}"
    );
    assert_eq!(
        r["clean"]["langchain"]["calls"],
        json!([["read_file", READ]]),
        "{r:#}"
    );
    assert_eq!(
        r["namespaced-allowed"]["completed"]["calls"],
        json!([["crm.find_contact", FIND]]),
        "{r:#}"
    );
    for name in [
        "final-renamed",
        "final-twice",
        "added-differs",
        "late-delta",
    ] {
        assert!(r[name]["snapshot"].get("raised").is_some(), "{name}: {r:#}");
    }

    assert!(
        !DENIED_DECLARED.load(std::sync::atomic::Ordering::SeqCst),
        "denied tools, plain and namespaced, are hidden from the provider"
    );
    // Every doctored stream was ended by toolgate and audited as such.
    let audit = bin.audit();
    assert!(
        audit.iter().any(|a| a["gate"] == "stream"),
        "failures are audited: {audit:#?}"
    );
    assert!(
        audit
            .iter()
            .filter(|a| a["verdict"] == "allow")
            .all(|a| a["tool"] == "read_file" || a["tool"] == "crm.find_contact"),
        "{audit:#?}"
    );
    assert!(
        audit
            .iter()
            .any(|a| a["tool"] == "crm.delete_contact" && a["verdict"] != "allow"),
        "the namespaced tool is gated under its full name: {audit:#?}"
    );
    assert!(
        audit
            .iter()
            .any(|a| a["kind"] == "function_call " && a["verdict"] == "reject"),
        "an item type toolgate does not know is rejected and audited: {audit:#?}"
    );
}

/// A policy of deny rules under `[defaults] verdict = "allow"` (no
/// `undeclared-tool` rule to catch it by accident): a call given a
/// namespace the request never declared is not released, whichever client
/// reads it, and is audited under the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_the_request_never_declared_is_rejected_under_any_policy() {
    let mock = start_mock(vec![func(Arc::new(provider), Duration::ZERO)]).await;
    let policy = format!(
        "[defaults]\nverdict = \"allow\"\n\n{}",
        deny(&["delete_file", "crm.delete_contact"])
    );
    let bin = Bin::start(&mock.base_url(), &[("50-deny.toml", policy.as_str())], "").await;
    let names = ["clean", "namespace-undeclared"];
    let mut args = vec![format!("{}/v1", bin.url)];
    args.extend(names.iter().map(|n| n.to_string()));
    let Some(r) = run_sdk("hostile_check.py", args).await else {
        return;
    };
    let s = &r["namespace-undeclared"];
    assert!(s.get("harness").is_none(), "{s:#}");
    for judge in ["snapshot", "completed", "langchain"] {
        for key in ["calls", "final"] {
            for c in s[judge][key].as_array().into_iter().flatten() {
                assert!(gated(c), "{judge} {key} read {c}: {s:#}");
            }
        }
    }
    for ran in s["agents"]["ran"].as_array().into_iter().flatten() {
        assert!(gated(ran), "the Agents SDK ran {ran}: {s:#}");
    }
    assert_eq!(
        r["clean"]["agents"]["ran"],
        json!([["read_file", READ]]),
        "{r:#}"
    );
    let audit = bin.audit();
    assert!(
        audit
            .iter()
            .any(|a| a["tool"] == "x.delete_file" && a["reason"] == "undeclared_namespace"),
        "{audit:#?}"
    );
    assert!(
        audit
            .iter()
            .filter(|a| a["verdict"] == "allow")
            .all(|a| a["tool"] == "read_file"),
        "{audit:#?}"
    );
}

/// The budget gauge on `/metrics`.
async fn held(bin: &Bin) -> u64 {
    let m = bin.metrics().await;
    m.lines()
        .find_map(|l| l.strip_prefix("toolgate_body_bytes_held "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no budget gauge: {m}"))
}

/// A stream held at a pause: what it keeps is charged to the budget while
/// it waits, and what it keeps is bounded (call items far over the call
/// limit keep none of their arguments), Responses and Messages alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_stream_holds_is_charged_and_bounded() {
    const N: u64 = 60;
    let big = "x".repeat(3 << 20);
    // Responses: sixty call items of 3 MiB in their done events, then a pause.
    let mut events = vec![envelope("response.created", json!([]))];
    for i in 0..N {
        let it = item(
            &format!("fc_{i}"),
            &format!("c{i}"),
            "read_file",
            &big,
            true,
        );
        let mut added = it.clone();
        added["arguments"] = json!("");
        events
            .push(json!({"type": "response.output_item.added", "output_index": i, "item": added}));
        events.push(json!({"type": "response.output_item.done", "output_index": i, "item": it}));
    }
    let before_r = numbered_events(events);
    let after_r = numbered_events(vec![envelope("response.completed", json!([]))]);
    // Messages: tool_use blocks whose start carries 600 KiB of input (held
    // until the held bytes reach their limit, then dropped as they come).
    let medium = "y".repeat(600 << 10);
    let mut before_m = String::from("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n");
    for i in 0..N {
        let start = json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": "read_file", "input": {"path": medium}}});
        before_m.push_str(&format!("event: content_block_start\ndata: {start}\n\n"));
        before_m.push_str(&format!("event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":{i}}}\n\n"));
    }
    let after_m = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":1}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let (go_r, go_m) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let mock = start_mock(vec![
        Reply::sse("event: response.created\ndata: {}\n\n"),
        Reply::Paused {
            before: before_r.into(),
            after: after_r.into(),
            go: go_r.clone(),
        },
        Reply::Paused {
            before: before_m.into(),
            after: after_m.into(),
            go: go_m.clone(),
        },
    ])
    .await;
    let f = files();
    let refs: Vec<(&str, &str)> = f.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let bin = Bin::start(
        &mock.base_url(),
        &refs,
        &messages_upstream(&mock.base_url()),
    )
    .await;
    // Warm up (a broken stream): what the first request sets up once is not counted.
    let url = |p: &str| format!("{}{p}", bin.url);
    let h = [("content-type", "application/json")];
    let r = json!({"model": "m", "input": "go", "stream": true, "tools": [{"type": "function", "name": "read_file"}]});
    send("POST", &url("/v1/responses"), &h, r.to_string()).await;
    let base = bin.memory_kib("VmHWM");
    let anon_base = bin.memory_kib("RssAnon");

    for (path, body, go) in [
        ("/v1/responses", r.clone(), go_r),
        (
            "/v1/messages",
            json!({"model": "m", "max_tokens": 10, "stream": true, "messages": [{"role": "user", "content": "go"}], "tools": [{"name": "read_file", "input_schema": {"type": "object"}}]}),
            go_m,
        ),
    ] {
        let (u, b) = (url(path), body.to_string());
        let task = tokio::spawn(async move {
            send(
                "POST",
                &u,
                &[
                    ("content-type", "application/json"),
                    ("anthropic-version", "2023-06-01"),
                ],
                b,
            )
            .await
        });
        // While paused, the held calls are charged (the gauge is in use).
        let mut charged = 0;
        for _ in 0..200 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            charged = held(&bin).await;
            if charged > 0 {
                break;
            }
        }
        assert!(charged > 0, "{path}: nothing charged while calls are held");
        go.notify_one();
        let a = task.await.unwrap();
        assert!(
            !a.text().contains(&big[..1000]),
            "{path}: an oversized call was released"
        );
        let grown = bin.memory_kib("VmHWM").saturating_sub(base);
        eprintln!("{path}: {charged} bytes charged while held; peak RSS grew {grown} KiB");
        // 180 MiB (Responses) and 36 MiB (Messages) of call items went
        // through: what stays is bounded by the held-bytes limit (8 MiB of
        // events, with their trees) and a few events being read.
        assert!(grown < 64 * 1024, "{path}: peak memory grew {grown} KiB");
    }
    // After the burst, what the streams held has gone back (the allocator
    // keeps a few MiB of warmed-up state).
    let mut now = bin.memory_kib("RssAnon");
    for _ in 0..50 {
        if now < anon_base + 32 * 1024 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        now = bin.memory_kib("RssAnon");
    }
    eprintln!("anonymous memory: {anon_base} KiB before, {now} KiB after");
    assert!(
        now < anon_base + 32 * 1024,
        "{now} KiB stayed ({anon_base} KiB before)"
    );
}

/// What toolgate remembers of stored responses across requests is bounded
/// by bytes as well as by count, however long the ids a provider makes up.
#[tokio::test]
async fn remembered_responses_are_bounded_by_bytes() {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.0.join("policies")).unwrap();
    std::fs::write(dir.0.join("policies/p.toml"), ALLOW_ALL).unwrap();
    let cfg = "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\nbase_url = \"http://127.0.0.1:9\"\n[policy]\ndir = \"policies\"\n[responses]\nremember_max = 1000\nremember_max_bytes = 1048576\n";
    std::fs::write(dir.0.join("toolgate.toml"), cfg).unwrap();
    let config = toolgate::Config::load(&dir.0.join("toolgate.toml")).unwrap();
    let state = toolgate::app::build(config).await.unwrap();
    for r in 0..200 {
        let calls = (0..100)
            .map(|i| {
                (
                    format!("call_{r}_{i}_{}", "x".repeat(1000)),
                    "function_call".into(),
                )
            })
            .collect();
        state.remember_withheld(toolgate::protocol::Withheld {
            response_id: format!("resp_{r}"),
            calls,
        });
    }
    let bytes = state.remembered_bytes();
    assert!(bytes <= 1 << 20, "{bytes} bytes remembered");
    let kept = (0..200)
        .filter(|r| state.withheld(&format!("resp_{r}")).is_some())
        .count();
    assert!(
        kept > 0 && kept < 20,
        "{kept} records of ~100 KB kept within 1 MiB"
    );
    // Small records: the count bounds them.
    for r in 0..5000 {
        state.remember_renamed(format!("a{r}"), format!("b{r}"));
    }
    assert!(state.remembered_bytes() <= 1 << 20);
    let renamed = (0..5000)
        .filter(|r| state.renamed(&format!("a{r}")).is_some())
        .count();
    assert!(
        renamed <= 1000,
        "{renamed} renames kept over a count of 1000"
    );
}

/// The calls openai-python's stream snapshot ends with: each function call
/// item as added, its argument deltas appended by `output_index`.
fn snapshot_calls(sse: &str) -> Vec<(String, String)> {
    let mut items: Vec<Value> = Vec::new();
    for data in sse.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let Ok(e) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        match e["type"].as_str().unwrap_or("") {
            "response.output_item.added" => items.push(e["item"].clone()),
            "response.function_call_arguments.delta" => {
                let at = e["output_index"].as_u64().unwrap_or(u64::MAX) as usize;
                if let Some(i) = items.get_mut(at) {
                    let args = format!(
                        "{}{}",
                        i["arguments"].as_str().unwrap_or(""),
                        e["delta"].as_str().unwrap_or("")
                    );
                    i["arguments"] = json!(args);
                }
            }
            _ => {}
        }
    }
    items
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| {
            (
                i["name"].as_str().unwrap_or("").into(),
                i["arguments"].as_str().unwrap_or("").into(),
            )
        })
        .collect()
}

/// Under `ask`, the person approves the call that was gated, and the client
/// receives exactly that call; a call whose first event and deltas say
/// other arguments than its last event is never asked about: the stream
/// fails before the question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_person_approves_is_what_the_client_receives() {
    use crate::approval::{approval_config, decide, list, pending};
    let small = "{\"amount\":5,\"to\":\"acme\"}";
    let pay = item("fc_1", "call_1", "pay_invoice", small, true);
    let honest = stream_of(std::slice::from_ref(&pay), |_| {});
    let doctored = stream_of(&[pay], |e| {
        e[2]["delta"] = json!("{\"amount\":5000,\"to\":\"attacker-acct\"}");
    });
    let mock = start_mock(vec![Reply::sse(honest), Reply::sse(doctored)]).await;
    let policy = "[[rule]]\nname = \"ask-pay\"\ntools = [\"pay_invoice\"]\nverdict = \"ask\"\n";
    let gate = start_gate(&mock.base_url(), policy, &approval_config(30.0)).await;
    let body = json!({"model": "m", "input": "pay", "stream": true,
        "tools": [{"type": "function", "name": "pay_invoice"}]});
    let url = format!("{}/v1/responses", gate.url);
    let (u, b) = (url.clone(), body.to_string());
    let client =
        tokio::spawn(
            async move { send("POST", &u, &[("content-type", "application/json")], b).await },
        );
    let q = pending(&gate, 1).await;
    assert!(q[0].to_string().contains("acme"), "{q:?}");
    let a = decide(
        &gate,
        q[0]["id"].as_str().unwrap(),
        json!({"decision": "approve", "by": "ana"}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let got = client.await.unwrap().text();
    assert_eq!(
        snapshot_calls(&got),
        [("pay_invoice".to_string(), small.to_string())],
        "{got}"
    );

    let got = tokio::time::timeout(
        Duration::from_secs(20),
        send(
            "POST",
            &url,
            &[("content-type", "application/json")],
            body.to_string(),
        ),
    )
    .await
    .expect("no question keeps a doctored call waiting")
    .text();
    assert!(
        list(&gate).await.is_empty(),
        "nobody is asked about a call read two ways"
    );
    assert!(
        !got.contains("attacker") && got.contains("response.failed"),
        "{got}"
    );
    gate.stop().await;
}
