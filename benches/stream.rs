//! Criterion benches of the stream transform (no I/O): a text-only stream and a
//! tool-call stream, for Chat Completions, the Responses API and Anthropic
//! Messages, reported in bytes/s; divide by the event count for events/s.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::json;
use toolgate::protocol::{
    chat::stream::StreamRewriter, messages, responses, sync_driver::RunSync, Options,
};

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> String {
    let v = json!({"id": "chatcmpl-CMKAuuvC6E26nL6HLZzTrysEvC8Ln", "object": "chat.completion.chunk", "created": 1759436804,
        "model": "gpt-4o-2024-08-06", "service_tier": "default", "system_fingerprint": "fp_cbf1785567", "usage": null,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
    format!("data: {v}\n\n")
}

/// `n` text deltas of realistic size, a finish and `[DONE]`.
fn text_stream(n: usize) -> Vec<u8> {
    let mut s = chunk(json!({"role": "assistant", "content": ""}), None);
    for i in 0..n {
        s.push_str(&chunk(
            json!({"content": format!(" token{i} of some streamed answer")}),
            None,
        ));
    }
    s.push_str(&chunk(json!({}), Some("stop")));
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

/// One agent turn shaped like the shared bench's mock answer: a role delta,
/// four text deltas, one call in 20 argument fragments, the finish and
/// `[DONE]`; the per-request cost of the transform.
fn one_turn() -> Vec<u8> {
    let mut s = chunk(json!({"role": "assistant", "content": ""}), None);
    for t in ["Let me ", "check the ", "weather ", "for you."] {
        s.push_str(&chunk(json!({ "content": t }), None));
    }
    s.push_str(&chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}), None));
    let args = r#"{"location": "San Francisco, CA", "unit": "celsius", "days": 3, "include_hourly": false}"#;
    let step = args.len().div_ceil(20);
    for piece in args.as_bytes().chunks(step) {
        let piece = std::str::from_utf8(piece).unwrap();
        s.push_str(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            None,
        ));
    }
    s.push_str(&chunk(json!({}), Some("tool_calls")));
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

/// Some text, then two parallel calls whose arguments arrive in `frags` fragments each.
fn tool_stream(frags: usize) -> Vec<u8> {
    let mut s = chunk(
        json!({"role": "assistant", "content": "Let me check."}),
        None,
    );
    for (i, name) in ["get_weather", "get_product_name"].iter().enumerate() {
        s.push_str(&chunk(json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": ""}}]}), None));
        s.push_str(&chunk(
            json!({"tool_calls": [{"index": i, "function": {"arguments": "{\"q\":\""}}]}),
            None,
        ));
        for f in 0..frags {
            s.push_str(&chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": format!("w{f} ")}}]}),
                None,
            ));
        }
        s.push_str(&chunk(
            json!({"tool_calls": [{"index": i, "function": {"arguments": "\"}"}}]}),
            None,
        ));
    }
    s.push_str(&chunk(json!({}), Some("tool_calls")));
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

/// [`tool_stream`] in OpenAI's shape: every chunk ends with an
/// `obfuscation` padding whose length changes from chunk to chunk.
fn padded_tool_stream(frags: usize) -> Vec<u8> {
    let pads = ["gjAvBXnGHOazDwM", "6l", "Hdw", "S", "kT0tx", ""];
    let mut n = 0;
    String::from_utf8(tool_stream(frags))
        .unwrap()
        .split_inclusive("\n\n")
        .map(|ev| match ev.strip_prefix("data: {") {
            Some(_) if ev.contains("\"choices\"") => {
                n += 1;
                let body = ev.trim_end().strip_suffix('}').unwrap();
                format!("{body},\"obfuscation\":\"{}\"}}\n\n", pads[n % pads.len()])
            }
            _ => ev.to_string(),
        })
        .collect::<String>()
        .into_bytes()
}

/// A Responses stream: `n` text deltas, then two calls of `frags` argument deltas each.
fn responses_stream(n: usize, frags: usize) -> Vec<u8> {
    let mut events = vec![
        json!({"type": "response.created", "response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}}),
    ];
    let msg = "msg_0fabc13af1ee0049006a691dfebdc881a1ae18d027c313d8ce";
    events.push(json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": msg, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}));
    for i in 0..n {
        events.push(json!({"type": "response.output_text.delta", "content_index": 0, "delta": format!(" token{i} of some streamed answer"), "item_id": msg, "logprobs": [], "obfuscation": "RvoJ43TaUvnCS8e", "output_index": 0}));
    }
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": msg, "type": "message", "status": "completed", "role": "assistant", "content": []}}));
    let mut output = vec![];
    for (i, name) in ["get_weather", "get_product_name"].iter().enumerate() {
        let oi = i + 1;
        let id = format!("fc_{i}");
        let args: String = std::iter::once("{\"q\":\"".to_string())
            .chain((0..frags).map(|f| format!("w{f} ")))
            .chain(std::iter::once("\"}".to_string()))
            .collect();
        let item = |a: &str, st: &str| json!({"id": id, "type": "function_call", "status": st, "arguments": a, "call_id": format!("call_{i}"), "name": name});
        events.push(json!({"type": "response.output_item.added", "output_index": oi, "item": item("", "in_progress")}));
        events.push(json!({"type": "response.function_call_arguments.delta", "output_index": oi, "item_id": id, "delta": "{\"q\":\""}));
        for f in 0..frags {
            events.push(json!({"type": "response.function_call_arguments.delta", "output_index": oi, "item_id": id, "delta": format!("w{f} ")}));
        }
        events.push(json!({"type": "response.function_call_arguments.delta", "output_index": oi, "item_id": id, "delta": "\"}"}));
        events.push(json!({"type": "response.output_item.done", "output_index": oi, "item": item(&args, "completed")}));
        output.push(item(&args, "completed"));
    }
    events.push(json!({"type": "response.completed", "response": {"id": "resp_1", "object": "response", "status": "completed", "output": output}}));
    events
        .into_iter()
        .enumerate()
        .map(|(n, mut e)| {
            e["sequence_number"] = json!(n);
            format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())
        })
        .collect::<String>()
        .into_bytes()
}

/// A Messages stream: `n` text deltas in one text block, then two calls
/// whose input arrives in `frags` fragments each.
fn messages_stream(n: usize, frags: usize) -> Vec<u8> {
    let ev = |v: serde_json::Value| {
        format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap_or(""))
    };
    let mut s = ev(
        json!({"type": "message_start", "message": {"id": "msg_01E3Wn1NynZw9FALZ68znj9S", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6", "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 702, "output_tokens": 1}}}),
    );
    s.push_str(&ev(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})));
    for i in 0..n {
        s.push_str(&ev(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": format!(" token{i} of some streamed answer")}})));
    }
    s.push_str(&ev(json!({"type": "content_block_stop", "index": 0})));
    for (i, name) in ["get_weather", "get_product_name"].iter().enumerate() {
        let i = i + 1;
        s.push_str(&ev(json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": {}}})));
        s.push_str(&ev(json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": "{\"q\":\""}})));
        for f in 0..frags {
            s.push_str(&ev(json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": format!("w{f}")}})));
        }
        s.push_str(&ev(json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": "\"}"}})));
        s.push_str(&ev(json!({"type": "content_block_stop", "index": i})));
    }
    s.push_str(&ev(json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 98}})));
    s.push_str(&ev(json!({"type": "message_stop"})));
    s.into_bytes()
}

fn run_messages(input: &[u8], deny_first: bool) -> usize {
    let chunks: Vec<&[u8]> = input.chunks(16 * 1024).collect();
    let mut rw = messages::stream::StreamRewriter::new(&opts());
    rw.run_sync(&chunks, |c| !(deny_first && c.name == "get_weather"))
        .len()
}

fn run_responses(input: &[u8], deny_first: bool) -> usize {
    let chunks: Vec<&[u8]> = input.chunks(16 * 1024).collect();
    let mut rw = responses::stream::StreamRewriter::new(&opts());
    rw.run_sync(&chunks, |c| !(deny_first && c.name == "get_weather"))
        .len()
}

fn opts() -> Options {
    Options {
        neutral_message: "N".into(),
        max_event_bytes: 1 << 24,
        max_call_bytes: 1 << 20,
        max_held_bytes: 1 << 24,
        id_key: [0; 32],
        resume: false,
        neutral_result: "R".into(),
        refusal: false,
        text_calls: false,
        early: true,
        foresee: false,
    }
}

fn run(input: &[u8], deny_first: bool) -> usize {
    let chunks: Vec<&[u8]> = input.chunks(16 * 1024).collect();
    let mut rw = StreamRewriter::new(&opts());
    rw.run_sync(&chunks, |c| !(deny_first && c.name == "get_weather"))
        .len()
}

fn bench(c: &mut Criterion) {
    let text = text_stream(2000);
    let tools = tool_stream(200);
    let count = |b: &[u8]| b.windows(6).filter(|w| w == b"data: ").count();
    eprintln!(
        "text stream: {} bytes, {} events; tool stream: {} bytes, {} events",
        text.len(),
        count(&text),
        tools.len(),
        count(&tools)
    );
    let mut g = c.benchmark_group("stream_transform");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("text_only", |b| b.iter(|| run(&text, false)));
    g.throughput(Throughput::Bytes(tools.len() as u64));
    g.bench_function("tool_calls_allowed", |b| b.iter(|| run(&tools, false)));
    g.bench_function("tool_calls_one_denied", |b| b.iter(|| run(&tools, true)));
    let padded = padded_tool_stream(200);
    let out = |input: &[u8]| {
        let chunks: Vec<&[u8]> = input.chunks(16 * 1024).collect();
        let mut rw = StreamRewriter::new(&opts());
        let text = String::from_utf8(rw.run_sync(&chunks, |_| true).to_vec()).unwrap();
        // Passing chunks keep their padding; released calls have none.
        let mut plain = String::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find(",\"obfuscation\":\"") {
            plain.push_str(&rest[..at]);
            rest = &rest[at + 16..];
            rest = &rest[rest.find('"').unwrap() + 1..];
        }
        plain + rest
    };
    assert_eq!(out(&padded), out(&tools), "the same but for the padding");
    g.throughput(Throughput::Bytes(padded.len() as u64));
    g.bench_function("tool_calls_allowed_openai_padding", |b| {
        b.iter(|| run(&padded, false))
    });
    let turn = one_turn();
    g.throughput(Throughput::Elements(1));
    g.bench_function("one_agent_turn", |b| b.iter(|| run(&turn, false)));
    g.finish();
    let rtext = responses_stream(2000, 0);
    let rtools = responses_stream(10, 200);
    assert_eq!(
        run_responses(&rtext, false),
        rtext.len(),
        "allow-all passes every byte"
    );
    assert_eq!(
        run_responses(&rtools, false),
        rtools.len(),
        "allow-all passes every byte"
    );
    let mut g = c.benchmark_group("responses_stream_transform");
    g.throughput(Throughput::Bytes(rtext.len() as u64));
    g.bench_function("text_only", |b| b.iter(|| run_responses(&rtext, false)));
    g.throughput(Throughput::Bytes(rtools.len() as u64));
    g.bench_function("tool_calls_allowed", |b| {
        b.iter(|| run_responses(&rtools, false))
    });
    g.bench_function("tool_calls_one_denied", |b| {
        b.iter(|| run_responses(&rtools, true))
    });
    g.finish();
    let mtext = messages_stream(2000, 0);
    let mtools = messages_stream(10, 200);
    for m in [&mtext, &mtools] {
        assert_eq!(
            run_messages(m, false),
            m.len(),
            "allow-all passes every byte"
        );
    }
    let mut g = c.benchmark_group("messages_stream_transform");
    g.throughput(Throughput::Bytes(mtext.len() as u64));
    g.bench_function("text_only", |b| b.iter(|| run_messages(&mtext, false)));
    g.throughput(Throughput::Bytes(mtools.len() as u64));
    g.bench_function("tool_calls_allowed", |b| {
        b.iter(|| run_messages(&mtools, false))
    });
    g.bench_function("tool_calls_one_denied", |b| {
        b.iter(|| run_messages(&mtools, true))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
