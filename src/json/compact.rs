//! A JSON tree written compactly, byte for byte as `serde_json::to_writer`
//! writes it, in less time: a string with nothing to escape (most keys and
//! texts) is copied whole rather than looked at a byte at a time.

use serde_json::{Number, Value};

/// Appends `v`'s compact text to `out`.
pub fn write_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => number(out, n),
        Value::String(s) => write_str(out, s),
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, x);
            }
            out.push(b']');
        }
        Value::Object(m) => {
            out.push(b'{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                write_value(out, x);
            }
            out.push(b'}');
        }
    }
}

/// `v`'s compact text.
pub fn to_vec(v: &Value, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    write_value(&mut out, v);
    out
}

/// Appends `s` as a JSON string, escaped as serde_json escapes it.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    if needs_escape(s) {
        // serde_json's own escaping; writing to a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
        return;
    }
    out.reserve(s.len() + 2);
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// Whether `s` holds a byte JSON escapes: a quote, a backslash or a control
/// character (a fold, not `any`: it vectorises).
fn needs_escape(s: &str) -> bool {
    s.bytes().fold(false, |acc, b| {
        acc | (b < 0x20) | (b == b'"') | (b == b'\\')
    })
}

fn number(out: &mut Vec<u8>, n: &Number) {
    // serde_json's own formatting (integers as they are, floats shortest
    // round-trip); writing to a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn same(v: &Value) {
        let want = serde_json::to_vec(v).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&to_vec(v, 0)),
            String::from_utf8_lossy(&want)
        );
    }

    #[test]
    fn writes_what_serde_json_writes() {
        same(&json!(null));
        same(&json!({}));
        same(&json!([]));
        same(
            &json!({"a": [1, -2, 3.5, 1e300, -0.0, 18446744073709551615u64, i64::MIN],
            "b": {"c": true, "d": false, "e": null}, "": ""}),
        );
        for s in [
            "plain",
            "quote \" backslash \\ slash /",
            "\u{0}\u{1}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{1f}\u{20}\u{7f}",
            "line\u{2028}sep\u{2029}nel\u{85}",
            "émoji 🦀 and ÿ",
        ] {
            same(&json!(s));
            same(&json!({ s: s }));
        }
    }

    /// Every recorded provider request and event (`../shared/fixtures/sse`)
    /// and the project's own stream fixtures.
    #[test]
    fn writes_the_recorded_requests_and_events_as_serde_json_does() {
        let shared = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/sse");
        let mut dirs = vec![concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures")];
        if std::path::Path::new(shared).is_dir() {
            dirs.push(shared);
        } else {
            assert!(
                std::env::var("TOOLGATE_REQUIRE_FIXTURES").as_deref() != Ok("1"),
                "../shared/fixtures/sse is absent and TOOLGATE_REQUIRE_FIXTURES=1"
            );
            eprintln!("SKIPPED: ../shared/fixtures/sse is absent; the project's own fixtures only");
        }
        let least = if dirs.len() > 1 { 500 } else { 20 };
        let mut seen = 0;
        for dir in dirs {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let Ok(text) = std::fs::read_to_string(e.path()) else {
                    continue;
                };
                let whole = serde_json::from_str::<Value>(&text).ok();
                let events = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok());
                for v in whole.into_iter().chain(events) {
                    same(&v);
                    seen += 1;
                }
            }
        }
        assert!(seen > least, "only {seen} JSON texts found");
    }

    fn any_value() -> impl Strategy<Value = Value> {
        let text = proptest::collection::vec(
            prop_oneof![
                proptest::char::range('\u{0}', '\u{7f}'),
                proptest::char::any(),
                proptest::sample::select(vec!['"', '\\', '\n', '\u{2028}', '\u{1f}']),
            ],
            0..12,
        )
        .prop_map(|c| c.into_iter().collect::<String>());
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            text.clone().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((text.clone(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any tree is written to the same bytes as serde_json writes it.
        #[test]
        fn any_tree_is_written_as_serde_json_writes_it(v in any_value()) {
            prop_assert_eq!(to_vec(&v, 0), serde_json::to_vec(&v).unwrap());
        }
    }
}
