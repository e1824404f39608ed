//! Redaction of tool results before they are fenced: known secret formats,
//! `password=`-style assignments, and the exact values of toolgate's own
//! credentials. Each becomes `[REDACTED:<kind>]`; only counts are kept.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::secrets::SECRETS;

const KEYS: &str = r"password|passwd|pwd|passphrase|secret|client[_-]?secret|api[_-]?key|apikey|access[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?key";

#[allow(clippy::expect_used)] // constant patterns, exercised by the tests
static ASSIGN: LazyLock<(Regex, Regex)> = LazyLock::new(|| {
    (
        // key=value, key = "value"
        Regex::new(&format!(
            r#"(?i)\b((?:{KEYS}))(\s*=\s*)(["']?)([^\s"'&,;]{{3,}})"#
        ))
        .expect("assignment pattern"),
        // "key": "value" (JSON and YAML-ish quoted forms)
        Regex::new(&format!(
            r#"(?i)(["'](?:{KEYS})["']\s*:\s*["'])([^"'\n]{{3,}})(["'])"#
        ))
        .expect("assignment pattern"),
    )
});

/// Counts per kind of what was redacted.
pub type Counts = BTreeMap<&'static str, u64>;

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Exact secret values (the upstream key, client tokens) and their kind.
    exact: Vec<(String, &'static str)>,
}

impl Redactor {
    pub fn new(exact: Vec<(String, &'static str)>) -> Redactor {
        Redactor {
            exact: exact.into_iter().filter(|(v, _)| v.len() >= 8).collect(),
        }
    }

    /// The redacted text, or `None` when nothing was found.
    pub fn redact(&self, text: &str, counts: &mut Counts) -> Option<String> {
        let mut cur: Option<String> = None;
        for (value, kind) in &self.exact {
            let t = cur.as_deref().unwrap_or(text);
            let n = t.matches(value.as_str()).count();
            if n > 0 {
                *counts.entry(kind).or_default() += n as u64;
                cur = Some(t.replace(value.as_str(), &format!("[REDACTED:{kind}]")));
            }
        }
        let hits: Vec<usize> = SECRETS
            .any
            .matches(cur.as_deref().unwrap_or(text))
            .iter()
            .collect();
        for i in hits {
            let (kind, re) = &SECRETS.each[i];
            let t = cur.as_deref().unwrap_or(text);
            let n = re.find_iter(t).count();
            if n > 0 {
                *counts.entry(kind).or_default() += n as u64;
                cur = Some(
                    re.replace_all(t, format!("[REDACTED:{kind}]").as_str())
                        .into_owned(),
                );
            }
        }
        let t = cur.as_deref().unwrap_or(text);
        if t.contains('=') || t.contains(':') {
            let (eq, json) = &*ASSIGN;
            let n = eq
                .captures_iter(t)
                .filter(|c| !c[4].starts_with("[REDACTED"))
                .count()
                + json
                    .captures_iter(t)
                    .filter(|c| !c[2].starts_with("[REDACTED"))
                    .count();
            if n > 0 {
                *counts.entry("assignment").or_default() += n as u64;
                let a = eq.replace_all(t, |c: &regex::Captures| {
                    if c[4].starts_with("[REDACTED") {
                        c[0].to_string()
                    } else {
                        format!("{}{}{}[REDACTED:assignment]", &c[1], &c[2], &c[3])
                    }
                });
                let b = json.replace_all(&a, |c: &regex::Captures| {
                    if c[2].starts_with("[REDACTED") {
                        c[0].to_string()
                    } else {
                        format!("{}[REDACTED:assignment]{}", &c[1], &c[3])
                    }
                });
                cur = Some(b.into_owned());
            }
        }
        cur
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn red(text: &str) -> (String, Counts) {
        let r = Redactor::new(vec![("upstream-secret-value-123".into(), "upstream_key")]);
        let mut c = Counts::new();
        (
            r.redact(text, &mut c).unwrap_or_else(|| text.to_string()),
            c,
        )
    }

    #[test]
    fn each_kind_is_caught() {
        for (text, kind) in [
            ("key sk-proj-abcdefghijklmnopqrstuvwxyz012345 here", "openai_key"),
            ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "anthropic_key"),
            ("sk-or-v1-0123456789abcdef0123456789abcdef01234567", "openrouter_key"),
            ("id AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
            ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_key"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789AB", "github_token"),
            ("xoxb-123456789012-abcdefghij", "slack_token"),
            ("AIzaSyA-abcdefghijklmnopqrstuvwxyz012345", "google_api_key"),
            ("sk_live_abcdefghijklmnop1234", "stripe_key"),
            ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "jwt"),
            ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----", "private_key"),
            ("db password=hunter2!", "assignment"),
            ("{\"api_key\": \"abc123def\"}", "assignment"),
            ("token upstream-secret-value-123 leaked", "upstream_key"),
        ] {
            let (out, counts) = red(text);
            assert!(out.contains(&format!("[REDACTED:{kind}]")), "{kind}: {out}");
            assert!(counts.contains_key(kind), "{kind}: {counts:?}");
        }
        let (out, _) = red("-----BEGIN PRIVATE KEY-----\nMIIEv\n-----END PRIVATE KEY-----\nafter");
        assert_eq!(out, "[REDACTED:private_key]\nafter");
        let (out, _) = red("password=hunter2 and api_key='s3cr3t'");
        assert_eq!(
            out,
            "password=[REDACTED:assignment] and api_key='[REDACTED:assignment]'"
        );
    }

    #[test]
    fn ordinary_text_is_untouched() {
        for text in [
            "user 550e8400-e29b-41d4-a716-446655440000 at commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
            "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
            "Forgot your password? Reset it from the settings page; the password must be 12 characters.",
            "skill-based routing; sk-short",
        ] {
            let mut c = Counts::new();
            assert_eq!(Redactor::new(vec![]).redact(text, &mut c), None, "{text}");
        }
    }
}
