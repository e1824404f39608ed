//! Unit tests of the assembler: providers' ways of streaming a call.

use super::*;
use serde_json::json;

fn asm() -> Assembler {
    Assembler::new(1024, 4096)
}

#[test]
fn header_then_fragments() {
    let mut a = asm();
    a.push_tool(
        0,
        0,
        json!({"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":""}}),
    )
    .unwrap();
    a.push_tool(0, 0, json!({"index":0,"function":{"arguments":"{\"a\""}}))
        .unwrap();
    a.push_tool(
        0,
        0,
        json!({"index":0,"id":"","type":"function","function":{"name":"","arguments":":1}"}}),
    )
    .unwrap();
    let c = a.take(0);
    assert_eq!(c.len(), 1);
    assert_eq!(
        (
            c[0].id.as_str(),
            c[0].name.as_str(),
            c[0].arguments.as_str()
        ),
        ("call_1", "get", "{\"a\":1}")
    );
    assert!(!a.any());
}

#[test]
fn missing_index_uses_position_and_new_ids_start_new_calls() {
    let mut a = asm();
    a.push_tool(
        0,
        0,
        json!({"id":"x","function":{"name":"a","arguments":"{}"}}),
    )
    .unwrap();
    a.push_tool(
        0,
        0,
        json!({"id":"y","function":{"name":"b","arguments":"{}"}}),
    )
    .unwrap();
    a.push_tool(0, 0, json!({"function":{"arguments":""}}))
        .unwrap();
    let c = a.take(0);
    let names: Vec<_> = c.iter().map(|c| (c.id.as_str(), c.name.as_str())).collect();
    assert_eq!(names, [("x", "a"), ("y", "b")]);
}

#[test]
fn choices_are_separate_and_legacy_is_one_call() {
    let mut a = asm();
    a.push_tool(
        1,
        0,
        json!({"index":0,"id":"b","function":{"name":"n1","arguments":"{}"}}),
    )
    .unwrap();
    a.push_legacy(0, json!({"name":"repl","arguments":""}))
        .unwrap();
    a.push_legacy(0, json!({"arguments":"{\"c\":1}"})).unwrap();
    assert_eq!(a.held_choices(), [0, 1]);
    let c0 = a.take(0);
    assert!(c0[0].site.legacy);
    assert_eq!(c0[0].arguments, "{\"c\":1}");
    assert_eq!(a.take(1)[0].name, "n1");
}

#[test]
fn oversized_arguments_are_dropped_and_marked() {
    let mut a = Assembler::new(8, 100);
    a.push_tool(
        0,
        0,
        json!({"index":0,"id":"i","function":{"name":"n","arguments":"{\"abcdef\""}}),
    )
    .unwrap();
    a.push_tool(0, 0, json!({"index":0,"function":{"arguments":":1}"}}))
        .unwrap();
    let c = a.take(0);
    assert!(c[0].oversized);
    assert!(c[0].arguments.is_empty());
    let mut a = Assembler::new(100, 10);
    a.push_tool(
        0,
        0,
        json!({"index":0,"function":{"name":"n","arguments":"123456"}}),
    )
    .unwrap();
    a.push_tool(
        0,
        1,
        json!({"index":1,"function":{"name":"m","arguments":"123456"}}),
    )
    .unwrap();
    let c = a.take(0);
    assert!(
        !c[0].oversized && c[1].oversized,
        "the response-wide bound rejects the second call"
    );
}

#[test]
fn a_name_past_the_cap_is_dropped_at_once_and_other_keys_count() {
    let mut a = asm();
    a.push_tool(0, 0, json!({"index":0,"id":"i","function":{"name":"n"}}))
        .unwrap();
    let long = "x".repeat(MAX_NAME_BYTES);
    a.push_tool(0, 0, json!({"index":0,"function":{"name":long}}))
        .unwrap();
    a.push_tool(0, 0, json!({"index":0,"function":{"name":"more"}}))
        .unwrap();
    let c = a.take(0);
    assert!(c[0].name_too_long && c[0].name.is_empty());
    let mut a = Assembler::new(64, 1024);
    for i in 0..8 {
        let mut e = json!({"index":0,"function":{"arguments":""}});
        e[format!("k{i}")] = json!("0123456789");
        a.push_tool(0, 0, e).unwrap();
    }
    let c = a.take(0);
    assert!(c[0].oversized, "unknown keys filled the call's cap");
    assert!(c[0].site.extra.is_empty());
}

#[test]
fn keys_that_fold_to_known_ones_are_errors() {
    for bad in [
        json!({"index":0,"Function":{"name":"x"}}),
        json!({"index":0,"function":{"NAME":"x"}}),
        json!({"index":0,"function":{"argumentſ":"{}"}}),
        json!({"INDEX":0,"function":{"name":"x"}}),
    ] {
        assert!(asm().push_tool(0, 0, bad.clone()).is_err(), "{bad}");
    }
}

#[test]
fn malformed_entries_are_errors() {
    for bad in [
        json!("str"),
        json!({"index":"0"}),
        json!({"index":-1}),
        json!({"index":0,"function":"x"}),
        json!({"index":0,"function":{"arguments":5}}),
        json!({"index":0,"id":7}),
    ] {
        assert!(asm().push_tool(0, 0, bad.clone()).is_err(), "{bad}");
    }
    let mut a = asm();
    a.push_tool(0, 0, json!({"index":0,"id":"a"})).unwrap();
    assert!(a.push_tool(0, 0, json!({"index":0,"id":"b"})).is_err());
}

#[test]
fn object_arguments_are_serialised_and_extras_kept() {
    let mut a = asm();
    a.push_tool(0, 0, json!({"index":0,"id":"i","extra_content":{"g":1},"function":{"name":"n","arguments":{"a":1}}})).unwrap();
    let c = a.take(0);
    assert_eq!(c[0].arguments, "{\"a\":1}");
    assert_eq!(c[0].site.extra["extra_content"], json!({"g":1}));
}

#[test]
fn a_first_call_is_complete_with_its_index_id_name_and_whole_object() {
    let all = |_: u32| true;
    let mut a = asm();
    a.push_tool(0, 0, json!({"index":0,"id":"c","type":"function","function":{"name":"get","arguments":"{\"a\":{\"b\":1}"}})).unwrap();
    assert_eq!(a.complete(all), None, "an object left open");
    a.push_tool(0, 0, json!({"index":0,"function":{"arguments":"}"}}))
        .unwrap();
    assert_eq!(a.complete(all), Some((0, 0)));
    assert_eq!(a.complete(|c| c != 0), None, "a choice not let go");
    let held = a.held_bytes();
    let c = a.take_one(0, 0).unwrap();
    assert_eq!(c.arguments, "{\"a\":{\"b\":1}}");
    assert_eq!(a.held_bytes(), held - c.arguments.len());
    assert!(!a.any());
    // No id, no index, or a second call behind an open first: not yet.
    a.push_tool(
        0,
        0,
        json!({"index":0,"type":"function","function":{"name":"get","arguments":"{}"}}),
    )
    .unwrap();
    assert_eq!(a.complete(all), None);
    let mut a = asm();
    a.push_tool(
        0,
        0,
        json!({"id":"c","type":"function","function":{"name":"get","arguments":"{}"}}),
    )
    .unwrap();
    assert_eq!(a.complete(all), None);
    let mut a = asm();
    a.push_tool(
        0,
        0,
        json!({"index":0,"id":"c","type":"function","function":{"name":"get","arguments":"{"}}),
    )
    .unwrap();
    a.push_tool(
        0,
        0,
        json!({"index":1,"id":"d","type":"function","function":{"name":"get","arguments":"{}"}}),
    )
    .unwrap();
    assert_eq!(a.complete(all), None);
    a.push_tool(0, 0, json!({"index":0,"function":{"arguments":"} "}}))
        .unwrap();
    assert_eq!(a.complete(all), Some((0, 0)));
    a.take_one(0, 0);
    assert_eq!(a.complete(all), Some((0, 1)));
}
