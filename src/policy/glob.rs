//! Tool-name globs: `*` matches any run of characters, `?` one character, the rest literally.
//!
//! Patterns and names are compared in their caseless form ([`crate::fold`]):
//! `Comm.Send`, `ｃｏｍｍ.send` and `comm\u{200B}.send` all match `comm.*`, so no
//! spelling of a name slips past a rule written for it.

use crate::fold::fold;

/// A compiled glob over tool names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: String,
}

impl Glob {
    pub fn new(pattern: &str) -> Glob {
        Glob {
            pattern: fold(pattern).into_owned(),
        }
    }

    /// The pattern in its caseless form.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// True when the pattern has no wildcard, so it can only match itself.
    pub fn is_literal(&self) -> bool {
        !self.pattern.contains(['*', '?'])
    }

    pub fn matches(&self, name: &str) -> bool {
        wildcard(self.pattern.as_bytes(), fold(name).as_bytes())
    }
}

/// Iterative wildcard matching with single-star backtracking: O(p·n) worst case.
fn wildcard(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, si));
                pi += 1;
            }
            Some(&c) if c == b'?' || c == s[si] => {
                pi += 1;
                si += 1;
            }
            _ => match star {
                Some((sp, ss)) => {
                    pi = sp + 1;
                    si = ss + 1;
                    star = Some((sp, ss + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::Glob;

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
            assert_eq!(Glob::new(p).matches(s), want, "{p} vs {s}");
        }
        for name in [
            "Comm.Email",
            "COMM.email",
            "ｃｏｍｍ.email",
            "comm\u{200B}.email",
        ] {
            assert!(Glob::new("comm.*").matches(name), "{name}");
        }
        assert!(Glob::new("Get_*").matches("get_weather"));
        assert!(Glob::new("x").is_literal());
        assert!(!Glob::new("x*").is_literal());
    }
}
