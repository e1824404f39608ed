//! JSON string literals read by hand: exactly what serde_json accepts as one
//! string, with an escaped value written into a buffer the caller keeps
//! (most argument fragments of a streamed call hold an escaped quote).

use std::borrow::Cow;

/// A byte that ends a run of plain characters: an escape, a quote (which
/// would end the string) or a control character (which no JSON string holds).
fn special(b: u8) -> bool {
    b == b'\\' || b == b'"' || b < 0x20
}

/// The value of the JSON string literal `lit` (its quotes included):
/// borrowed from it when it holds no escape, else written into `buf`.
/// `None` for what is not exactly one JSON string: an unescaped quote or
/// control character, an unknown escape, a lone surrogate.
pub fn read<'a>(lit: &'a str, buf: &'a mut String) -> Option<&'a str> {
    let (inner, plain) = content(lit)?;
    if plain {
        return Some(inner);
    }
    buf.clear();
    unescape(inner, buf)?;
    Some(buf)
}

/// [`read`] into a string of its own when it must be written (room for
/// the content, which its value never outgrows).
pub fn value(lit: &str) -> Option<Cow<'_, str>> {
    let (inner, plain) = content(lit)?;
    if plain {
        return Some(Cow::Borrowed(inner));
    }
    let mut buf = String::with_capacity(inner.len());
    unescape(inner, &mut buf)?;
    Some(Cow::Owned(buf))
}

/// A literal's content (quotes excluded), and whether it is its value as
/// it stands (nothing to unescape or refuse in it).
fn content(lit: &str) -> Option<(&str, bool)> {
    let inner = lit.strip_prefix('"')?.strip_suffix('"')?;
    Some((inner, !inner.bytes().any(special)))
}

/// Appends the value of a literal's content `inner` to `out`.
fn unescape(inner: &str, out: &mut String) -> Option<()> {
    let mut rest = inner;
    loop {
        let Some(i) = rest.bytes().position(special) else {
            out.push_str(rest);
            return Some(());
        };
        out.push_str(&rest[..i]);
        if rest.as_bytes()[i] != b'\\' {
            return None;
        }
        let c = match rest.as_bytes().get(i + 1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = hex4(&rest[i + 2..])?;
                rest = &rest[i + 6..];
                let code = if (0xD800..0xDC00).contains(&hi) {
                    let lo = hex4(rest.strip_prefix("\\u")?)?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return None;
                    }
                    rest = &rest[6..];
                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                } else {
                    hi
                };
                // A low surrogate alone is no character.
                out.push(char::from_u32(code)?);
                continue;
            }
            _ => return None,
        };
        out.push(c);
        rest = &rest[i + 2..];
    }
}

/// The value of the four hex digits `s` starts with.
fn hex4(s: &str) -> Option<u32> {
    s.as_bytes()
        .get(..4)?
        .iter()
        .try_fold(0, |acc, &d| Some(acc * 16 + char::from(d).to_digit(16)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What serde_json reads `lit` as, if it reads it as one string.
    fn serde(lit: &str) -> Option<String> {
        serde_json::from_str::<String>(lit).ok()
    }

    fn both(lit: &str) -> (Option<String>, Option<String>) {
        let mut buf = String::from("left over");
        let read = read(lit, &mut buf).map(str::to_string);
        assert_eq!(
            value(lit).map(Cow::into_owned),
            read,
            "read and value agree on {lit:?}"
        );
        (read, serde(lit))
    }

    #[test]
    fn it_reads_and_refuses_what_serde_json_does() {
        for lit in [
            r#""""#,
            r#""plain""#,
            r#""{\"lo""#,
            r#""a\\b\/c\b\f\n\r\t""#,
            r#""\u00e9\u4F60\ud83d\ude00""#,
            r#""é — “ok”""#,
            // Refused: not one string, bad escapes, lone surrogates, controls.
            r#""a"b""#,
            r#""a\""#,
            r#""\x""#,
            r#""\u12""#,
            r#""\u12g4""#,
            r#""\u+123""#,
            r#""\ud83d""#,
            r#""\ud83dx""#,
            r#""\ud83d\u0041""#,
            r#""\ude00""#,
            "\"tab\there\"",
            "\"nl\nhere\"",
            "\"\\é\"",
            "noquotes",
            "\"",
        ] {
            let (ours, theirs) = both(lit);
            assert_eq!(ours, theirs, "{lit:?}");
        }
    }

    #[test]
    fn a_plain_literal_is_borrowed_and_an_escaped_one_written_into_the_buffer() {
        let mut buf = String::new();
        let lit = r#""plain""#;
        let got = read(lit, &mut buf).unwrap();
        assert_eq!(got.as_ptr(), lit[1..].as_ptr());
        assert!(matches!(value(lit), Some(Cow::Borrowed("plain"))));
        let got = read(r#""a\"b""#, &mut buf).unwrap();
        assert_eq!(got, "a\"b");
        assert_eq!(buf, "a\"b");
    }

    proptest! {
        #[test]
        fn any_text_reads_as_serde_json_reads_it(s in any::<String>(), raw in "[\"\\\\a-z0-9u{}DEF\\x00-\\x1f]{0,24}") {
            // Real strings written by serde_json, and raw text with escapes
            // and quotes in odd places.
            let written = serde_json::to_string(&s).unwrap();
            let (ours, theirs) = both(&written);
            prop_assert_eq!(ours.as_deref(), Some(s.as_str()));
            prop_assert_eq!(theirs.as_deref(), Some(s.as_str()));
            let lit = format!("\"{raw}\"");
            let (ours, theirs) = both(&lit);
            prop_assert_eq!(ours, theirs, "{:?}", lit);
        }
    }
}
