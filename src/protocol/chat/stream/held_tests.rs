//! Unit tests of what a held chunk sends: a finish behind held calls, and a
//! role a provider repeats beside every held fragment.

use super::tests::{calls, chunk, events, finishes, opts, run};
use super::*;
use serde_json::Value;

#[test]
fn a_held_finish_goes_on_as_it_came_unless_the_gate_changes_it() {
    let call = chunk(
        r#"{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"first","arguments":"{}"}}]}"#,
        "null",
    );
    // Written with spaces: a tree written again would lose them. The second
    // shape is one the typed reader leaves to the tree (a usage object).
    for finish in [
        "data: {\"id\": \"c1\", \"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"tool_calls\"}]}\n\n",
        "data: {\"id\": \"c1\", \"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"tool_calls\"}], \"usage\": {\"total_tokens\": 3}}\n\n",
    ] {
        let input = format!("{call}{finish}data: [DONE]\n\n");
        for whole_tree in [false, true] {
            let mut rw = StreamRewriter::new(&opts());
            if whole_tree {
                rw = rw.whole_tree_only();
            }
            let out = crate::protocol::sync_driver::testing::run_denying(&mut rw, &input, &[]);
            assert!(
                out.ends_with(&format!("{finish}data: [DONE]\n\n")),
                "allowed, the finish is as it came: {out}"
            );
            assert_eq!(calls(&out).len(), 1);
            let mut rw = StreamRewriter::new(&opts());
            if whole_tree {
                rw = rw.whole_tree_only();
            }
            let out =
                crate::protocol::sync_driver::testing::run_denying(&mut rw, &input, &["first"]);
            assert!(calls(&out).is_empty(), "{out}");
            assert_eq!(finishes(&out), ["stop"], "denied, the finish is rewritten");
            assert!(!out.contains("\"tool_calls\""), "{out}");
        }
    }
}

#[test]
fn a_finish_without_calls_passes_and_a_later_one_says_the_same() {
    let input = [
        chunk(r#"{"content":"hi"}"#, "null"),
        "data: {\"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"stop\"}]}\n\n"
            .to_string(),
        chunk("{}", "\"length\""),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let out = run(&input, &[]);
    assert!(
        out.contains("\"delta\": {}, \"finish_reason\": \"stop\"}]}\n\n"),
        "{out}"
    );
    assert_eq!(
        finishes(&out),
        ["stop", "stop"],
        "a later finish repeats the first"
    );
}

/// OpenRouter repeats `"content":null,"role":"assistant"` in every chunk.
fn role_in_every_chunk() -> String {
    let c = |delta: &str, finish: &str| {
        format!("data: {{\"id\":\"gen-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"provider\":\"P\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish},\"native_finish_reason\":{finish}}}]}}\n\n")
    };
    [
        c(r#"{"content":null,"role":"assistant","tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"first","arguments":""}}]}"#, "null"),
        c(r#"{"content":null,"role":"assistant","tool_calls":[{"index":0,"function":{"arguments":"{\"x\""}}]}"#, "null"),
        c(r#"{"content":null,"role":"assistant","tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}"#, "null"),
        c(r#"{"content":null,"role":"assistant","tool_calls":[{"index":0,"function":{"arguments":""}}]}"#, "null"),
        c(r#"{"content":"","role":"assistant"}"#, "\"tool_calls\""),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat()
}

#[test]
fn a_role_repeated_beside_held_fragments_is_sent_once() {
    let input = role_in_every_chunk();
    for whole_tree in [false, true] {
        for deny in [&[][..], &["first"][..]] {
            let mut rw = StreamRewriter::new(&opts());
            if whole_tree {
                rw = rw.whole_tree_only();
            }
            let out = crate::protocol::sync_driver::testing::run_denying(&mut rw, &input, deny);
            let evs = events(&out);
            let roles: Vec<&Value> = evs
                .iter()
                .filter_map(|e| e["choices"][0]["delta"].get("role"))
                .collect();
            // The first chunk's, stripped of its call; the finish chunk
            // carries its own as it came.
            assert_eq!(roles.len(), 2, "{out}");
            assert_eq!(
                evs[0]["choices"][0]["delta"],
                serde_json::json!({"content": null, "role": "assistant"})
            );
            let n = if deny.is_empty() { 1 } else { 0 };
            assert_eq!(calls(&out).len(), n, "{out}");
            // Nothing went out for the fragments: the first chunk, the call
            // or the neutral text, the finish.
            assert_eq!(evs.len(), 3, "{out}");
        }
    }
}
