//! Unit tests of the streaming rewriter over small hand-written streams.

use super::*;
use serde_json::Value;

use crate::protocol::sync_driver::RunSync;

pub(super) fn opts() -> Options {
    crate::protocol::sync_driver::testing::options()
}

pub(super) fn run(input: &str, deny: &[&str]) -> String {
    crate::protocol::sync_driver::testing::run_denying(
        &mut StreamRewriter::new(&opts()),
        input,
        deny,
    )
}

/// A verdict for each pending call: withheld when `deny` names its tool.
pub(super) fn verdicts(rw: &StreamRewriter, deny: &[&str]) -> Vec<Release> {
    rw.pending()
        .iter()
        .map(|c| match deny.contains(&c.name.as_str()) {
            true => Release::Withhold,
            false => Release::Allow,
        })
        .collect()
}

pub(super) fn events(out: &str) -> Vec<Value> {
    out.split("\n\n")
        .filter_map(|b| b.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

pub(super) fn chunk(delta: &str, finish: &str) -> String {
    format!("data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n")
}

fn two_calls() -> String {
    [
        chunk(r#"{"role":"assistant","content":"Hi "}"#, "null"),
        chunk(r#"{"content":"there"}"#, "null"),
        chunk(r#"{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"first","arguments":""}}]}"#, "null"),
        chunk(r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]}"#, "null"),
        chunk(r#"{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}"#, "null"),
        chunk(r#"{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"second","arguments":"{}"}}]}"#, "null"),
        chunk("{}", "\"tool_calls\""),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat()
}

pub(super) fn calls(out: &str) -> Vec<(u64, String, String, String)> {
    events(out)
        .iter()
        .flat_map(|e| {
            e["choices"][0]["delta"]["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|t| {
            (
                t["index"].as_u64().unwrap(),
                t["id"].as_str().unwrap().to_string(),
                t["function"]["name"].as_str().unwrap().to_string(),
                t["function"]["arguments"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

pub(super) fn finishes(out: &str) -> Vec<String> {
    events(out)
        .iter()
        .filter_map(|e| e["choices"][0]["finish_reason"].as_str().map(String::from))
        .collect()
}

#[test]
fn text_events_pass_byte_for_byte_before_any_call() {
    let input = two_calls();
    let out = run(&input, &[]);
    let first_two = [
        chunk(r#"{"role":"assistant","content":"Hi "}"#, "null"),
        chunk(r#"{"content":"there"}"#, "null"),
    ]
    .concat();
    assert!(out.starts_with(&first_two));
    assert!(out.ends_with("data: [DONE]\n\n"));
}

#[test]
fn all_allowed_calls_come_out_whole() {
    let out = run(&two_calls(), &[]);
    assert_eq!(
        calls(&out),
        [
            (0, "a".into(), "first".into(), "{\"x\":1}".into()),
            (1, "b".into(), "second".into(), "{}".into())
        ]
    );
    assert_eq!(finishes(&out), ["tool_calls"]);
    assert!(!out.contains("NEUTRAL"));
}

#[test]
fn a_denied_call_vanishes_and_indices_are_renumbered() {
    let out = run(&two_calls(), &["first"]);
    assert_eq!(calls(&out), [(0, "b".into(), "second".into(), "{}".into())]);
    assert!(!out.contains("first") && !out.contains("\"a\""));
    assert_eq!(finishes(&out), ["tool_calls"]);
}

#[test]
fn nothing_left_gives_the_neutral_message_and_stop() {
    let out = run(&two_calls(), &["first", "second"]);
    assert!(calls(&out).is_empty());
    assert!(out.contains("\"content\":\"\\n\\nNEUTRAL\""), "{out}");
    assert_eq!(finishes(&out), ["stop"]);
    assert!(!out.contains("tool_calls"), "{out}");
}

#[test]
fn a_duplicate_finish_is_rewritten_the_same_way() {
    let mut input = two_calls();
    input = input.replace(
        "data: [DONE]",
        &format!(
            "{}data: [DONE]",
            chunk("{}", "\"tool_calls\"")
                .trim_end_matches('\n')
                .to_string()
                + "\n\n"
        ),
    );
    let out = run(&input, &["first", "second"]);
    assert_eq!(finishes(&out), ["stop", "stop"]);
}

#[test]
fn done_without_finish_gates_and_releases() {
    let input = [
        chunk(r#"{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}"#, "null"),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let out = run(&input, &[]);
    assert_eq!(calls(&out).len(), 1);
    assert_eq!(finishes(&out), ["tool_calls"]);
    assert!(out.ends_with("data: [DONE]\n\n"));
}

#[test]
fn a_stream_cut_before_its_finish_never_releases_a_call_not_complete() {
    let input = chunk(
        r#"{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}"#,
        "null",
    );
    let out = run(&input, &[]);
    assert!(calls(&out).is_empty());
    assert!(out.contains("\"error\""), "{out}");
    assert!(out.ends_with("data: [DONE]\n\n"));
    // A complete call went out when it completed; the cut still ends the
    // stream with an error.
    let input = chunk(
        r#"{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}"#,
        "null",
    );
    let out = run(&input, &[]);
    assert_eq!(calls(&out).len(), 1, "{out}");
    assert!(finishes(&out).is_empty(), "{out}");
    assert!(out.contains("\"error\""), "{out}");
    assert!(out.ends_with("data: [DONE]\n\n"));
}

#[test]
fn an_error_object_mid_stream_drops_held_calls() {
    let input = [
        chunk(r#"{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}"#, "null"),
        "data: {\"error\":{\"message\":\"upstream secret detail\"}}\n\n".into(),
    ]
    .concat();
    let out = run(&input, &[]);
    assert!(calls(&out).is_empty());
    assert!(!out.contains("secret detail"));
    assert!(out.contains("\"error\""));
}

#[test]
fn legacy_function_call_is_gated() {
    let input = [
        chunk(
            r#"{"role":"assistant","content":null,"function_call":{"name":"repl","arguments":""}}"#,
            "null",
        ),
        chunk(r#"{"function_call":{"arguments":"{\"c\":1}"}}"#, "null"),
        chunk("{}", "\"function_call\""),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let out = run(&input, &[]);
    let ev = events(&out);
    let fc: Vec<_> = ev
        .iter()
        .filter_map(|e| e["choices"][0]["delta"].get("function_call"))
        .collect();
    assert_eq!(fc.len(), 1);
    assert_eq!(fc[0]["arguments"], "{\"c\":1}");
    assert_eq!(finishes(&out), ["function_call"]);
    let out = run(&input, &["repl"]);
    assert!(!out.contains("function_call\":{"), "{out}");
    assert_eq!(finishes(&out), ["stop"]);
}

#[test]
fn two_choices_are_gated_separately() {
    let c = |i: u32, delta: &str, finish: &str| {
        format!("data: {{\"id\":\"c\",\"choices\":[{{\"index\":{i},\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n")
    };
    let input = [
        c(
            0,
            r#"{"tool_calls":[{"index":0,"id":"a","function":{"name":"keep","arguments":"{}"}}]}"#,
            "null",
        ),
        c(
            1,
            r#"{"tool_calls":[{"index":0,"id":"b","function":{"name":"drop","arguments":"{}"}}]}"#,
            "null",
        ),
        c(0, "{}", "\"tool_calls\""),
        c(1, "{}", "\"tool_calls\""),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let out = run(&input, &["drop"]);
    let ev = events(&out);
    let per_choice: Vec<(u64, Option<String>, Option<String>)> = ev
        .iter()
        .map(|e| {
            let ch = &e["choices"][0];
            (
                ch["index"].as_u64().unwrap(),
                ch["delta"]["tool_calls"][0]["function"]["name"]
                    .as_str()
                    .map(String::from),
                ch["finish_reason"].as_str().map(String::from),
            )
        })
        .collect();
    assert!(per_choice.contains(&(0, Some("keep".into()), None)));
    assert!(per_choice.contains(&(0, None, Some("tool_calls".into()))));
    assert!(per_choice.contains(&(1, None, Some("stop".into()))));
    assert!(!out.contains("drop"));
}

#[test]
fn late_tool_deltas_after_a_finish_are_stripped() {
    let input = [
        chunk(r#"{"content":"done"}"#, "\"stop\""),
        chunk(r#"{"tool_calls":[{"index":0,"id":"x","function":{"name":"sneaky","arguments":"{}"}}]}"#, "null"),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let mut rw = StreamRewriter::new(&opts());
    let out = rw.run_sync(&[input.as_bytes()], |_| true);
    assert!(!String::from_utf8_lossy(&out).contains("sneaky"));
    assert_eq!(rw.totals().late_deltas, 1);
}

#[test]
fn an_escaped_key_is_still_seen() {
    let input = [
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool\\u005fcalls\":[{\"index\":0,\"id\":\"x\",\"function\":{\"name\":\"hidden\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    ]
    .concat();
    let out = run(&input, &["hidden"]);
    assert!(!out.contains("hidden"), "{out}");
    assert_eq!(finishes(&out), ["stop"]);
}

#[test]
fn malformed_json_that_mentions_tool_calls_fails_closed() {
    let input = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\n\ndata: [DONE]\n\n";
    let out = run(input, &[]);
    assert!(out.contains("\"error\""));
}

#[test]
fn error_event_type_fails_closed_and_passthrough_keeps_the_body() {
    let input = "event: error\ndata: {\"error\":{\"message\":\"boom\"}}\n\n";
    let mut rw = StreamRewriter::new(&opts());
    let mut out = BytesMut::new();
    rw.push(input.as_bytes());
    let err = rw.process(&mut out).unwrap_err();
    rw.fail(&err, true, &mut out);
    assert!(String::from_utf8_lossy(&out).contains("boom"));
    assert!(!run(input, &[]).contains("boom"));
}

#[test]
fn oversized_arguments_reach_the_gate_marked() {
    let mut o = opts();
    o.max_call_bytes = 4;
    let mut rw = StreamRewriter::new(&o);
    let mut seen = Vec::new();
    rw.run_sync(&[two_calls().as_bytes()], |c| {
        seen.push((c.name.clone(), c.oversized));
        true
    });
    assert_eq!(seen, [("first".into(), true), ("second".into(), false)]);
}

#[test]
fn a_call_hidden_behind_a_repeated_key_fails_the_stream() {
    // A tree keeps the last `tool_calls` (null); a reader that keeps the
    // first would run the call. The stream fails closed instead.
    let hidden = r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"shell","arguments":"{}"}}],"tool_calls":null},"finish_reason":null}]}"#;
    let input = format!(
        "{hidden}\n\n{}data: [DONE]\n\n",
        chunk("{}", "\"tool_calls\"")
    );
    let out = run(&input, &[]);
    assert!(!out.contains("shell"), "{out}");
    assert!(out.contains("\"error\""), "{out}");
}

/// The first chunk of call `a` (`get`), its arguments empty.
fn call_header() -> String {
    chunk(
        r#"{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"get","arguments":""}}]}"#,
        "null",
    )
}

/// A fragment of call 0 whose `arguments` is the JSON text `a`.
fn frag(a: &str) -> String {
    chunk(
        &format!(r#"{{"tool_calls":[{{"index":0,"function":{{"arguments":{a}}}}}]}}"#),
        "null",
    )
}

#[test]
fn fragments_that_repeat_the_chunk_before_are_assembled_the_same_way() {
    let input = [
        call_header(),
        frag(r#""{\"q\":""#),
        frag(r#""\"Par""#),
        frag(r#""is \u00e9\"""#),
        frag(r#""}""#),
        chunk("{}", "\"tool_calls\""),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let out = run(&input, &[]);
    assert_eq!(
        calls(&out),
        [(0, "a".into(), "get".into(), "{\"q\":\"Paris é\"}".into())]
    );
}

#[test]
fn a_fragment_that_smuggles_a_key_into_its_repeat_fails_the_stream() {
    let input = [
        call_header(),
        frag(r#""{\"a\":""#),
        // Byte for byte the chunk before, but its "string" closes early and
        // a second `arguments` follows: a repeated key, never a repeat.
        frag(r#""x","arguments":"{}""#),
        chunk("{}", "\"tool_calls\""),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let out = run(&input, &[]);
    assert!(calls(&out).is_empty(), "{out}");
    assert!(out.contains("\"error\""), "{out}");
}

#[test]
fn held_reasoning_counts_against_the_held_limit_and_a_choice_without_calls_gets_it_back() {
    let entry = |id: &str| {
        format!(
            r#"{{"reasoning_details":[{{"type":"reasoning.encrypted","data":"{}","id":"{id}"}}]}}"#,
            "x".repeat(400)
        )
    };
    // Without calls, the held entries go out with the finish.
    let input = [
        chunk(&entry("r1"), "null"),
        chunk(r#"{"content":"ok"}"#, "\"stop\""),
    ]
    .concat();
    let out = run(&input, &[]);
    let finish = events(&out)
        .into_iter()
        .find(|e| e["choices"][0]["finish_reason"] == "stop")
        .unwrap();
    assert_eq!(
        finish["choices"][0]["delta"]["reasoning_details"][0]["id"], "r1",
        "{out}"
    );
    let mut rw = StreamRewriter::new(&opts());
    rw.push(chunk(&entry("r1"), "null").as_bytes());
    let _ = rw.process(&mut BytesMut::new());
    assert!(
        rw.held_bytes() > 400,
        "held reasoning is counted: {}",
        rw.held_bytes()
    );
    // Past the stream's held limit, the stream fails closed.
    let small = Options {
        max_held_bytes: 1000,
        ..opts()
    };
    let many: String = (0..5)
        .map(|i| chunk(&entry(&format!("r{i}")), "null"))
        .collect();
    let out = crate::protocol::sync_driver::testing::run_denying(
        &mut StreamRewriter::new(&small),
        &many,
        &[],
    );
    assert!(out.contains("\"error\""), "{out}");
}

#[test]
fn a_stream_compacted_while_its_gate_is_slow_comes_out_the_same() {
    // The finish chunk carries more than its choice and the second call's
    // last fragment: it is held, written out by `compact` and read back at
    // the release. (The first call, complete before, had a gate of its own.)
    let input = two_calls()
        .replace(
            r#""name":"second","arguments":"{}""#,
            r#""name":"second","arguments":"{""#,
        )
        .replace(
            "\"delta\":{},\"finish_reason\":\"tool_calls\"}]}",
            "\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"}\"}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"total_tokens\":7},\"system_fingerprint\":\"fp\"}",
        );
    for deny in [&[][..], &["first"], &["first", "second"]] {
        let plain = run(&input, deny);
        let mut rw = StreamRewriter::new(&opts());
        let mut out = BytesMut::new();
        let mut gates = 0;
        rw.push(input.as_bytes());
        loop {
            match rw.process(&mut out).unwrap() {
                Step::NeedMore => break,
                Step::Gate => {
                    gates += 1;
                    rw.compact();
                    let verdicts = verdicts(&rw, deny);
                    rw.resolve(&verdicts, &mut out);
                }
            }
        }
        assert!(matches!(rw.end(&mut out).unwrap(), Step::NeedMore));
        assert_eq!(gates, 2);
        assert_eq!(String::from_utf8(out.to_vec()).unwrap(), plain, "{deny:?}");
        assert!(plain.contains("\"system_fingerprint\":\"fp\""), "{plain}");
    }
}
