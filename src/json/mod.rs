//! Borrowed JSON: an object's keys in order with the raw text of each value.
//!
//! Large bodies are read through [`Obj`] without building a tree (memory
//! stays near the body's own size), every key is seen — duplicates and keys
//! that only differ by case included — and a changed body is written back
//! from the raw values it kept, so what was not changed goes out as it came.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::fold;

mod check;
mod marked;
mod tree;
mod write;
pub use check::{is_strict, Checked};
pub use marked::{to_writer_marking, Marks, Places};
pub use tree::{lean_value, strict_str, strict_value, tree_cost, tree_cost_bound, Strict};
pub use write::{write_key, write_obj, write_string, Sink, Spliced};

/// Keys an object may have before they are looked up in a set rather than
/// compared one by one.
const LINEAR_KEYS: usize = 32;

/// An object key, borrowed unless it held escapes.
pub struct Key<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Key<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(s.to_string())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// A JSON string, checked and not kept (a typed reader's field whose
/// value toolgate passes on as it came); only whether it was empty is.
pub struct AnyStr {
    empty: bool,
}

impl AnyStr {
    pub fn is_empty(&self) -> bool {
        self.empty
    }
}

impl<'de> Deserialize<'de> for AnyStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AnyStr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<AnyStr, E> {
                Ok(AnyStr {
                    empty: s.is_empty(),
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// A `T` read from a JSON object only. serde's derived structs also take
/// an array of their fields in order, which no provider sends and the
/// whole-tree path refuses: a typed reader must not read more than that
/// path would. Each struct of a typed reader is read through this.
pub struct Braced<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Braced<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData)).map(Braced)
    }
}

/// `text` read as a `T` when it is one JSON object of `T`'s shape.
pub fn from_object<'a, T: Deserialize<'a>>(text: &'a str) -> Option<T> {
    serde_json::from_str::<Braced<T>>(text).ok().map(|b| b.0)
}

/// One JSON object: every member in order, values unparsed.
pub struct Obj<'a> {
    pub entries: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'de> Deserialize<'de> for Obj<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Obj<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Obj<'de>, A::Error> {
                let mut entries = Vec::new();
                while let Some((Key(k), v)) = m.next_entry::<Key<'de>, &'de RawValue>()? {
                    entries.push((k, v));
                }
                Ok(Obj { entries })
            }
        }
        d.deserialize_map(V)
    }
}

impl<'a> Obj<'a> {
    /// The object in `raw`; `None` when it is not an object.
    pub fn of(raw: &'a RawValue) -> Option<Obj<'a>> {
        serde_json::from_str(raw.get()).ok()
    }

    /// The value of `key` (the first, should there be more).
    pub fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// The value of `key` unless it is absent or `null`.
    pub fn present(&self, key: &str) -> Option<&'a RawValue> {
        self.get(key).filter(|v| !is_null(v))
    }

    /// True when a key appears twice, or when a key is not one of `known` but a
    /// lenient reader would take it for one: readers would disagree on it.
    pub fn ambiguous(&self, known: &[&str]) -> bool {
        let keys = &self.entries;
        // Most objects have a handful of keys: comparing them pairwise
        // costs less than hashing each into a set.
        let repeated = if keys.len() <= LINEAR_KEYS {
            (keys.iter().enumerate()).any(|(i, (k, _))| keys[..i].iter().any(|(p, _)| p == k))
        } else {
            let mut seen = std::collections::HashSet::with_capacity(keys.len());
            !keys.iter().all(|(k, _)| seen.insert(k.as_ref()))
        };
        repeated || keys.iter().any(|(k, _)| fold::impersonates(k, known))
    }
}

/// Keys seen so far in one object: compared one by one while few (as
/// [`Obj::ambiguous`] does), looked up in a set past [`LINEAR_KEYS`].
#[derive(Default)]
struct Seen<'a> {
    few: Vec<Cow<'a, str>>,
    many: Option<std::collections::HashSet<Cow<'a, str>>>,
}

impl<'a> Seen<'a> {
    /// False when `key` was seen before.
    fn insert(&mut self, key: Cow<'a, str>) -> bool {
        if let Some(set) = &mut self.many {
            return set.insert(key);
        }
        if self.few.contains(&key) {
            return false;
        }
        self.few.push(key);
        if self.few.len() > LINEAR_KEYS {
            self.many = Some(std::mem::take(&mut self.few).into_iter().collect());
        }
        true
    }
}

/// True for the JSON literal `null`.
pub fn is_null(v: &RawValue) -> bool {
    v.get() == "null"
}

/// The elements of a JSON array; `None` when `raw` is not an array.
pub fn array(raw: &RawValue) -> Option<Vec<&RawValue>> {
    serde_json::from_str(raw.get()).ok()
}

/// The value of the JSON string literal `lit` (its quotes first and last,
/// nothing around them), as serde_json reads it: borrowed unless it holds
/// escapes; `None` for anything that is not exactly one JSON string.
pub fn string_literal(lit: &str) -> Option<Cow<'_, str>> {
    if !(lit.len() >= 2 && lit.starts_with('"') && lit.ends_with('"')) {
        return None;
    }
    serde_json::from_str::<Key>(lit).ok().map(|k| k.0)
}

/// A string value; `None` when it is not a string.
pub fn string(raw: &RawValue) -> Option<Cow<'_, str>> {
    serde_json::from_str::<Key>(raw.get()).ok().map(|k| k.0)
}

/// Whether `args` (a JSON text) has an object with two keys that are the
/// same, or the same up to [`fold::fold`], at any depth: decoders would read
/// different values for it. `None` when it is not JSON at all (one pass
/// answers both).
pub fn ambiguous_keys(args: &str) -> Option<bool> {
    struct Check(bool);
    impl<'de> Deserialize<'de> for Check {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(CheckVisitor)
        }
    }
    struct CheckVisitor;
    impl<'de> Visitor<'de> for CheckVisitor {
        type Value = Check;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<Check, E> {
            Ok(Check(false))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Check, E> {
            Ok(Check(false))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Check, E> {
            Ok(Check(false))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Check, E> {
            Ok(Check(false))
        }
        fn visit_str<E>(self, _: &str) -> Result<Check, E> {
            Ok(Check(false))
        }
        fn visit_unit<E>(self) -> Result<Check, E> {
            Ok(Check(false))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Check, A::Error> {
            let mut bad = false;
            while let Some(Check(b)) = s.next_element()? {
                bad |= b;
            }
            Ok(Check(bad))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Check, A::Error> {
            let mut bad = false;
            let mut seen = Seen::default();
            while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
                // A key that folds to itself stays borrowed from the text.
                let folded = match k {
                    Cow::Borrowed(b) => fold::fold(b),
                    Cow::Owned(o) => Cow::Owned(fold::fold(&o).into_owned()),
                };
                bad |= !seen.insert(folded);
                bad |= m.next_value::<Check>()?.0;
            }
            Ok(Check(bad))
        }
    }
    serde_json::from_str::<Check>(args).ok().map(|c| c.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_keep_raw_values_and_see_every_key() {
        let text = r#"{"a": [1, 2], "b\u0020c": {"x":null}, "a": 3}"#;
        let o: Obj = serde_json::from_str(text).unwrap();
        let keys: Vec<&str> = o.entries.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(keys, ["a", "b c", "a"]);
        assert_eq!(o.get("a").unwrap().get(), "[1, 2]");
        assert!(o.ambiguous(&[]), "a duplicate key");
        let o: Obj = serde_json::from_str(r#"{"Choices":[]}"#).unwrap();
        assert!(o.ambiguous(&["choices"]));
        assert!(!o.ambiguous(&["id"]));
        // Past the pairwise limit the keys go into a set: the same answers.
        for (n, last, repeated, text) in wide_objects("k0") {
            let o: Obj = serde_json::from_str(&text).unwrap();
            assert_eq!(o.ambiguous(&[]), repeated, "{n} keys, then {last}");
        }
    }

    /// Objects of `k0`…`k{n-1}` on both sides of [`LINEAR_KEYS`], each
    /// closed by a key that repeats the first (spelled `first`), the last,
    /// or none: `(n, last key, whether it repeats, text)`.
    fn wide_objects(first: &str) -> Vec<(usize, String, bool, String)> {
        let mut out = Vec::new();
        for n in [LINEAR_KEYS, LINEAR_KEYS + 1, 3 * LINEAR_KEYS] {
            let many: String = (0..n).map(|i| format!("\"k{i}\":{i},")).collect();
            for (last, repeated) in [
                (first.to_string(), true),
                (format!("k{}", n - 1), true),
                ("end".into(), false),
            ] {
                let text = format!("{{{many}\"{last}\":0}}");
                out.push((n, last, repeated, text));
            }
        }
        out
    }

    #[test]
    fn argument_keys_that_collide_at_any_depth() {
        for bad in [
            r#"{"path":"/tmp/a","PATH":"/etc/shadow"}"#,
            r#"{"amount":5,"Amount":5000}"#,
            r#"{"x":[{"k":1,"\u212A":2}]}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"o":{"file\u200b":1,"file":2}}"#,
        ] {
            assert_eq!(ambiguous_keys(bad), Some(true), "{bad}");
        }
        for ok in [r#"{"path":"/tmp/a","paths":["b"]}"#, "{}", "[1]"] {
            assert_eq!(ambiguous_keys(ok), Some(false), "{ok}");
        }
        assert_eq!(ambiguous_keys("not json"), None, "not JSON is told apart");
        // Past the pairwise limit the folded keys go into a set.
        for (n, last, repeated, text) in wide_objects("K0") {
            let nested = format!("{{\"o\":{text}}}");
            assert_eq!(
                ambiguous_keys(&nested),
                Some(repeated),
                "{n} keys, then {last}"
            );
        }
    }

    #[test]
    fn a_typed_reader_takes_objects_only() {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Pair<'a> {
            #[serde(borrow)]
            a: Key<'a>,
            b: Option<u8>,
        }
        let read = |t: &'static str| from_object::<Pair>(t);
        assert!(matches!(read(r#"{"a":"x","b":1}"#), Some(Pair { a, b: Some(1) }) if a.0 == "x"));
        assert!(
            serde_json::from_str::<Pair>(r#"["x",1]"#).is_ok(),
            "what serde takes"
        );
        for bad in [
            r#"["x",1]"#,
            r#"["x"]"#,
            "[]",
            r#"{"a":"x","a":"y"}"#,
            r#"{"a":"x"} 1"#,
        ] {
            assert!(read(bad).is_none(), "{bad}");
        }
        let nested: Option<Vec<Braced<Pair>>> = serde_json::from_str(r#"[["x",1]]"#).ok();
        assert!(nested.is_none(), "an array in place of a nested object");
    }
}
