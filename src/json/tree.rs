//! The tree (`serde_json::Value`) of a JSON text: strict (a repeated key at
//! any depth is refused), built piece by piece for large values so memory
//! stays near their size, and what building one would cost.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::Obj;

/// A value read as [`strict_value`] reads it (a repeated key is an error).
pub struct Strict(pub serde_json::Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Strict;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Strict, E> {
        Ok(Strict(b.into()))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Strict, E> {
        Ok(Strict(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Strict, E> {
        Ok(Strict(n.into()))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Strict, E> {
        Ok(Strict(n.into()))
    }
    fn visit_str<E>(self, s: &str) -> Result<Strict, E> {
        Ok(Strict(s.into()))
    }
    fn visit_string<E>(self, s: String) -> Result<Strict, E> {
        Ok(Strict(s.into()))
    }
    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict(serde_json::Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Strict, A::Error> {
        let mut v = Vec::with_capacity(s.size_hint().unwrap_or(0).min(256));
        while let Some(Strict(x)) = s.next_element()? {
            v.push(x);
        }
        Ok(Strict(serde_json::Value::Array(v)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Strict, A::Error> {
        let mut map = serde_json::Map::new();
        while let Some((k, Strict(v))) = m.next_entry::<String, Strict>()? {
            match map.entry(k) {
                serde_json::map::Entry::Vacant(e) => {
                    e.insert(v);
                }
                serde_json::map::Entry::Occupied(_) => {
                    return Err(de::Error::custom("repeated key"))
                }
            }
        }
        Ok(Strict(serde_json::Value::Object(map)))
    }
}

/// The tree of `data`, refused when any object repeats a key: a tree keeps
/// only one value of a repeated key, and a reader that keeps the other would
/// see what toolgate never looked at (`{"tool_calls": [call], "tool_calls":
/// null}`).
pub fn strict_value(data: &[u8]) -> Result<serde_json::Value, serde_json::Error> {
    // UTF-8 checked once for the whole text is faster than string by string
    // (about a sixth off a small request's tree); text that is not UTF-8
    // gets the byte reader's error, as before.
    match std::str::from_utf8(data) {
        Ok(text) => strict_str(text),
        Err(_) => serde_json::from_slice::<Strict>(data).map(|s| s.0),
    }
}

/// [`strict_value`] of a text already checked to be UTF-8.
pub fn strict_str(text: &str) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::from_str::<Strict>(text).map(|s| s.0)
}

/// Values at least this long are built by [`lean_value`] piece by piece.
const LEAN_MIN: usize = 64 * 1024;

/// The tree (`serde_json::Value`) of `raw`, built so that memory stays near
/// the text's size: large values are split with the borrowed reader and large
/// strings unescaped straight into a string of their final size. (serde_json
/// unescapes into a scratch buffer that doubles as it grows, then copies: up
/// to three times a long string's size at once.) The same tree as
/// [`strict_value`]: a repeated key is an error.
pub fn lean_value(raw: &RawValue) -> Result<serde_json::Value, serde_json::Error> {
    use serde::de::Error as _;
    use serde_json::Value;
    let s = raw.get();
    if s.len() < LEAN_MIN {
        return strict_value(s.as_bytes());
    }
    match s.as_bytes().first() {
        Some(b'{') => {
            let o: Obj = serde_json::from_str(s)?;
            let mut m = serde_json::Map::new();
            for (k, v) in o.entries {
                if m.insert(k.into_owned(), lean_value(v)?).is_some() {
                    return Err(serde_json::Error::custom("repeated key"));
                }
            }
            Ok(Value::Object(m))
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(s)?;
            let mut out = Vec::with_capacity(items.len());
            for v in items {
                out.push(lean_value(v)?);
            }
            Ok(Value::Array(out))
        }
        Some(b'"') => long_string(s)
            .map(Value::String)
            .ok_or_else(|| serde_json::Error::custom("invalid string escape")),
        _ => serde_json::from_str(s),
    }
}

/// Bytes of a long string literal serde_json reads at a time.
const PIECE: usize = 64 * 1024;

/// A long string literal's value, read by serde_json a piece at a time into
/// a string of its final size (a whole literal would take serde_json's
/// doubling scratch buffer and then a copy: up to three times its size). A
/// piece ends only where the 12 bytes before the cut hold no backslash, so
/// no escape (a surrogate pair is the longest, 12 bytes) spans a cut: each
/// piece is a JSON string of its own, and the pieces' values join to the
/// whole literal's. A literal with no such place is read whole.
fn long_string(lit: &str) -> Option<String> {
    let inner = lit.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut piece = String::with_capacity(PIECE.min(inner.len()) + 2);
    let mut rest = inner;
    while !rest.is_empty() {
        let (head, tail) = rest.split_at(cut_point(rest));
        piece.clear();
        piece.push('"');
        piece.push_str(head);
        piece.push('"');
        out.push_str(&super::string_literal(&piece)?);
        rest = tail;
    }
    Some(out)
}

/// Where the next piece of a literal's content `s` ends: at [`PIECE`] bytes
/// or the first place after it that no escape spans; else the whole of `s`.
fn cut_point(s: &str) -> usize {
    let b = s.as_bytes();
    (PIECE..b.len())
        .find(|&i| s.is_char_boundary(i) && !b[i - 12..i].contains(&b'\\'))
        .unwrap_or(b.len())
}

/// Roughly what a parsed tree (`serde_json::Value`) of `text` takes in
/// memory, in bytes, counted by one scan outside strings without parsing: an
/// object is a B-tree node (~640 bytes however few its members), an array
/// element or member a 32-byte slot with growth slack, plus the text itself.
pub fn tree_cost(text: &[u8]) -> usize {
    let mut cost = text.len();
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                // Skip the string, escapes included.
                i += 1;
                while i < text.len() {
                    match memchr::memchr2(b'"', b'\\', &text[i..]) {
                        Some(j) if text[i + j] == b'\\' => i += j + 2,
                        Some(j) => {
                            i += j;
                            break;
                        }
                        None => i = text.len(),
                    }
                }
            }
            b'{' => cost = cost.saturating_add(640),
            b'[' | b',' => cost = cost.saturating_add(64),
            b':' => cost = cost.saturating_add(32),
            _ => {}
        }
        i += 1;
    }
    cost
}

/// At least [`tree_cost`] of `text`, in one pass: the same weights, with
/// the characters inside strings counted too. For short texts, where the
/// bound is all that is needed.
pub fn tree_cost_bound(text: &[u8]) -> usize {
    let (mut objects, mut slots, mut members) = (0usize, 0usize, 0usize);
    // Counted in bytes, 255 at a time (a byte counts at most once in each,
    // so none overflows): the compiler keeps sixteen such counts to a
    // vector register, four times what it keeps of wider ones.
    for chunk in text.chunks(255) {
        let (mut o, mut s, mut m) = (0u8, 0u8, 0u8);
        for &b in chunk {
            o += u8::from(b == b'{');
            s += u8::from(b == b'[' || b == b',');
            m += u8::from(b == b':');
        }
        objects += usize::from(o);
        slots += usize::from(s);
        members += usize::from(m);
    }
    text.len()
        .saturating_add(640 * objects)
        .saturating_add(64 * slots)
        .saturating_add(32 * members)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_string_read_in_pieces_is_what_serde_json_reads_whole() {
        let texts = [
            "line of text\\n".repeat(20_000),
            // Surrogate pairs (12 bytes) with few places to cut.
            "\\ud83d\\ude00ab".repeat(30_000),
            format!(
                "{}\\ud83d\\ude00{}",
                "é".repeat(40_000),
                "x\\\"y\\\\".repeat(20_000)
            ),
            "z".repeat(200_000),
            // Escapes everywhere: no place to cut, read whole.
            "\\n".repeat(70_000),
        ];
        for t in &texts {
            let lit = format!("\"{t}\"");
            let whole: String = serde_json::from_str(&lit).unwrap();
            assert_eq!(long_string(&lit).as_deref(), Some(whole.as_str()));
        }
        for bad in [
            format!("\"{}\\ud83d{}\"", "a".repeat(70_000), "b".repeat(10)),
            format!("\"{}\u{1}{}\"", "a".repeat(70_000), "b".repeat(10)),
            format!("\"{}\"{}\"", "a".repeat(70_000), "b".repeat(10)),
        ] {
            assert!(serde_json::from_str::<String>(&bad).is_err());
            assert_eq!(long_string(&bad), None);
        }
    }

    #[test]
    fn the_strict_tree_refuses_repeated_keys_at_any_depth() {
        let ok = r#"{"a":[1,-2,3.5,"x",null,true],"b":{"c":{}}}"#;
        let full: serde_json::Value = serde_json::from_str(ok).unwrap();
        assert_eq!(strict_value(ok.as_bytes()).unwrap(), full);
        for bad in [
            r#"{"a":1,"a":2}"#,
            r#"{"choices":[{"delta":{"tool_calls":[1],"tool_calls":null}}]}"#,
        ] {
            assert!(strict_value(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_bound_is_the_scan_with_strings_counted_too() {
        for text in [
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"n":[1,2,3]}"#,
            "[]",
            "",
            "not json at all",
        ] {
            assert_eq!(
                tree_cost_bound(text.as_bytes()),
                tree_cost(text.as_bytes()),
                "{text}"
            );
        }
        // Inside strings (escaped quotes too) the scan skips what the bound counts.
        for text in [
            r#"{"a":"{[,:"}"#,
            r#"{"a":"\"{,\\","b":1}"#,
            r#"{"code":"fn f() { g(a, b) }"}"#,
        ] {
            assert!(
                tree_cost_bound(text.as_bytes()) > tree_cost(text.as_bytes()),
                "{text}"
            );
        }
    }

    #[test]
    fn tree_cost_grows_with_values_not_with_text() {
        let text = format!("{{\"content\":\"{}\"}}", "x,:[{".repeat(1000));
        assert!(tree_cost(text.as_bytes()) < text.len() + 1000);
        let nums = format!("[{}0]", "0,".repeat(1000));
        assert!(tree_cost(nums.as_bytes()) > 30 * nums.len());
        assert!(tree_cost(b"{}") > 640);
        assert!(
            tree_cost(br#"{"a":"\"[,,,"}"#) < 700,
            "escaped quotes stay inside"
        );
    }

    #[test]
    fn the_lean_tree_equals_serde_json_s() {
        let big = "x\\n\\\"é\\u00e9\\ud83d\\ude00/".repeat(20_000);
        let text = format!(
            r#"{{"model":"m","messages":[{{"role":"tool","content":"{big}"}},{{"role":"user","content":[{{"type":"text","text":"{big}"}}]}}],"n":1}}"#
        );
        let raw: &RawValue = serde_json::from_str(&text).unwrap();
        let lean = lean_value(raw).unwrap();
        let full: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(lean, full);
        for repeated in [
            text.replacen(r#""n":1"#, r#""n":1,"n":2"#, 1),
            text.replacen(r#""role":"tool""#, r#""role":"tool","role":"user""#, 1),
        ] {
            let raw: &RawValue = serde_json::from_str(&repeated).unwrap();
            assert!(lean_value(raw).is_err(), "a repeated key at any depth");
        }
        for bad in [r#""\x""#, r#""\ud83d""#, r#""\ud83dx""#, r#""\u12""#] {
            assert_eq!(super::super::string_literal(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_tree_reads_and_refuses_as_the_byte_reader_does() {
        let cases: [&[u8]; 14] = [
            br#"{"a":[1,2.5,-3,true,null,"x\u00e9\n"]}"#,
            "{\"é\":\"\u{2028}\"}".as_bytes(),
            b"{\"a\":\"\xff\"}",
            b"{\"a\":1}\xff",
            b"\xef\xbb\xbf{}",
            br#"{"a":"\ud800"}"#,
            br#"{"a":"\ud83dx"}"#,
            b"{\"a\":\"\x01\"}",
            br#"{"a":1e400}"#,
            br#"{"a":01}"#,
            br#"{"a":1"#,
            br#"{"a":1}} "#,
            b"",
            br#"[{"k":{}},"\/"]"#,
        ];
        for c in cases {
            let want = serde_json::from_slice::<serde_json::Value>(c).map_err(|e| e.to_string());
            let got = strict_value(c).map_err(|e| e.to_string());
            assert_eq!(got, want, "{}", String::from_utf8_lossy(c));
        }
    }
}
