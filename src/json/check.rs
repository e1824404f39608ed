//! Whether a JSON text is one [`super::strict_value`] accepts, found without
//! building the tree: for large values that go on as they came, where only
//! their validity matters (a response's echo of its request, say).

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::{Key, LINEAR_KEYS};

/// Whether `text` is one JSON value in which no object repeats a key, at any
/// depth: exactly the texts [`super::strict_value`] takes (the same parser
/// reads both; this one keeps no values, and borrows the keys it compares).
pub fn is_strict(text: &str) -> bool {
    serde_json::from_str::<Checked>(text).is_ok()
}

/// A value read only to check it as [`is_strict`] does (a field of a typed
/// reader whose value goes on as it came).
pub struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Checked, D::Error> {
        Walk(&mut Vec::new()).deserialize(d).map(|()| Checked)
    }
}

/// One value's walk; `0` holds the keys of the objects it is inside.
struct Walk<'s, 'de>(&'s mut Vec<Cow<'de, str>>);

impl<'de> DeserializeSeed<'de> for Walk<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        while s.next_element_seed(Walk(&mut *self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        let start = self.0.len();
        let mut set: Option<HashSet<Cow<'de, str>>> = None;
        while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
            let repeated = match &mut set {
                Some(set) => !set.insert(k.clone()),
                None => self.0[start..].contains(&k),
            };
            if repeated {
                return Err(de::Error::custom("repeated key"));
            }
            self.0.push(k);
            if set.is_none() && self.0.len() - start > LINEAR_KEYS {
                set = Some(self.0[start..].iter().cloned().collect());
            }
            m.next_value_seed(Walk(&mut *self.0))?;
        }
        self.0.truncate(start);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::strict_value;
    use super::*;

    fn agrees(text: &str) -> bool {
        let strict = is_strict(text);
        assert_eq!(strict, strict_value(text.as_bytes()).is_ok(), "{text:?}");
        strict
    }

    #[test]
    fn takes_what_the_strict_tree_takes() {
        let many: String = (0..100).map(|i| format!("\"k{i}\":{i},")).collect();
        let wide = format!("{{{many}\"end\":[]}}");
        let wide_repeat = format!("{{{many}\"k7\":0}}");
        let deep_ok = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        let too_deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        for ok in [
            "{}",
            "[]",
            "1",
            "\"s\"",
            "null",
            r#"{"a":[1,-2,3.5e10,"x\n",null,true,false],"b":{"c":{},"a":1}}"#,
            r#"{"a":{"x":1},"b":{"x":1}}"#,
            r#"{"a\u0062":1,"b":2}"#,
            r#"[{"a":1},{"a":1}]"#,
            "  {\"a\" : 1 }  ",
            &wide,
            &deep_ok,
        ] {
            assert!(agrees(ok), "{ok}");
        }
        for bad in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,"\u0061":2}"#,
            r#"{"x":[{"k":1,"k":2}]}"#,
            r#"{"o":{"p":{"q":1,"q":1}}}"#,
            &wide_repeat,
            &too_deep,
            r#"{"a":1} 2"#,
            r#"{"a":1"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":1e400}"#,
            r#"{"a":01}"#,
            "[1,]",
            "",
            "nul",
        ] {
            assert!(!agrees(bad), "{bad}");
        }
    }

    #[test]
    fn keys_of_sibling_objects_do_not_meet() {
        // The key stack is cut back when an object ends.
        assert!(agrees(r#"[{"a":{"b":1}},{"b":{"a":1}},{"a":1,"b":2}]"#));
        assert!(!agrees(r#"{"a":{"b":1},"b":{"a":1},"a":2}"#));
    }

    #[test]
    fn recorded_streams_read_alike() {
        let at = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/sse");
        let Ok(dir) = std::fs::read_dir(at) else {
            assert!(
                std::env::var("TOOLGATE_REQUIRE_FIXTURES").as_deref() != Ok("1"),
                "../shared/fixtures/sse is absent and TOOLGATE_REQUIRE_FIXTURES=1"
            );
            return;
        };
        let mut seen = 0;
        for path in dir.flatten().map(|e| e.path()) {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for line in text.lines() {
                if let Some(data) = line.strip_prefix("data:") {
                    agrees(data.trim());
                    seen += 1;
                }
            }
        }
        assert!(seen > 100, "{seen} events");
    }
}
