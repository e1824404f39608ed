//! `rewrite = "resume"` on the Responses API: a response whose calls are
//! all withheld is continued by a follow-up (from the stored response, or
//! replayed when `store` is false), spliced into the same response under
//! its id, streamed (read by the strict reference reader) and whole; a
//! later request continuing from that id goes on from the follow-up's.

use serde_json::{json, Value};

use crate::responses::{post, scripted_stream, Reader};
use crate::support::*;

const POLICY: &str = "[[rule]]\nname = \"no-tools\"\ntools = [\"shell\", \"get_weather\"]\nverdict = \"reject\"\nrewrite = \"resume\"\n";
const RESULT: &str = "The action could not be completed.";

/// A response of one message, `resp_2`, with usage.
fn answering(text: &str) -> (String, Value) {
    let msg = json!({"id": "msg_2", "type": "message", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}]});
    let base = json!({"id": "resp_2", "object": "response", "created_at": 2, "model": "test-model", "status": "in_progress", "output": []});
    let mut fin = base.clone();
    fin["status"] = json!("completed");
    fin["output"] = json!([msg]);
    fin["usage"] = json!({"input_tokens": 20, "output_tokens": 3, "total_tokens": 23});
    let added = json!({"id": "msg_2", "type": "message", "status": "in_progress", "role": "assistant", "content": []});
    let part = json!({"type": "output_text", "text": "", "annotations": []});
    let events = [
        json!({"type": "response.created", "response": base}),
        json!({"type": "response.in_progress", "response": base}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
        json!({"type": "response.content_part.added", "output_index": 0, "item_id": "msg_2", "content_index": 0, "part": part}),
        json!({"type": "response.output_text.delta", "output_index": 0, "item_id": "msg_2", "content_index": 0, "delta": text, "logprobs": []}),
        json!({"type": "response.output_text.done", "output_index": 0, "item_id": "msg_2", "content_index": 0, "text": text, "logprobs": []}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": msg}),
        json!({"type": "response.completed", "response": fin}),
    ];
    (numbered_events(events), fin)
}

fn request(stream: bool, store: Option<bool>) -> Value {
    let tools: Vec<Value> = ["get_weather", "shell", "read"]
        .iter()
        .map(|n| json!({"type": "function", "name": n, "parameters": {"type": "object"}}))
        .collect();
    let mut r =
        json!({"model": "m", "stream": stream, "input": "weather, then clean up", "tools": tools});
    if let Some(s) = store {
        r["store"] = json!(s);
    }
    r
}

fn sent(mock: &Mock) -> Vec<Value> {
    mock.requests()
        .iter()
        .map(|s| serde_json::from_slice(&s.body).unwrap())
        .collect()
}

fn texts(output: &[Value]) -> Vec<String> {
    output
        .iter()
        .map(|i| i["content"][0]["text"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[tokio::test]
async fn a_stored_response_is_continued_in_the_same_stream() {
    let (first, _) = scripted_stream();
    let (second, _) = answering("Paris is mild; I did not clean up.");
    let mock = start_mock(vec![
        Reply::sse(first),
        Reply::sse(second),
        Reply::json(200, "{}"),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), POLICY, "").await;
    let a = post(&gate, "/v1/responses", &request(true, None)).await;
    let r = Reader::read(&a.body).unwrap_or_else(|e| panic!("{e}\n{}", a.text()));
    assert_eq!(r.errors, 0, "{}", a.text());
    assert!(r.calls().is_empty(), "{}", a.text());
    assert_eq!(
        texts(&r.output),
        ["Let me check.", "Paris is mild; I did not clean up."]
    );
    let end = r.terminal.unwrap();
    assert_eq!(end["id"], "resp_S", "one id");
    assert_eq!(texts(end["output"].as_array().unwrap()), texts(&r.output));
    assert_eq!(end["usage"]["total_tokens"], 23);
    assert_eq!(a.text().matches("event: response.created").count(), 1);

    let bodies = sent(&mock);
    assert_eq!(bodies[1]["previous_response_id"], "resp_S");
    assert_eq!(
        bodies[1]["input"],
        json!([{"type": "function_call_output", "call_id": "call_W", "output": RESULT},
               {"type": "function_call_output", "call_id": "call_S", "output": RESULT}])
    );
    // The agent goes on from the id it knows; the provider from the follow-up's.
    let mut next = request(false, None);
    next["previous_response_id"] = json!("resp_S");
    next["input"] = json!("thanks");
    post(&gate, "/v1/responses", &next).await;
    assert_eq!(sent(&mock)[2]["previous_response_id"], "resp_2");
}

#[tokio::test]
async fn an_unstored_response_is_replayed_in_the_follow_up() {
    let (first, _) = scripted_stream();
    let (second, _) = answering("Done.");
    let mock = start_mock(vec![Reply::sse(first), Reply::sse(second)]).await;
    let gate = start_gate(&mock.base_url(), POLICY, "").await;
    let a = post(&gate, "/v1/responses", &request(true, Some(false))).await;
    let r = Reader::read(&a.body).unwrap();
    assert_eq!(texts(&r.output), ["Let me check.", "Done."]);
    let body = &sent(&mock)[1];
    assert!(body.get("previous_response_id").is_none(), "{body}");
    let input = body["input"].as_array().unwrap();
    assert_eq!(
        input[0],
        json!({"role": "user", "content": "weather, then clean up"})
    );
    assert_eq!(input[1]["type"], "function_call");
    assert_eq!(input[1]["call_id"], "call_W");
    assert_eq!(input[2]["arguments"], "{\"cmd\":\"rm -rf /srv/data\"}");
    assert_eq!(
        input[4],
        json!({"type": "function_call_output", "call_id": "call_S", "output": RESULT})
    );
}

#[tokio::test]
async fn a_failed_responses_follow_up_replaces_the_calls_neutrally() {
    let (first, _) = scripted_stream();
    let mock = start_mock(vec![
        Reply::sse(first),
        Reply::json(500, r#"{"error":{"message":"no"}}"#),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), POLICY, "").await;
    let a = post(&gate, "/v1/responses", &request(true, None)).await;
    let r = Reader::read(&a.body).unwrap_or_else(|e| panic!("{e}\n{}", a.text()));
    let neutral = "I wasn't able to complete that action.";
    assert_eq!(texts(&r.output), ["Let me check.", neutral, neutral]);
    let end = r.terminal.unwrap();
    assert_eq!(texts(end["output"].as_array().unwrap()), texts(&r.output));
    // The provider still holds the calls: a continuation answers them.
    let mut next = request(false, None);
    next["previous_response_id"] = json!("resp_S");
    post(&gate, "/v1/responses", &next).await;
    let input = sent(&mock)[2]["input"].clone();
    assert_eq!(input[0]["type"], "function_call_output", "{input}");

    // The same for a whole response.
    let (_, first) = scripted_stream();
    let mock = start_mock(vec![
        Reply::json(200, first.to_string()),
        Reply::json(500, r#"{"error":{"message":"no"}}"#),
        Reply::json(200, "{}"),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), POLICY, "").await;
    let v = post(&gate, "/v1/responses", &request(false, None))
        .await
        .json();
    assert_eq!(
        texts(v["output"].as_array().unwrap()),
        ["Let me check.", neutral, neutral]
    );
    post(&gate, "/v1/responses", &next).await;
    let input = sent(&mock)[2]["input"].clone();
    assert_eq!(input[0]["call_id"], "call_W", "{input}");
    assert_eq!(input[1]["call_id"], "call_S", "{input}");
}

#[tokio::test]
async fn a_whole_response_is_continued_too() {
    let (_, first) = scripted_stream();
    let (_, second) = answering("Done.");
    let mock = start_mock(vec![
        Reply::json(200, first.to_string()),
        Reply::json(200, second.to_string()),
        Reply::json(200, "{}"),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), POLICY, "").await;
    let v = post(&gate, "/v1/responses", &request(false, None))
        .await
        .json();
    assert_eq!(v["id"], "resp_S");
    assert_eq!(
        texts(v["output"].as_array().unwrap()),
        ["Let me check.", "Done."]
    );
    assert_eq!(v["usage"]["total_tokens"], 23);
    let bodies = sent(&mock);
    assert_eq!(bodies[1]["previous_response_id"], "resp_S");
    assert_eq!(bodies[1]["input"].as_array().unwrap().len(), 2);
    let mut next = request(false, None);
    next["previous_response_id"] = json!("resp_S");
    post(&gate, "/v1/responses", &next).await;
    assert_eq!(sent(&mock)[2]["previous_response_id"], "resp_2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_reads_a_continued_response() {
    let f: Responder = std::sync::Arc::new(|req: &Value| {
        let stream = req["stream"] == true;
        let body = match (req.get("previous_response_id").is_some(), stream) {
            (false, true) => scripted_stream().0,
            (false, false) => scripted_stream().1.to_string(),
            (true, true) => answering("All done.").0,
            (true, false) => answering("All done.").1.to_string(),
        };
        (200, body)
    });
    let mock = start_mock(vec![func(f, std::time::Duration::ZERO)]).await;
    let gate = start_gate(&mock.base_url(), POLICY, "").await;
    let base = format!("{}/v1", gate.url);
    let Some(r) = run_sdk("resume_check.py", vec![base, "responses".into()]).await else {
        return;
    };
    for mode in ["stream", "helper", "whole"] {
        let t = &r[mode];
        assert_eq!(t["id"], "resp_S", "{mode}: {t}");
        assert_eq!(t["output_text"], "Let me check.All done.", "{mode}: {t}");
        assert_eq!(t["calls"], json!([]), "{mode}: {t}");
    }
    assert_eq!(r["stream"]["ids"], json!(["resp_S"]));
    assert_eq!(r["stream"]["text"], "Let me check.All done.");
    assert_eq!(mock.requests().len(), 6);
}
