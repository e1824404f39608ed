//! Tool-name globs: `*` matches any run of characters, `?` one character, the rest literally
//! (compiled by `globset`).
//!
//! Patterns and names are compared in their caseless form ([`crate::fold`]):
//! `Comm.Send`, `ｃｏｍｍ.send` and `comm\u{200B}.send` all match `comm.*`, so no
//! spelling of a name slips past a rule written for it.

use crate::fold::fold;

/// A compiled glob over tool names.
#[derive(Debug, Clone)]
pub struct Glob {
    pattern: String,
    /// No wildcard: matched by comparison, not by the compiled matcher.
    literal: bool,
    matcher: globset::GlobMatcher,
}

impl PartialEq for Glob {
    fn eq(&self, other: &Glob) -> bool {
        self.pattern == other.pattern
    }
}

impl Eq for Glob {}

impl Glob {
    /// Compiles `pattern` (its caseless form) with `globset`: `*` and `?`
    /// are wildcards, every other character is literal (globset's classes,
    /// alternatives and escapes are escaped away), and `/` is an ordinary
    /// character.
    pub fn new(pattern: &str) -> Result<Glob, String> {
        let pattern = fold(pattern).into_owned();
        let mut escaped = String::with_capacity(pattern.len() + 8);
        for c in pattern.chars() {
            match c {
                '*' | '?' => escaped.push(c),
                _ => escaped.push_str(&globset::escape(c.encode_utf8(&mut [0; 4]))),
            }
        }
        let matcher = globset::GlobBuilder::new(&escaped)
            .literal_separator(false)
            .backslash_escape(false)
            .build()
            .map_err(|e| format!("glob `{pattern}`: {e}"))?
            .compile_matcher();
        Ok(Glob {
            literal: !pattern.contains(['*', '?']),
            pattern,
            matcher,
        })
    }

    /// The pattern in its caseless form.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// True when the pattern has no wildcard, so it can only match itself.
    pub fn is_literal(&self) -> bool {
        self.literal
    }

    pub fn matches(&self, name: &str) -> bool {
        let name = fold(name);
        if self.literal {
            return self.pattern == name;
        }
        self.matcher.is_match(name.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::Glob;

    fn glob(p: &str) -> Glob {
        Glob::new(p).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn globs_match_as_documented() {
        let cases = [
            ("*", "anything", true),
            ("get_*", "get_weather", true),
            ("get_*", "set_weather", false),
            ("comm.*", "comm.email", true),
            ("comm.*", "comm", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*_send", "email_send", true),
            ("*_send", "email_sender", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("*a*b*", "xxaxxbxx", true),
            ("*a*b*", "xxbxxaxx", false),
        ];
        for (p, s, want) in cases {
            assert_eq!(glob(p).matches(s), want, "{p} vs {s}");
        }
        for name in [
            "Comm.Email",
            "COMM.email",
            "ｃｏｍｍ.email",
            "comm\u{200B}.email",
        ] {
            assert!(glob("comm.*").matches(name), "{name}");
        }
        assert!(glob("Get_*").matches("get_weather"));
        assert!(glob("x").is_literal());
        assert!(!glob("x*").is_literal());
        // Only `*` and `?` are special: the rest of globset's syntax is literal.
        for (p, s, want) in [
            ("a[bc]", "a[bc]", true),
            ("a[bc]", "ab", false),
            ("{a,b}*", "{a,b}x", true),
            ("{a,b}*", "ax", false),
            ("mcp/*", "mcp/fs/list", true),
            ("comm.*", "comm.x\ny", true),
            ("*send", "line\r\nsend", true),
            ("a?c", "a\nc", true),
            ("a\\*", "a\\x", true),
        ] {
            assert_eq!(glob(p).matches(s), want, "{p} vs {s}");
        }
    }
}
