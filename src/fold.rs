//! Caseless identity of names: what a lenient reader takes to be the same key
//! or the same tool.
//!
//! [`fold`] is NFKC, then a full case fold (lower, upper, lower again, so that
//! `ß`/`SS`, `ſ`/`s`, `K` (Kelvin)/`k` and `ς`/`σ` meet), with default-ignorable
//! code points (zero-width spaces and joiners, soft hyphens, bidi controls,
//! variation selectors, tags) removed. Two strings with the same fold are
//! read as one by decoders that match keys case-insensitively (Go's
//! `encoding/json`, Newtonsoft) and look the same to a person.

use std::borrow::Cow;

use unicode_normalization::UnicodeNormalization;

/// Code points that render as nothing (zero-width spaces and joiners, soft
/// hyphens, bidi controls, variation selectors, tags, fillers), as inclusive
/// ranges: no reader should count them. The content fence reads the same
/// table to find marker words with invisible characters inside.
pub const IGNORABLE: [(u32, u32); 17] = [
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
];

/// True for a code point of [`IGNORABLE`].
pub fn is_ignorable(c: char) -> bool {
    let c = c as u32;
    IGNORABLE.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// [`IGNORABLE`] as the inside of a regex character class.
pub fn ignorable_class() -> String {
    IGNORABLE
        .iter()
        .map(|(lo, hi)| format!("\\u{{{lo:X}}}-\\u{{{hi:X}}}"))
        .collect()
}

/// The caseless form of `s`; borrowed when `s` is already lower-case ASCII
/// (the common case costs no allocation).
pub fn fold(s: &str) -> Cow<'_, str> {
    if is_caseless(s) {
        return Cow::Borrowed(s);
    }
    if s.is_ascii() {
        // NFKC leaves ASCII as it is, none of it is ignorable, and its
        // case fold is its lower case.
        return Cow::Owned(s.to_ascii_lowercase());
    }
    let nfkc: String = s.nfkc().filter(|c| !is_ignorable(*c)).collect();
    let once: String = nfkc
        .chars()
        .flat_map(char::to_lowercase)
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect();
    // Folding can produce new compatibility forms; a second NFKC settles them.
    Cow::Owned(once.nfkc().filter(|c| !is_ignorable(*c)).collect())
}

/// Whether the JSON value `v` is a string a lenient reader takes for
/// `want` (in caseless form): the same after trimming and [`fold`]. Roles
/// and types are matched this way, so `"Tool"` is read as a tool message.
pub fn reads_as(v: Option<&serde_json::Value>, want: &str) -> bool {
    read(v) == want
}

/// The caseless form of the JSON string at `v` (trimmed), `""` when it is
/// not a string: a role or type as a lenient reader reads it.
pub fn read(v: Option<&serde_json::Value>) -> Cow<'_, str> {
    v.and_then(serde_json::Value::as_str)
        .map(|s| fold(s.trim()))
        .unwrap_or(Cow::Borrowed(""))
}

/// True when `key` is not one of `known` but folds to one of them: a key a
/// lenient reader would take for a known one. `known` must be in caseless
/// form already (lower-case ASCII, as every key toolgate reads is).
pub fn impersonates(key: &str, known: &[&str]) -> bool {
    debug_assert!(known.iter().all(|k| matches!(fold(k), Cow::Borrowed(_))));
    // A key already in caseless form folds to itself: it is a known key or
    // none (the common case, and no work).
    if is_caseless(key) || known.contains(&key) {
        return false;
    }
    let f = fold(key);
    known.iter().any(|k| *k == f)
}

/// Lower-case ASCII: its own caseless form.
fn is_caseless(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_width_long_s_and_invisibles_fold_together() {
        for (a, b) in [
            ("TOOL_CALLS", "tool_calls"),
            ("Tool_Calls", "tool_calls"),
            ("tool_call\u{017F}", "tool_calls"),
            ("ｔｏｏｌ＿ｃａｌｌｓ", "tool_calls"),
            ("comm\u{200B}.send", "comm.send"),
            ("\u{212A}ey", "key"),
            ("STRASSE", "straße"),
            ("Comm.Send", "comm.send"),
        ] {
            assert_eq!(fold(a), fold(b), "{a} ~ {b}");
        }
        assert_ne!(fold("path"), fold("paths"));
        assert!(matches!(fold("already_lower"), Cow::Borrowed(_)));
    }

    #[test]
    fn impersonation_needs_a_different_spelling() {
        let known = ["tool_calls", "name"];
        assert!(!impersonates("tool_calls", &known));
        assert!(impersonates("Name", &known));
        assert!(impersonates("tool_callſ", &known));
        assert!(!impersonates("extra_content", &known));
    }
}
