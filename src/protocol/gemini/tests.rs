//! Unit tests of the Gemini codec over the project's own fixtures
//! (`tests/fixtures/gemini`, written from the API reference).

use serde_json::{json, Value};

use super::request;
use crate::protocol::sync_driver::testing::{options, run_denying};
use crate::protocol::{Protocol, Reading};

fn fixture(name: &str) -> String {
    let p = format!(
        "{}/tests/fixtures/gemini/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn stream(name: &str, deny: &[&str]) -> String {
    let mut rw = Protocol::Gemini.rewriter(&options());
    run_denying(rw.as_mut(), &fixture(name), deny)
}

/// The data of every event of an output.
fn events(out: &str) -> Vec<Value> {
    out.replace("\r\n", "\n")
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|b| {
            let data: String = b.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
            serde_json::from_str(&data).unwrap_or(Value::Null)
        })
        .collect()
}

fn calls(v: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for e in v {
        for c in e["candidates"].as_array().into_iter().flatten() {
            for p in c["content"]["parts"].as_array().into_iter().flatten() {
                for key in ["functionCall", "function_call", "toolCall", "FunctionCall"] {
                    if let Some(name) = p[key]["name"].as_str() {
                        out.push(name.to_string());
                    }
                }
            }
        }
    }
    out
}

fn texts(v: &[Value]) -> String {
    let mut out = String::new();
    for e in v {
        for c in e["candidates"].as_array().into_iter().flatten() {
            for p in c["content"]["parts"].as_array().into_iter().flatten() {
                out.push_str(p["text"].as_str().unwrap_or(""));
            }
        }
    }
    out
}

fn neutral() -> String {
    options().neutral_message.to_string()
}

#[test]
fn an_allowed_call_goes_out_byte_identical_thought_signature_and_all() {
    let input = fixture("text-then-call.sse");
    let out = stream("text-then-call.sse", &[]);
    assert_eq!(out, input);
}

#[test]
fn a_denied_call_becomes_a_text_turn_and_the_rest_passes() {
    let out = events(&stream("text-then-call.sse", &["get_weather"]));
    assert_eq!(out.len(), 3);
    assert!(calls(&out).is_empty());
    assert_eq!(
        texts(&out),
        format!("Let me check the weather.{}", neutral())
    );
    // The signature went with the call; the finish is the provider's own.
    assert!(!out[1].to_string().contains("thoughtSignature"));
    assert_eq!(out[2]["candidates"][0]["finishReason"], "STOP");
    assert_eq!(out[1]["responseId"], "resp-gm-1");
}

#[test]
fn parallel_calls_are_each_decided() {
    let out = events(&stream("parallel-calls.sse", &["run_shell"]));
    assert_eq!(calls(&out), ["get_weather"]);
    // A call is left: no neutral text is added beside it.
    assert!(!texts(&out).contains(&neutral()));
    let out = events(&stream("parallel-calls.sse", &["run_shell", "get_weather"]));
    assert!(calls(&out).is_empty());
    assert_eq!(texts(&out), neutral());
}

#[test]
fn snake_case_keys_are_read_as_the_camel_case_ones() {
    let out = events(&stream("snake-case-call.sse", &["run_shell"]));
    assert!(calls(&out).is_empty(), "{out:?}");
    assert_eq!(texts(&out), neutral());
}

#[test]
fn what_reads_two_ways_fails_closed() {
    for f in [
        "both-spellings.sse",
        "case-variant.sse",
        "partial-args.sse",
        "cut.sse",
    ] {
        let out = events(&stream(f, &[]));
        let last = out.last().cloned().unwrap_or_default();
        assert!(last["error"]["code"].is_number(), "{f}: {out:?}");
        assert!(
            !calls(&out).contains(&"run_shell".to_string()),
            "{f}: {out:?}"
        );
    }
}

#[test]
fn an_unknown_part_is_held_as_a_call_and_rejected_by_the_gates() {
    let mut rw = Protocol::Gemini.rewriter(&options());
    let mut seen = Vec::new();
    let out = crate::protocol::sync_driver::run_sync(
        rw.as_mut(),
        &[fixture("unknown-part.sse").as_bytes()],
        |c| {
            seen.push((c.name.clone(), c.kind.as_str().to_string()));
            false
        },
    );
    assert_eq!(seen, [("toolCall".to_string(), "toolCall".to_string())]);
    let out = events(&String::from_utf8_lossy(&out));
    assert!(calls(&out).is_empty());
    assert_eq!(texts(&out), format!("Working.{}", neutral()));
}

#[test]
fn each_candidate_is_its_own_choice() {
    let mut rw = Protocol::Gemini.rewriter(&options());
    let mut choices = Vec::new();
    let out = crate::protocol::sync_driver::run_sync(
        rw.as_mut(),
        &[fixture("two-candidates.sse").as_bytes()],
        |c| {
            choices.push(c.choice);
            c.name != "run_shell"
        },
    );
    assert_eq!(choices, [0, 1]);
    let out = events(&String::from_utf8_lossy(&out));
    assert_eq!(calls(&out), ["get_weather"]);
    assert_eq!(
        out[0]["candidates"][1]["content"]["parts"][0]["text"],
        neutral()
    );
}

#[test]
fn the_providers_error_mid_stream_ends_it_in_googles_shape() {
    let out = events(&stream("error-midstream.sse", &[]));
    assert_eq!(texts(&out), "Let me");
    let last = out.last().cloned().unwrap_or_default();
    assert_eq!(last["error"]["status"], "INTERNAL");
}

#[test]
fn a_whole_body_is_read_and_written_without_the_withheld_call() {
    let text = fixture("whole-text-then-call.json");
    let r = Reading {
        max_call_bytes: 1 << 20,
        refusal: false,
        text_calls: false,
    };
    let body = Protocol::Gemini.complete(&text, r).unwrap();
    assert_eq!(body.calls().len(), 1);
    assert_eq!(body.calls()[0].name, "run_shell");
    assert_eq!(
        body.calls()[0].arguments,
        r#"{"command":"cat /etc/passwd"}"#
    );
    assert_eq!(body.usage().input, 30);
    let bytes = bytes::Bytes::from(text.clone());
    let mut out = crate::json::Spliced::new(&text, &bytes);
    let allowed = [crate::call::Release::Allow];
    assert!(!body.rewrite(&allowed, "n", &[0; 32], &mut out));
    let mut out = crate::json::Spliced::new(&text, &bytes);
    assert!(body.rewrite(&[], "neutral", &[0; 32], &mut out));
    let written: Vec<u8> = out.finish().concat();
    let v: Value = serde_json::from_slice(&written).unwrap();
    assert_eq!(
        v["candidates"][0]["content"]["parts"],
        json!([{"text": "Checking."}, {"text": "neutral"}])
    );
    assert_eq!(v["usageMetadata"]["promptTokenCount"], 30);
}

#[test]
fn code_the_provider_ran_passes_and_is_reported() {
    let text = fixture("whole-code-execution.json");
    let r = Reading {
        max_call_bytes: 1 << 20,
        refusal: false,
        text_calls: false,
    };
    let body = Protocol::Gemini.complete(&text, r).unwrap();
    assert!(body.calls().is_empty());
    assert_eq!(body.hosted().len(), 1);
    assert_eq!(body.hosted()[0].name, "code_execution");
}

fn parse(v: Value) -> crate::protocol::Parsed {
    Protocol::Gemini.parse(v.to_string().as_bytes()).unwrap()
}

#[test]
fn declarations_are_read_in_either_spelling_and_classic_schemas_in_json_schema_words() {
    let p = parse(json!({
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tools": [
            {"functionDeclarations": [{"name": "a", "parameters": {"type": "OBJECT", "properties": {"x": {"type": "STRING"}}}}]},
            {"function_declarations": [{"name": "b", "parameters_json_schema": {"type": "object"}}]},
            {"googleSearch": {}}
        ]
    }));
    assert_eq!(
        p.declared["a"].parameters.as_deref(),
        Some(r#"{"properties":{"x":{"type":"string"}},"type":"object"}"#)
    );
    assert!(p.declared.contains_key("b"));
    assert_eq!(p.hosted, ["google_search"]);
    for bad in [
        json!({"tools": [{"functionDeclarations": [], "function_declarations": []}]}),
        json!({"tools": [{"someNewTool": {}}]}),
        json!({"Contents": []}),
        json!({"contents": [{"parts": [{"FunctionResponse": {}}]}]}),
        json!({"tools": [{"functionDeclarations": [{"name": "a", "parameters": {}, "parametersJsonSchema": {}}]}]}),
    ] {
        assert!(
            Protocol::Gemini.parse(bad.to_string().as_bytes()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn the_path_says_the_model_and_whether_it_streams() {
    let mut p = parse(json!({"contents": []}));
    request::read_path(
        &mut p,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        Some("alt=sse"),
    )
    .unwrap();
    assert!(p.stream);
    assert_eq!(p.model.as_deref(), Some("gemini-2.5-flash"));
    request::read_path(&mut p, "/v1/models/gemini-2.5-pro:generateContent", None).unwrap();
    assert!(!p.stream);
    assert!(request::read_path(&mut p, "/v1beta/models/m:streamGenerateContent", None).is_err());
}

#[test]
fn tool_results_are_fenced_in_place_and_texts_pair_calls_with_results() {
    let mut body = json!({
        "system_instruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "fetch", "args": {"url": "https://example.com/w"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "fetch", "response": {"output": "sunny"}}}]},
            {"role": "model", "parts": [{"function_call": {"name": "fetch", "args": {"url": "https://example.com/x"}}}]},
            {"role": "user", "parts": [{"function_response": {"name": "fetch", "response": {"a": 1, "b": "two"}}}]}
        ]
    });
    let t = Protocol::Gemini.texts(&body, true);
    assert_eq!(t.system, "Be brief.");
    assert_eq!(t.first_user.as_deref(), Some("Weather in Paris?"));
    let results = Protocol::Gemini.tool_results(&mut body);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].call_id, "fetch#1");
    assert_eq!(results[0].url.as_deref(), Some("https://example.com/w"));
    assert_eq!(results[1].call_id, "fetch#2");
    assert_eq!(results[1].url.as_deref(), Some("https://example.com/x"));
    assert_eq!(*results[0].content, json!("sunny"));
    // A response of several fields is fenced whole, under `output`.
    assert_eq!(*results[1].content, json!({"a": 1, "b": "two"}));
    drop(results);
    Protocol::Gemini.add_notice(&mut body, "NOTICE");
    Protocol::Gemini.add_notice(&mut body, "NOTICE");
    assert_eq!(
        body["system_instruction"]["parts"],
        json!([{"text": "Be brief."}, {"text": "NOTICE"}])
    );
    assert!(body.get("systemInstruction").is_none());
}

#[test]
fn hidden_tools_leave_the_declarations_and_the_allowed_names() {
    let mut body = json!({
        "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}, {"codeExecution": {}}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["a", "b"]}}
    });
    assert!(Protocol::Gemini.hide(&mut body, &["b".into(), "code_execution".into()]));
    assert_eq!(
        body["tools"],
        json!([{"functionDeclarations": [{"name": "a"}]}])
    );
    assert_eq!(
        body["toolConfig"]["functionCallingConfig"]["allowedFunctionNames"],
        json!(["a"])
    );
    assert!(Protocol::Gemini.hide(&mut body, &["a".into()]));
    assert!(
        body.get("tools").is_none() && body.get("toolConfig").is_none(),
        "{body}"
    );
    let mut plain = json!({"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}});
    assert!(!Protocol::Gemini.hide(&mut plain, &["a".into()]));
    assert!(plain.get("toolConfig").is_some());
}
