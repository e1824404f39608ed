//! Tests of the scan for tool calls written as text.

use super::*;

/// Streams `parts` through a scan: what went out, and what was held.
fn scan(parts: &[&str]) -> (String, Option<String>) {
    let mut s = TextScan::default();
    let mut out = String::new();
    for p in parts {
        out.push_str(&s.push(p));
    }
    out.push_str(&s.take_tail());
    (out, s.take_held())
}

#[test]
fn text_without_a_marker_goes_out_whole_even_when_it_ends_like_one() {
    assert_eq!(scan(&["Hello ", "world"]), ("Hello world".into(), None));
    // `<tool` could have begun a marker; at the end it is text.
    assert_eq!(scan(&["a <tool"]), ("a <tool".into(), None));
    assert_eq!(scan(&["x [TOOL_", "y"]), ("x [TOOL_y".into(), None));
}

#[test]
fn a_marker_split_across_deltas_is_held_from_its_first_byte() {
    let mut s = TextScan::default();
    assert_eq!(s.push("Let me check. <tool"), "Let me check. ");
    assert_eq!(s.push("_ca"), "");
    assert_eq!(s.push("ll>{\"name\""), "");
    assert!(s.holds_call());
    assert_eq!(s.push(": \"x\"}</tool_call> done"), "");
    assert_eq!(
        s.take_held().as_deref(),
        Some("<tool_call>{\"name\": \"x\"}</tool_call> done")
    );
}

#[test]
fn each_format_is_read_into_calls() {
    let hermes = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    let llama = "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eom_id|>";
    let mistral = "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]";
    let mistral11 = "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}";
    for text in [hermes, llama, mistral, mistral11] {
        let pieces = split(text);
        let calls = calls(&pieces, 0);
        assert_eq!(calls.len(), 1, "{text}");
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].kind, Kind::Function);
        assert_eq!(calls[0].arguments, r#"{"city":"Paris"}"#);
        assert_eq!(rebuild(&pieces, |_| true), (text.to_string(), 1));
    }
}

#[test]
fn a_withheld_block_is_taken_out_and_the_text_around_it_stays() {
    let text = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\nthen\n<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";
    let pieces = split(text);
    let c = calls(&pieces, 2);
    assert_eq!(
        c.iter()
            .map(|c| (c.name.as_str(), c.id.as_str(), c.choice))
            .collect::<Vec<_>>(),
        [("a", "text-2-0", 2), ("b", "text-2-1", 2)]
    );
    assert_eq!(
        rebuild(&pieces, |i| i == 1),
        (
            "\nthen\n<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>".into(),
            1
        )
    );
    assert_eq!(rebuild(&pieces, |_| false), ("\nthen\n".into(), 0));
}

#[test]
fn a_mistral_list_is_written_back_with_its_allowed_calls_only() {
    let text =
        r#"[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]"#;
    let pieces = split(text);
    assert_eq!(count(&pieces), 2);
    assert_eq!(
        rebuild(&pieces, |i| i == 0),
        (
            r#"[TOOL_CALLS][{"arguments":{"x":1},"name":"a"}]"#.into(),
            1
        )
    );
    assert_eq!(rebuild(&pieces, |_| false), (String::new(), 0));
}

#[test]
fn what_cannot_be_read_is_one_call_always_withheld() {
    for text in [
        "<tool_call>{\"name\": \"a\", \"arguments\": {}",
        "<tool_call>{\"name\": \"a\", \"name\": \"b\"}</tool_call>",
        "<tool_call>{\"arguments\": {}}</tool_call>",
        "<|python_tag|>brave_search.call(query=\"x\")",
        "[TOOL_CALLS][{\"name\": \"a\"}, 3]",
        "[TOOL_CALLS]rm -rf[ARGS]{}",
        "[TOOL_CALLS]",
    ] {
        let pieces = split(text);
        let c = calls(&pieces, 0);
        assert_eq!(c.len(), 1, "{text}");
        assert_eq!(
            c[0].kind,
            Kind::Other("unreadable text call".into()),
            "{text}"
        );
        assert_eq!(count(&pieces), 1);
        // Even an allow leaves it out: it has no call to write back.
        assert_eq!(rebuild(&pieces, |_| true), (String::new(), 0), "{text}");
    }
}

#[test]
fn arguments_written_as_a_string_are_taken_as_they_are() {
    let pieces = split(r#"<tool_call>{"name": "a", "arguments": "{\"q\": 1}"}</tool_call>"#);
    assert_eq!(calls(&pieces, 0)[0].arguments, r#"{"q": 1}"#);
}
