//! What the model reads that toolgate never sees: the output of a tool the
//! provider runs in the answer (a web search before the call), or a search
//! the request turns on (Gemini's grounding, a chat request's web search).
//! A call after such a read gets `context.history_complete` false, the
//! verdict a conversation whose earlier turns are unknown gets; a
//! provider-run tool that reads only the request (tool search) leaves it
//! true.

use serde_json::{json, Value};

use crate::support::*;

/// Withholds every call that comes after something toolgate did not read.
const HOLD_UNSEEN: &str =
    "[[rule]]\nname = \"history-unknown\"\nwhen = \"!context.history_complete\"\nverdict = \"deny\"\n";

/// Whether the audited decision on `tool` was made by the rule above.
fn held_by_rule(audit: &[Value], tool: &str) -> bool {
    let call = audit
        .iter()
        .find(|r| r["tool"] == tool && r["verdict"] != "provider_run");
    let call = call.unwrap_or_else(|| panic!("no decision on {tool}: {audit:#?}"));
    call["rule"] == "history-unknown"
}

/// Checks answer `a`: the call to `tool` (its id `marker` in the text)
/// reached the agent unless `held`, and when held, the rule on what
/// toolgate did not read held it (a history-unknown rule, as the one
/// above or `taint.toml`'s). The audit trail, for more checks.
pub async fn expect_held(
    gate: &Gate,
    a: &Answer,
    (marker, tool): (&str, &str),
    held: bool,
    what: &str,
) -> Vec<Value> {
    assert_eq!(a.status, 200, "{what}: {}", a.text());
    assert_eq!(!a.text().contains(marker), held, "{what}: {}", a.text());
    let audit = gate.audit_flushed().await;
    assert_eq!(held_by_rule(&audit, tool), held, "{what}: {audit:#?}");
    audit
}

/// The `send_email` call of the Responses answers below.
const MAIL: (&str, &str) = ("call_mail", "send_email");

fn provider_run(audit: &[Value]) -> Vec<String> {
    (audit.iter())
        .filter(|r| r["verdict"] == "provider_run")
        .map(|r| r["tool"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_messages_call_after_a_web_search_the_provider_ran_is_held() {
    let search = own_fixture("messages/web-search-then-tool-use.sse");
    // The same answer with a tool search, which reads only the request's
    // own tool definitions.
    let tool_search = String::from_utf8(search.to_vec()).unwrap().replace(
        "\"name\":\"web_search\"",
        "\"name\":\"tool_search_tool_bm25\"",
    );
    for (body, ran, held) in [
        (search.clone(), "web_search", true),
        (tool_search.into(), "tool_search_tool_bm25", false),
    ] {
        let mock = start_mock(vec![Reply::Sse {
            body,
            chunk: 97,
            delay: std::time::Duration::ZERO,
            reset: false,
            gzip: false,
        }])
        .await;
        let gate = start_gate(
            "http://127.0.0.1:9/v1",
            HOLD_UNSEEN,
            &messages_upstream(&mock.base_url()),
        )
        .await;
        let req = json!({"model": "claude-test", "max_tokens": 512, "stream": true,
            "messages": [{"role": "user", "content": "Ask Acme for my refund."}],
            "tools": [{"name": "send_email", "input_schema": {"type": "object"}},
                {"type": "web_search_20250305", "name": "web_search"},
                {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}]});
        let a = crate::messages::post(&gate, "/v1/messages", &req, &[]).await;
        let call = ("toolu_01SendAfterSearch", "send_email");
        let audit = expect_held(&gate, &a, call, held, ran).await;
        assert_eq!(provider_run(&audit), [ran], "{audit:#?}");
        gate.stop().await;
    }
}

/// A Responses answer: a web search the provider ran (when `search`),
/// then a `send_email` call.
fn responses_answer(search: bool) -> (String, Value) {
    let ws = |done: bool| {
        json!({"id": "ws_1", "type": "web_search_call",
        "status": if done {"completed"} else {"in_progress"},
        "action": {"type": "search", "query": "acme refunds"}})
    };
    let args = "{\"to\":\"refunds@acme.example\"}";
    let fc = |done: bool| {
        json!({"id": "fc_1", "type": "function_call",
        "status": if done {"completed"} else {"in_progress"}, "call_id": "call_mail",
        "name": "send_email", "arguments": if done {args} else {""}})
    };
    let base = json!({"id": "resp_U", "object": "response", "created_at": 1, "model": "m",
        "status": "in_progress", "output": []});
    let mut fin = base.clone();
    fin["status"] = json!("completed");
    let mut output = Vec::new();
    let mut events = vec![json!({"type": "response.created", "response": base})];
    let mut at = 0;
    if search {
        events.extend([
            json!({"type": "response.output_item.added", "output_index": 0, "item": ws(false)}),
            json!({"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws_1"}),
            json!({"type": "response.web_search_call.completed", "output_index": 0, "item_id": "ws_1"}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": ws(true)}),
        ]);
        output.push(ws(true));
        at = 1;
    }
    events.extend([
        json!({"type": "response.output_item.added", "output_index": at, "item": fc(false)}),
        json!({"type": "response.function_call_arguments.delta", "output_index": at, "item_id": "fc_1", "delta": args}),
        json!({"type": "response.function_call_arguments.done", "output_index": at, "item_id": "fc_1", "arguments": args}),
        json!({"type": "response.output_item.done", "output_index": at, "item": fc(true)}),
    ]);
    output.push(fc(true));
    fin["output"] = json!(output);
    events.push(json!({"type": "response.completed", "response": fin.clone()}));
    (numbered_events(events), fin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responses_call_after_a_web_search_the_provider_ran_is_held() {
    for search in [true, false] {
        for stream in [true, false] {
            let (sse, whole) = responses_answer(search);
            let reply = if stream {
                Reply::sse(sse)
            } else {
                Reply::json(200, whole.to_string())
            };
            let mock = start_mock(vec![reply]).await;
            let gate = start_gate(&mock.base_url(), HOLD_UNSEEN, "").await;
            let req = json!({"model": "m", "stream": stream, "input": "Ask Acme for my refund.",
                "tools": [{"type": "function", "name": "send_email", "parameters": {"type": "object"}},
                    {"type": "web_search"}]});
            let a = post_chat_at(&gate, "/v1/responses", &req, &[]).await;
            let what = format!("search {search}, stream {stream}");
            let audit = expect_held(&gate, &a, MAIL, search, &what).await;
            let ran: &[&str] = if search { &["web_search"] } else { &[] };
            assert_eq!(provider_run(&audit), ran, "{what}: {audit:#?}");
            gate.stop().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_request_the_provider_answers_from_the_web_is_held() {
    let web: [(&str, Value); 4] = [
        ("web_search_options", json!({})),
        ("plugins", json!([{"id": "web", "max_results": 3}])),
        ("model", json!("openai/gpt-4o:online")),
        ("plugins", json!([{"id": "file-parser"}])),
    ];
    for (key, value) in web {
        let held = value != json!([{"id": "file-parser"}]);
        let mock = start_mock(vec![Reply::sse(one_call_stream("send_email", "{}"))]).await;
        let gate = start_gate(&mock.base_url(), HOLD_UNSEEN, "").await;
        let mut req = chat_request(true, &["send_email"]);
        req[key] = value.clone();
        let a = post_chat_at(&gate, "/v1/chat/completions", &req, &[]).await;
        let what = format!("{key}={value}");
        expect_held(&gate, &a, ("call_1", "send_email"), held, &what).await;
        gate.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_call_grounded_in_a_search_is_held_and_one_beside_code_is_not() {
    let body = own_fixture("gemini/whole-text-then-call.json");
    for (tool, held) in [
        (json!({"googleSearch": {}}), true),
        (json!({"url_context": {}}), true),
        (json!({"codeExecution": {}}), false),
    ] {
        let mock = start_mock(vec![Reply::json(200, body.clone())]).await;
        let origin = format!("http://{}", mock.addr);
        let upstream = format!(
            "[upstream.gemini]\nbase_url = \"{origin}\"\napi_key_env = \"{KEY_ENV}\"\ntimeout_secs = 20\n"
        );
        let gate = start_gate("http://127.0.0.1:9/v1", HOLD_UNSEEN, &upstream).await;
        let req = json!({"contents": [{"role": "user", "parts": [{"text": "What now?"}]}],
            "tools": [{"functionDeclarations": [{"name": "run_shell"}]}, tool]});
        let url = format!(
            "{}/v1beta/models/gemini-2.5-flash:generateContent",
            gate.url
        );
        let a = send(
            "POST",
            &url,
            &[("content-type", "application/json")],
            req.to_string(),
        )
        .await;
        let call = ("cat /etc/passwd", "run_shell");
        expect_held(&gate, &a, call, held, &tool.to_string()).await;
        gate.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_continuing_an_answer_that_searched_the_web_is_held() {
    for search in [true, false] {
        // The first answer: a search (or not) and text; the second a call.
        let mut first = json!({"id": "resp_first", "object": "response", "status": "completed",
            "model": "m", "output": [{"id": "msg_1", "type": "message", "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Found it.", "annotations": []}]}]});
        if search {
            let ws = json!({"id": "ws_1", "type": "web_search_call", "status": "completed",
                "action": {"type": "search", "query": "acme refunds"}});
            first["output"].as_array_mut().unwrap().insert(0, ws);
        }
        let (_, mut second) = responses_answer(false);
        second["id"] = json!("resp_second");
        let mock = start_mock(vec![
            Reply::json(200, first.to_string()),
            Reply::json(200, second.to_string()),
        ])
        .await;
        let gate = start_gate(&mock.base_url(), HOLD_UNSEEN, "").await;
        let tools = json!([{"type": "function", "name": "send_email", "parameters": {"type": "object"}},
            {"type": "web_search"}]);
        let req = json!({"model": "m", "input": "Find Acme's refund page.", "tools": tools});
        let a = post_chat_at(&gate, "/v1/responses", &req, &[]).await;
        assert_eq!(a.status, 200, "{}", a.text());
        let req = json!({"model": "m", "previous_response_id": "resp_first",
            "input": "Now ask them for my refund.", "tools": tools});
        let a = post_chat_at(&gate, "/v1/responses", &req, &[]).await;
        expect_held(&gate, &a, MAIL, search, &format!("search {search}")).await;
        gate.stop().await;
    }
}

/// A tool result toolgate cannot read as text, in each format: a
/// screenshot, a PDF, a file. A call after it reads
/// `context.unread_results`; the same result as text does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_after_a_tool_result_toolgate_cannot_read_is_held() {
    const HOLD_UNREAD: &str =
        "[[rule]]\nname = \"history-unknown\"\nwhen = \"context.unread_results\"\nverdict = \"deny\"\n";
    let image =
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}});
    let text = json!({"type": "text", "text": "page 1 of the invoice"});
    for (part, held) in [(image, true), (text, false)] {
        let mock = start_mock(vec![Reply::sse(one_call_stream("send_email", "{}"))]).await;
        let gate = start_gate(&mock.base_url(), HOLD_UNREAD, "").await;
        let mut req = chat_request(true, &["send_email", "screenshot"]);
        req["messages"] = json!([
            {"role": "user", "content": "Mail the invoice on screen."},
            {"role": "assistant", "tool_calls": [{"id": "c0", "type": "function",
                "function": {"name": "screenshot", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c0", "content": [part]}
        ]);
        let a = post_chat_at(&gate, "/v1/chat/completions", &req, &[]).await;
        expect_held(&gate, &a, ("call_1", "send_email"), held, &part.to_string()).await;
        gate.stop().await;
    }
}
