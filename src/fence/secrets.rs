//! Secret patterns shared by the argument detectors and tool-result redaction.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};

/// Secret kinds and their patterns (most specific first).
pub const PATTERNS: [(&str, &str); 11] = [
    // A PEM private key to its END line; without one, to the end of the
    // base64 block after the header (lines of 16+ base64 characters and the
    // PEM headers, separated by white space or escaped `\n`).
    (
        "private_key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|(?:(?:\s|\\[rn])+(?:[A-Za-z0-9+/=]{16,}|(?:Proc-Type|DEK-Info):[^\r\n\\]*))*)",
    ),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openrouter_key", r"\bsk-or-v1-[A-Za-z0-9]{32,}"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}"),
    ("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    (
        "aws_secret_key",
        r#"(?i)aws.{0,20}?secret.{0,20}?[=:"'\s]+([A-Za-z0-9/+]{40})\b"#,
    ),
    (
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})",
    ),
    ("slack_token", r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    ),
];

pub struct Compiled {
    /// One scan says which patterns occur at all.
    pub any: RegexSet,
    pub each: Vec<(&'static str, Regex)>,
}

#[allow(clippy::expect_used)] // constant patterns, exercised by the tests
pub static SECRETS: LazyLock<Compiled> = LazyLock::new(|| Compiled {
    any: RegexSet::new(PATTERNS.iter().map(|(_, p)| *p)).expect("secret patterns"),
    each: PATTERNS
        .iter()
        .map(|(k, p)| (*k, Regex::new(p).expect("secret pattern")))
        .collect(),
});

/// The kinds of secret found in `s`.
pub fn kinds(s: &str) -> Vec<&'static str> {
    SECRETS
        .any
        .matches(s)
        .iter()
        .map(|i| SECRETS.each[i].0)
        .collect()
}
