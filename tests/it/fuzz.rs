//! Property and fuzz tests on stable Rust (proptest): arbitrary bytes never
//! panic the SSE decoder, any protocol's stream rewriter, the request
//! parsers or the policy loader; output stays within a bound of the input
//! under small caps; and a stream split at any byte boundary gives the same
//! output. `TOOLGATE_FUZZ_CASES` sets the number of cases (64 by default;
//! `scripts/fuzz.sh` runs many more against a release build).

use proptest::prelude::*;
use toolgate::call::Call;
use toolgate::protocol::sse::SseDecoder;
use toolgate::protocol::sync_driver::run_sync;
use toolgate::protocol::{chat, messages, responses, Options, Protocol, Rewriter};

use crate::support::*;

fn cases() -> u32 {
    std::env::var("TOOLGATE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

/// Small caps, so the memory bound is reached by the cases.
fn opts() -> Options {
    Options {
        neutral_message: "N".into(),
        max_event_bytes: 4096,
        max_call_bytes: 2048,
        max_held_bytes: 8192,
        id_key: [0; 32],
        resume: false,
        neutral_result: "R".into(),
        refusal: false,
        text_calls: false,
        early: true,
        foresee: false,
    }
}

fn rewriters() -> Vec<(&'static str, Box<dyn Rewriter>)> {
    vec![
        ("chat", Box::new(chat::stream::StreamRewriter::new(&opts()))),
        (
            "responses",
            Box::new(responses::stream::StreamRewriter::new(&opts())),
        ),
        (
            "messages",
            Box::new(messages::stream::StreamRewriter::new(&opts())),
        ),
    ]
}

/// The same rewriters with every event read the whole-tree way (where a
/// typed reader can be turned off).
fn long_rewriters() -> Vec<(&'static str, Box<dyn Rewriter>)> {
    vec![
        (
            "chat",
            Box::new(chat::stream::StreamRewriter::new(&opts()).whole_tree_only()),
        ),
        (
            "responses",
            Box::new(responses::stream::StreamRewriter::new(&opts()).whole_tree_only()),
        ),
        (
            "messages",
            Box::new(messages::stream::StreamRewriter::new(&opts()).whole_tree_only()),
        ),
    ]
}

fn run(rw: &mut dyn Rewriter, chunks: &[&[u8]], deny: &str) -> Vec<u8> {
    run_sync(rw, chunks, |c: &Call| c.name != deny).to_vec()
}

/// Pieces a provider stream is made of, valid and not, in every protocol's
/// shape: a generated stream mixes them with raw noise.
fn fragment() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        Just("shell_exec".to_string()),
        Just("get_weather".to_string()),
        "[a-z_]{1,12}",
    ];
    let args = "[ -~]{0,40}".prop_map(|s| serde_json::to_string(&s).unwrap_or_default());
    prop_oneof![
        "[ -~]{0,30}".prop_map(|t| chunk(0, serde_json::json!({"content": t}), None)),
        // Text the prefilter cannot pass: non-ASCII, raw or escaped, with a
        // role, beside logprobs.
        "[ -~éü—“你]{0,20}".prop_map(|t| chunk(0, serde_json::json!({"content": t}), None)),
        "[a-z]{0,6}".prop_map(|t| format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\\u00e9{t}\"}},\"logprobs\":{{\"content\":[]}},\"finish_reason\":null}}]}}\n\n")),
        (name, args.clone()).prop_map(|(n, a)| chunk(0, call_delta(0, "call_1", &n, &a), None)),
        args.clone().prop_map(|a| chunk(0, serde_json::json!({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}), None)),
        Just(chunk(0, serde_json::json!({}), Some("tool_calls"))),
        // OpenRouter's shape: the role again beside every fragment; Azure's:
        // empty filter results.
        args.clone().prop_map(|a| chunk(0, serde_json::json!({"content": null, "role": "assistant", "tool_calls": [{"index": 0, "function": {"arguments": a}}]}), None)),
        args.prop_map(|a| format!("data: {{\"choices\":[{{\"content_filter_results\":{{}},\"delta\":{{\"tool_calls\":[{{\"function\":{{\"arguments\":{a}}},\"index\":0}}]}},\"finish_reason\":null,\"index\":0}}]}}\n\n")),
        Just(chunk(0, serde_json::json!({"role": "tool"}), None)),
        // Finishes of other kinds and shapes: another reason, with text, of
        // another choice, written with spaces, with a native reason.
        Just(chunk(0, serde_json::json!({}), Some("stop"))),
        "[ -~]{0,10}".prop_map(|t| chunk(0, serde_json::json!({"content": t}), Some("length"))),
        Just(chunk(1, serde_json::json!({}), Some("tool_calls"))),
        Just("data: {\"id\": \"c\", \"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"tool_calls\"}]}\n\n".to_string()),
        Just("data: {\"choices\":[{\"delta\":{\"content\":\"\",\"role\":\"assistant\"},\"finish_reason\":\"tool_calls\",\"native_finish_reason\":\"STOP\"}]}\n\n".to_string()),
        Just("data: [DONE]\n\n".to_string()),
        Just(": keep-alive\n\n".to_string()),
        Just("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"shell_exec\",\"input\":{}}}\n\n".to_string()),
        Just("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n".to_string()),
        Just("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}}\n\n".to_string()),
        (0u8..2, "[ -~]{0,8}").prop_map(|(i, t)| format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{i},\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":{}}}}}\n\n", serde_json::to_string(&t).unwrap_or_default())),
        // OpenAI's shape: padding after the arguments, of any length; the
        // second written raw, so it may not be one string.
        ("[ -~]{0,10}", "[ -~]{0,8}").prop_map(|(a, p)| {
            let (a, p) = (serde_json::to_string(&a).unwrap_or_default(), serde_json::to_string(&p).unwrap_or_default());
            format!("data: {{\"id\":\"chatcmpl-t\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":{a}}}}}]}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null,\"obfuscation\":{p}}}\n\n")
        }),
        ("[ -~]{0,10}", "[ -~]{0,8}").prop_map(|(a, p)| {
            let a = serde_json::to_string(&a).unwrap_or_default();
            format!("data: {{\"id\":\"chatcmpl-t\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":{a}}}}}]}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null,\"obfuscation\":\"{p}\"}}\n\n")
        }),
        // A message holding a call block with a fragment of its input.
        Just(concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"get_weather\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\" {\\\"a\\\"\"}}\n\n",
        ).to_string()),
        // A denied call block, then text: the text block is renumbered.
        Just(concat!(
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"shell_exec\",\"input\":{}}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"after\"}}\n\n",
        ).to_string()),
        (0u8..2).prop_map(|i| format!("event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{i},\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n")),
        (0u8..2, "[ -~]{0,12}").prop_map(|(i, t)| format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{i},\"delta\":{{\"type\":\"text_delta\",\"text\":{}}}}}\n\n", serde_json::to_string(&t).unwrap_or_default())),
        (0u8..6, "[ -~]{0,8}").prop_map(|(n, t)| format!("event: response.function_call_arguments.delta\ndata: {{\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":{n},\"item_id\":\"f\",\"output_index\":0,\"delta\":{}}}\n\n", serde_json::to_string(&t).unwrap_or_default())),
        Just("event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"id\":\"f\",\"call_id\":\"c\",\"name\":\"shell_exec\",\"arguments\":\"\"}}\n\n".to_string()),
        (0u8..6, "[ -~]{0,12}").prop_map(|(n, t)| format!("event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{n},\"item_id\":\"f\",\"output_index\":0,\"content_index\":0,\"delta\":{},\"logprobs\":[]}}\n\n", serde_json::to_string(&t).unwrap_or_default())),
        Just("event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"id\":\"f\",\"call_id\":\"c\",\"name\":\"shell_exec\",\"arguments\":\"\"}}\n\n".to_string()),
        // Response envelopes: numbered or not, the call in the final output,
        // a key repeated deep in the echo.
        (0u8..6, prop_oneof![Just("created"), Just("in_progress"), Just("queued")]).prop_map(|(n, t)| format!("event: response.{t}\ndata: {{\"type\":\"response.{t}\",\"sequence_number\":{n},\"response\":{{\"id\":\"r\",\"status\":\"in_progress\",\"tools\":[{{\"type\":\"function\",\"name\":\"shell_exec\"}}],\"output\":[]}}}}\n\n")),
        prop_oneof![Just(""), Just("{}"), Just("{\\\"cmd\\\":1}")].prop_map(|a| format!("event: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"id\":\"r\",\"status\":\"completed\",\"output\":[{{\"type\":\"function_call\",\"id\":\"f\",\"call_id\":\"c\",\"name\":\"shell_exec\",\"arguments\":\"{a}\"}}],\"usage\":{{\"input_tokens\":1,\"output_tokens\":2}}}}}}\n\n")),
        Just("data: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"r\",\"tools\":[{\"name\":\"a\",\"name\":\"b\"}],\"output\":[]}}\n\n".to_string()),
        proptest::collection::vec(any::<u8>(), 0..24).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        Just("\r\n".to_string()),
        Just("\r".to_string()),
        // Fragments that repeat a call fragment but for one detail: the
        // shapes the fast readers must hand to the whole-tree parse.
        "[ -~]{0,12}".prop_map(|a| {
            let a = serde_json::to_string(&a).unwrap_or_default();
            let odd = [
                format!(r#"{{"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":{a},"arguments":"x"}}}}]}},"finish_reason":null}}]}}"#),
                format!(r#"{{"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"Arguments":{a}}}}}]}},"finish_reason":null}}]}}"#),
                format!(r#"{{"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":{a}}}}}]}},"finish_reason":"tool_calls"}}]}}"#),
                format!(r#"{{"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":{a}}}}}]}},"finish_reason":null}}],"usage":{{"total_tokens":1}}}}"#),
                format!(r#"{{"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":1,"id":"call_2","function":{{"name":"shell_exec","arguments":{a}}}}}]}},"finish_reason":null}}]}}"#),
            ];
            let pick = a.len() % odd.len();
            format!("data: {}\n\n", odd[pick])
        }),
    ]
}

/// Runs `rw` over `input` one byte at a time, its caches of the events
/// before dropped after every step: every event is read the long way. The
/// output, and each call the gate was asked about with its arguments.
fn run_uncached(rw: &mut dyn Rewriter, input: &[u8], deny: &str) -> (Vec<u8>, Vec<String>) {
    use toolgate::call::Release;
    use toolgate::protocol::Step;
    let mut out = bytes::BytesMut::new();
    let mut asked = Vec::new();
    let mut gate = |rw: &mut dyn Rewriter, out: &mut bytes::BytesMut| {
        let v: Vec<Release> = rw
            .pending()
            .iter()
            .map(|c| {
                asked.push(format!("{}({})", c.name, c.arguments));
                if c.name != deny {
                    Release::Allow
                } else {
                    Release::Withhold
                }
            })
            .collect();
        rw.resolve(&v, out);
    };
    for b in input.chunks(1) {
        rw.push(b);
        loop {
            let step = rw.process(&mut out);
            rw.compact();
            match step {
                Ok(Step::NeedMore) => break,
                Ok(Step::Gate) => gate(rw, &mut out),
                Err(e) => {
                    rw.fail(&e, false, &mut out);
                    return (out.to_vec(), asked);
                }
            }
        }
    }
    loop {
        match rw.end(&mut out) {
            Ok(Step::NeedMore) => return (out.to_vec(), asked),
            Ok(Step::Gate) => gate(rw, &mut out),
            Err(e) => {
                rw.fail(&e, false, &mut out);
                return (out.to_vec(), asked);
            }
        }
    }
}

/// [`run`], with each call the gate was asked about and its arguments.
fn run_asked(rw: &mut dyn Rewriter, chunks: &[&[u8]], deny: &str) -> (Vec<u8>, Vec<String>) {
    let mut asked = Vec::new();
    let out = run_sync(rw, chunks, |c: &Call| {
        asked.push(format!("{}({})", c.name, c.arguments));
        c.name != deny
    });
    (out.to_vec(), asked)
}

fn stream() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(fragment(), 0..24).prop_map(|f| f.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_any_split_the_same_events(input in proptest::collection::vec(any::<u8>(), 0..2048), cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
        let decode = |chunks: &[&[u8]]| {
            let mut d = SseDecoder::new(1 << 20);
            let mut out = Vec::new();
            for c in chunks {
                d.push(c);
                loop {
                    match d.next_event() {
                        Ok(Some(e)) => out.push(Ok((e.raw, e.data))),
                        Ok(None) => break,
                        Err(e) => { out.push(Err(e)); return out; }
                    }
                }
            }
            out.push(d.finish().map(|e| e.map(|e| (e.raw, e.data)).unwrap_or_default()));
            out
        };
        prop_assert_eq!(decode(&[&input]), decode(&cut_at(&input, &cuts)));
    }

    #[test]
    fn no_rewriter_panics_or_grows_past_its_caps(input in stream(), cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
        for (name, mut rw) in rewriters() {
            let out = run(rw.as_mut(), &cut_at(&input, &cuts), "shell_exec");
            // What goes out is what came in, rewritten: a bounded multiple of
            // it (a neutral turn, an error event and an end at most besides).
            prop_assert!(out.len() <= 3 * input.len() + 4096, "{}: {} bytes out of {}", name, out.len(), input.len());
        }
    }

    #[test]
    fn the_fast_readers_answer_as_the_long_way_does(input in stream()) {
        // The caches of the chunks before (a fragment that repeats the last,
        // the template) are dropped after every step on one side only.
        // The typed text readers are off on that side too.
        for ((name, mut fast), (_, mut long)) in rewriters().into_iter().zip(long_rewriters()) {
            let (a, asked_a) = run_asked(fast.as_mut(), &[&input], "shell_exec");
            let (b, asked_b) = run_uncached(long.as_mut(), &input, "shell_exec");
            prop_assert!(a == b, "{}: {} vs {}", name, String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
            prop_assert_eq!(asked_a, asked_b, "{}: the calls asked about", name);
        }
    }

    #[test]
    fn a_stream_split_anywhere_gives_the_same_output(input in stream(), cuts in proptest::collection::vec(any::<usize>(), 1..8)) {
        for ((name, mut whole), (_, mut split)) in rewriters().into_iter().zip(rewriters()) {
            let a = run(whole.as_mut(), &[&input], "shell_exec");
            let b = run(split.as_mut(), &cut_at(&input, &cuts), "shell_exec");
            prop_assert!(a == b, "{} differs when split at {:?}", name, cuts);
        }
    }

    #[test]
    fn request_parsers_take_any_bytes(input in proptest::collection::vec(any::<u8>(), 0..512), noise in fragment()) {
        let valid = chat_request(true, &["a"]).to_string();
        let mut mutated = valid.clone().into_bytes();
        let at = input.first().map_or(0, |&b| b as usize % (mutated.len() + 1));
        mutated.splice(at..at, noise.bytes());
        for p in [Protocol::Chat, Protocol::Responses, Protocol::Messages] {
            for body in [&input[..], &mutated[..], valid.as_bytes()] {
                let _ = p.parse(body);
            }
        }
    }

    #[test]
    fn the_policy_loader_takes_any_text(text in "[ -~\n]{0,400}", splice in "[ -~\n]{0,40}", at in any::<usize>()) {
        let _ = toolgate::policy::PolicySet::from_sources(&[("p.toml".into(), text)]);
        let mut mutated = toolgate::policy::DEFAULT_POLICY.to_string();
        let mut at = at % (mutated.len() + 1);
        while !mutated.is_char_boundary(at) {
            at -= 1;
        }
        mutated.insert_str(at, &splice);
        let _ = toolgate::policy::PolicySet::from_sources(&[("p.toml".into(), mutated)]);
    }
}

/// Every recorded Responses and Messages stream gives the same output with
/// its text and call deltas read typed as read the whole-tree way: every call
/// allowed, every call withheld, and only the first withheld.
#[test]
fn recorded_streams_pass_the_same_with_the_typed_readers() {
    let mut seen = 0;
    let chat = chat_fixtures()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sse"));
    for (path, api) in chat
        .map(|p| (p, "chat"))
        .chain(responses_fixtures().into_iter().map(|p| (p, "responses")))
        .chain(messages_fixtures().into_iter().map(|p| (p, "messages")))
    {
        let input = std::fs::read(&path).unwrap();
        let make = |typed: bool| -> Box<dyn Rewriter> {
            match (api, typed) {
                ("chat", true) => Box::new(chat::stream::StreamRewriter::new(&opts())),
                ("chat", false) => {
                    Box::new(chat::stream::StreamRewriter::new(&opts()).whole_tree_only())
                }
                ("responses", true) => Box::new(responses::stream::StreamRewriter::new(&opts())),
                ("responses", false) => {
                    Box::new(responses::stream::StreamRewriter::new(&opts()).whole_tree_only())
                }
                (_, true) => Box::new(messages::stream::StreamRewriter::new(&opts())),
                (_, false) => {
                    Box::new(messages::stream::StreamRewriter::new(&opts()).whole_tree_only())
                }
            }
        };
        for mode in 0..3 {
            let outputs: Vec<(Vec<u8>, Vec<String>)> = [true, false]
                .into_iter()
                .map(|typed| {
                    let mut first = None::<String>;
                    let mut asked = Vec::new();
                    let mut rw = make(typed);
                    let out = run_sync(rw.as_mut(), &[&input], |c: &Call| {
                        asked.push(format!("{} {}({})", c.id, c.name, c.arguments));
                        match mode {
                            0 => true,
                            1 => false,
                            _ => first.get_or_insert_with(|| c.id.clone()) != &c.id,
                        }
                    });
                    (out.to_vec(), asked)
                })
                .collect();
            assert_eq!(outputs[0].1, outputs[1].1, "{}: the calls", path.display());
            if api != "chat" {
                assert!(!outputs[0].1.is_empty(), "{}: no call", path.display());
            }
            assert!(
                outputs[0].0 == outputs[1].0,
                "{} (mode {mode}) differs:\n{}\nvs\n{}",
                path.display(),
                String::from_utf8_lossy(&outputs[0].0),
                String::from_utf8_lossy(&outputs[1].0)
            );
        }
        seen += 1;
    }
    if std::env::var("TOOLGATE_REQUIRE_FIXTURES").is_ok() {
        assert!(seen >= 10, "only {seen} recorded streams");
    }
}
