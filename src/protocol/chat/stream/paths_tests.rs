//! Unit tests that the typed readers and the whole-tree path agree on what
//! they both read: usage wherever it comes, text the prefilter cannot pass.

use super::tests::{calls, chunk, opts};
use super::*;
use crate::protocol::sync_driver::RunSync;

#[test]
fn usage_is_counted_wherever_it_comes_on_both_paths() {
    let usage = r#""usage":{"prompt_tokens":7,"completion_tokens":3}"#;
    let with_usage = |c: String| c.replacen("]}\n\n", &format!("],{usage}}}\n\n"), 1);
    let frag = |a: &str| {
        chunk(
            &format!(r#"{{"tool_calls":[{{"index":0,"function":{{"arguments":"{a}"}}}}]}}"#),
            "null",
        )
    };
    let head = chunk(
        r#"{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":""}}]}"#,
        "null",
    );
    let done = "data: [DONE]\n\n".to_string();
    let cases = [
        // OpenAI's own chunk: no choices, after the finish.
        [
            head.clone(),
            frag("{}"),
            chunk("{}", "\"tool_calls\""),
            format!("data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[],{usage}}}\n\n"),
            done.clone(),
        ],
        // In the finish chunk.
        [
            head.clone(),
            frag("{"),
            frag("}"),
            with_usage(chunk("{}", "\"tool_calls\"")),
            done.clone(),
        ],
        // In a fragment, which then is not read typed.
        [
            head.clone(),
            frag("{"),
            with_usage(frag("}")),
            chunk("{}", "\"tool_calls\""),
            done.clone(),
        ],
        // In a text chunk that passes as it came.
        [
            with_usage(chunk(r#"{"content":"hi"}"#, "null")),
            head.clone(),
            frag("{}"),
            chunk("{}", "\"tool_calls\""),
            done.clone(),
        ],
    ];
    for (i, case) in cases.iter().enumerate() {
        let input = case.concat();
        for typed in [true, false] {
            let mut rw = StreamRewriter::new(&opts());
            if !typed {
                rw = rw.whole_tree_only();
            }
            let out = rw.run_sync(&[input.as_bytes()], |_| true);
            let out = std::str::from_utf8(&out).unwrap();
            assert_eq!(calls(out).len(), 1, "case {i}, typed {typed}: {out}");
            let u = rw.totals().usage;
            assert_eq!((u.input, u.output), (7, 3), "case {i}, typed {typed}");
        }
    }
}

/// The stream's output read typed and whole-tree, `allow` for every call.
fn both(input: &str, allow: bool) -> String {
    let outs: Vec<String> = [true, false]
        .map(|typed| {
            let mut rw = StreamRewriter::new(&opts());
            if !typed {
                rw = rw.whole_tree_only();
            }
            let out = rw.run_sync(&[input.as_bytes()], |_| allow);
            String::from_utf8_lossy(&out).into_owned()
        })
        .into();
    assert_eq!(outs[0], outs[1], "typed and whole-tree differ on:\n{input}");
    outs[0].clone()
}

#[test]
fn non_ascii_and_escaped_text_passes_as_it_came_on_both_paths() {
    let texts = [
        chunk(r#"{"role":"assistant","content":"Réponse — “ok”"}"#, "null"),
        chunk(r#"{"content":"\u4f60\u597d"}"#, "null"),
        // OpenRouter repeats the role.
        chunk(r#"{"role":"assistant","content":"ü"}"#, "null"),
    ];
    let call = [
        chunk(
            r#"{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{\"q\":\"é\"}"}}]}"#,
            "null",
        ),
        chunk("{}", "\"tool_calls\""),
        "data: [DONE]\n\n".to_string(),
    ];
    let input = [&texts[..], &call[..]].concat().concat();
    for allow in [true, false] {
        let out = both(&input, allow);
        assert!(
            out.starts_with(&texts.concat()),
            "text first, as it came: {out}"
        );
        assert_eq!(calls(&out).len(), usize::from(allow), "{out}");
    }
}
