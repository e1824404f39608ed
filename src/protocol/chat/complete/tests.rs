//! Unit tests of the whole-body chat rewriter.
use super::*;
use crate::protocol::Complete;
use serde_json::{json, Value};

fn body() -> String {
    json!({"id":"x","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
    "tool_calls":[
        {"id":"a","type":"function","function":{"name":"one","arguments":"{}"}},
        {"id":"b","type":"function","function":{"name":"two","arguments":"{\"k\":1}"},"extra_content":{"g":1}}
    ]}}]}).to_string()
}

fn verdicts(allowed: &[bool]) -> Vec<Release> {
    allowed
        .iter()
        .map(|&a| if a { Release::Allow } else { Release::Withhold })
        .collect()
}

fn rewrite(text: &str, allowed: &[bool]) -> Value {
    let allowed = &verdicts(allowed)[..];
    let c = Body::parse(text, 1024).unwrap();
    let mut out = String::new();
    assert!(c.rewrite(allowed, "N", &mut out));
    // The same through the splicing sink, with every kept value sliced.
    let body = bytes::Bytes::copy_from_slice(text.as_bytes());
    let base = std::str::from_utf8(&body).unwrap();
    let again = Body::parse(base, 1024).unwrap();
    let mut spliced = crate::json::Spliced::new(base, &body).slicing_all();
    again.rewrite(allowed, "N", &mut spliced);
    let joined: Vec<u8> = spliced.finish().concat();
    assert_eq!(joined, out.as_bytes());
    serde_json::from_str(&out).unwrap()
}

#[test]
fn finds_calls_in_order() {
    let b = body();
    let c = Body::parse(&b, 1024).unwrap();
    let c = c.calls();
    assert_eq!(c.len(), 2);
    assert_eq!(
        (
            c[1].id.as_str(),
            c[1].name.as_str(),
            c[1].arguments.as_str()
        ),
        ("b", "two", "{\"k\":1}")
    );
}

#[test]
fn all_allowed_means_unchanged() {
    let b = body();
    assert!(!Body::parse(&b, 1024).unwrap().rewrite(
        &verdicts(&[true, true]),
        "N",
        &mut String::new()
    ));
}

#[test]
fn a_rejected_call_is_removed_and_others_kept_verbatim() {
    let b = rewrite(&body(), &[false, true]);
    let tc = b["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(tc.len(), 1);
    assert_eq!(tc[0]["id"], "b");
    assert_eq!(tc[0]["extra_content"], json!({"g":1}));
    assert_eq!(b["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(b["id"], "x");
}

#[test]
fn nothing_left_gives_the_neutral_message() {
    let b = rewrite(&body(), &[false, false]);
    let m = &b["choices"][0]["message"];
    assert!(m.get("tool_calls").is_none());
    assert_eq!(m["content"], "N");
    assert_eq!(b["choices"][0]["finish_reason"], "stop");
}

#[test]
fn the_neutral_text_follows_the_content_escapes_and_all() {
    // Raw JSON content, as a provider may escape it.
    for (content, want) in [
        (
            r#""said \"hi\" \u00e9\n""#,
            json!("said \"hi\" \u{e9}\n\n\nN \"q\""),
        ),
        (r#""""#, json!("N \"q\"")),
        ("null", json!("N \"q\"")),
        // Content in parts keeps them, and the neutral text is one more.
        (
            r#"[{"type":"text","text":"parts"}]"#,
            json!([{"type":"text","text":"parts"},{"type":"text","text":"N \"q\""}]),
        ),
    ] {
        let t = format!(
            r#"{{"choices":[{{"index":0,"finish_reason":"tool_calls","message":{{"role":"assistant","content":{content},"tool_calls":[{{"id":"a","function":{{"name":"x","arguments":"{{}}"}}}}]}}}}]}}"#
        );
        let c = Body::parse(&t, 1024).unwrap();
        let mut out = String::new();
        assert!(c.rewrite(&[Release::Withhold], "N \"q\"", &mut out));
        let b: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(b["choices"][0]["message"]["content"], want, "{out}");
    }
}

#[test]
fn structured_output_gets_the_neutral_text_as_a_refusal() {
    let t = json!({"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{}"}}]}}]}).to_string();
    let mut c = Body::parse(&t, 1024).unwrap();
    c.refuse(true);
    let mut out = String::new();
    assert!(c.rewrite(&[Release::Withhold], "N", &mut out));
    let b: serde_json::Value = serde_json::from_str(&out).unwrap();
    let m = &b["choices"][0]["message"];
    assert_eq!(
        (m["refusal"].as_str(), &m["content"]),
        (Some("N"), &json!(null)),
        "{b}"
    );
    assert_eq!(
        out.matches("\"refusal\"").count(),
        1,
        "one refusal key: {out}"
    );
    assert!(m.get("tool_calls").is_none());
}

#[test]
fn legacy_function_call_is_found_and_removed() {
    let t = json!({"choices":[{"index":0,"finish_reason":"function_call","message":{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}}}]}).to_string();
    let c = Body::parse(&t, 1024).unwrap();
    assert_eq!(c.calls()[0].name, "f");
    let b = rewrite(&t, &[false]);
    assert!(b["choices"][0]["message"].get("function_call").is_none());
    assert_eq!(b["choices"][0]["finish_reason"], "stop");
}

#[test]
fn verdicts_follow_each_choice_in_order() {
    let t = json!({"choices":[
        {"index":0,"message":{"tool_calls":[{"id":"a","function":{"name":"ok","arguments":"{}"}}]}},
        {"index":1,"message":{"tool_calls":[{"id":"b","function":{"name":"bad","arguments":"{}"}}]}}
    ]})
    .to_string();
    let b = rewrite(&t, &[true, false]);
    assert_eq!(b["choices"][0]["message"]["tool_calls"][0]["id"], "a");
    assert_eq!(b["choices"][1]["message"]["content"], "N");
}

#[test]
fn errors_bad_shapes_and_ambiguity_fail() {
    let parse = |v: Value| Body::parse(&v.to_string(), 10).err();
    assert!(matches!(
        parse(json!({"error":{"message":"x"}})),
        Some(Error::UpstreamEvent(_))
    ));
    assert!(Body::parse("[1]", 10).is_err());
    for bad in [
        json!({"choices":[{"message":{"tool_calls":{}}}]}),
        json!({"choices":[{"index":0,"message":{}},{"index":0,"message":{}}]}),
        json!({"choices":[{"index":3,"message":{}}]}),
        json!({"choices":[{"message":{"TOOL_CALLS":[]}}]}),
        json!({"choices":[{"message":{"tool_callſ":[]}}]}),
        json!({"choices":[{"message":{"tool_calls":[{"function":{"Name":"x"}}]}}]}),
        json!({"Choices":[]}),
    ] {
        assert!(parse(bad.clone()).is_some(), "{bad}");
    }
    assert!(
        Body::parse(r#"{"choices":[],"choices":[]}"#, 10).is_err(),
        "a repeated key"
    );
    // Repeated keys in members toolgate does not read go on as they came
    // when the body is unchanged: refused at any depth.
    for bad in [
        r#"{"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens":9}}"#,
        r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi","audio":{"id":"a","id":"b"}}}]}"#,
        r#"{"choices":[{"index":0,"logprobs":{"content":[{"token":"a","token":"b"}]},"message":{"content":"hi"}}]}"#,
    ] {
        assert!(Body::parse(bad, 10).is_err(), "{bad}");
    }
}

fn text_body(content: &str) -> String {
    json!({"id":"x","choices":[{"index":0,"finish_reason":"stop",
        "message":{"role":"assistant","content":content}}]})
    .to_string()
}

fn text_rewrite(text: &str, allowed: &[bool]) -> (Vec<String>, Option<Value>) {
    let mut c = Body::parse(text, 1024).unwrap();
    c.read_text_calls();
    let names = c.calls().iter().map(|c| c.name.clone()).collect();
    let mut out = String::new();
    let changed = c.rewrite(&verdicts(allowed), "N", &mut out);
    (names, changed.then(|| serde_json::from_str(&out).unwrap()))
}

#[test]
fn calls_written_as_text_are_read_only_when_asked() {
    let b = text_body("ok <tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>");
    assert!(Body::parse(&b, 1024).unwrap().calls().is_empty());
    let (names, unchanged) = text_rewrite(&b, &[true]);
    assert_eq!(names, ["shell"]);
    assert_eq!(unchanged, None);
}

#[test]
fn a_withheld_text_call_leaves_the_content_before_it_and_the_neutral_text() {
    let b = text_body("ok <tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>");
    let (_, out) = text_rewrite(&b, &[false]);
    let out = out.unwrap();
    assert_eq!(out["choices"][0]["message"]["content"], "ok \n\nN");
    assert_eq!(out["choices"][0]["finish_reason"], "stop");
}

#[test]
fn text_calls_follow_their_choices_structured_calls() {
    let b = json!({"choices":[{"index":0,"finish_reason":"tool_calls","message":{
        "content":"[TOOL_CALLS]shell[ARGS]{}",
        "tool_calls":[{"id":"a","type":"function","function":{"name":"one","arguments":"{}"}}]}}]})
    .to_string();
    let (names, out) = text_rewrite(&b, &[true, false]);
    assert_eq!(names, ["one", "shell"]);
    let m = &out.unwrap()["choices"][0]["message"];
    assert_eq!(m["content"], "");
    assert_eq!(m["tool_calls"][0]["id"], "a");
}

fn parts_body(parts: Value) -> String {
    json!({"id":"x","choices":[{"index":0,"finish_reason":"stop",
        "message":{"role":"assistant","content":parts}}]})
    .to_string()
}

#[test]
fn calls_written_as_text_in_content_parts_are_read_and_withheld() {
    let b = parts_body(json!([
        {"type":"thinking","thinking":[{"type":"text","text":"<tool_call>not content"}]},
        {"type":"text","text":"ok <tool_"},
        {"type":"image_url","image_url":{"url":"https://x"}},
        {"type":"text","text":"call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>"}
    ]));
    let (names, out) = text_rewrite(&b, &[false]);
    assert_eq!(names, ["shell"]);
    let content = &out.unwrap()["choices"][0]["message"]["content"];
    assert_eq!(
        content,
        &json!([
            {"type":"thinking","thinking":[{"type":"text","text":"<tool_call>not content"}]},
            {"type":"text","text":"ok \n\nN"},
            {"type":"image_url","image_url":{"url":"https://x"}}
        ])
    );
    // Allowed, the parts go out as they came.
    let (_, unchanged) = text_rewrite(&b, &[true]);
    assert_eq!(unchanged, None);
}
