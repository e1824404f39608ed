//! Deterministic detectors over every string in a call's arguments: URLs and
//! their domains, e-mail addresses, file paths and traversal, secrets, money.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{json, Value};

struct Patterns {
    url: Regex,
    email: Regex,
    path: Regex,
    traversal: Regex,
    money: Regex,
}

#[allow(clippy::expect_used)] // the patterns are constants, checked by the tests below
static P: LazyLock<Patterns> = LazyLock::new(|| {
    let r = |s: &str| Regex::new(s).expect("detector pattern");
    Patterns {
        url: r(
            r#"(?i)\b(?:https?|ftp|wss?|file)://([^\s/?#"'<>:@]+(?::[^\s/?#"'<>@]*)?@)?([^\s/?#"'<>:]+)[^\s"'<>]*"#,
        ),
        email: r(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
        path: r(
            r#"(?:^|[\s"'=(])((?:~|\.{1,2})?/[\w.\-~]+(?:/[\w.\-~]*)*|[A-Za-z]:\\[^\s"'<>|]*)"#,
        ),
        traversal: r(r"(?i)(?:\.\.[/\\]|%2e%2e(?:%2f|%5c|/|\\))"),
        money: r(
            r"(?i)(?:[$€£¥]\s?(\d[\d,]*(?:\.\d+)?)|(\d[\d,]*(?:\.\d+)?)\s?(?:usd|eur|gbp|dollars?|euros?|pounds?)\b)",
        ),
    }
});

/// Every string leaf of `v` with its JSON pointer.
pub fn strings<'a>(v: &'a Value, path: String, out: &mut Vec<(String, &'a str)>) {
    match v {
        Value::String(s) => out.push((path, s)),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate().filter(|(_, x)| may_hold_strings(x)) {
                strings(x, format!("{path}/{i}"), out);
            }
        }
        Value::Object(o) => {
            for (k, x) in o.iter().filter(|(_, x)| may_hold_strings(x)) {
                // One allocation a key: escaped (RFC 6901) only when it must be.
                let mut p = String::with_capacity(path.len() + 1 + k.len());
                p.push_str(&path);
                p.push('/');
                if k.contains(['~', '/']) {
                    p.push_str(&k.replace('~', "~0").replace('/', "~1"));
                } else {
                    p.push_str(k);
                }
                strings(x, p, out);
            }
        }
        _ => {}
    }
}

/// Whether `v` is or holds a string: a number, bool or null has none to
/// point at, so no pointer is built for it.
fn may_hold_strings(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Array(_) | Value::Object(_))
}

/// The `detect.*` signals for these strings.
pub fn detect(strings: &[(String, &str)]) -> Value {
    let p = &*P;
    let (mut urls, mut domains, mut emails, mut paths, mut secrets, mut money) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    let mut traversal = false;
    let push = |v: &mut Vec<Value>, x: Value| {
        if !v.contains(&x) {
            v.push(x);
        }
    };
    for (_, s) in strings {
        // Cheap byte checks first: most strings hold none of these.
        let b = s.as_bytes();
        let has_url = memchr::memmem::find(b, b"://").is_some();
        if has_url {
            for c in p.url.captures_iter(s) {
                push(&mut urls, json!(c[0].to_string()));
                if let Some(host) = c.get(2) {
                    push(
                        &mut domains,
                        json!(host.as_str().to_ascii_lowercase().trim_end_matches('.')),
                    );
                }
            }
        }
        let rest: std::borrow::Cow<str> = if has_url {
            p.url.replace_all(s, " ")
        } else {
            std::borrow::Cow::Borrowed(s)
        };
        if memchr::memchr(b'@', rest.as_bytes()).is_some() {
            for m in p.email.find_iter(&rest) {
                push(&mut emails, json!(m.as_str()));
                if let Some((_, d)) = m.as_str().rsplit_once('@') {
                    push(&mut domains, json!(d.to_ascii_lowercase()));
                }
            }
        }
        if memchr::memchr2(b'/', b'\\', rest.as_bytes()).is_some() {
            for c in p.path.captures_iter(&rest) {
                push(&mut paths, json!(c[1].to_string()));
            }
        }
        traversal |= (memchr::memmem::find(b, b"..").is_some()
            || memchr::memchr(b'%', b).is_some())
            && p.traversal.is_match(s);
        for kind in crate::fence::secrets::kinds(s) {
            push(&mut secrets, json!(kind));
        }
        if b.iter().any(u8::is_ascii_digit) {
            for c in p.money.captures_iter(s) {
                let n = c
                    .get(1)
                    .or_else(|| c.get(2))
                    .map(|m| m.as_str().replace(',', ""));
                if let Some(amount) = n.and_then(|n| n.parse::<f64>().ok()) {
                    push(&mut money, json!(amount));
                }
            }
        }
    }
    json!({"urls": urls, "domains": domains, "emails": emails, "paths": paths,
           "traversal": traversal, "secrets": secrets, "money": money})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: Value) -> Value {
        let mut s = Vec::new();
        strings(&args, String::new(), &mut s);
        detect(&s)
    }

    #[test]
    fn finds_urls_domains_emails_paths_and_money() {
        let d = run(
            json!({"u": "see https://user:pw@Evil.Example.com:8443/x?q=1 now", "to": ["bob@corp.io"],
            "file": "/etc/passwd", "rel": "../../secret", "note": "pay $1,250.50 or 30 EUR"}),
        );
        assert_eq!(
            d["domains"],
            json!(["corp.io", "evil.example.com"]),
            "in key order: to, then u"
        );
        assert_eq!(d["emails"], json!(["bob@corp.io"]));
        assert_eq!(d["urls"].as_array().unwrap().len(), 1);
        assert!(d["paths"]
            .as_array()
            .unwrap()
            .contains(&json!("/etc/passwd")));
        assert_eq!(d["traversal"], true);
        assert_eq!(d["money"], json!([1250.5, 30.0]));
    }

    #[test]
    fn finds_each_kind_of_secret_and_not_ordinary_text() {
        for (text, kind) in [
            ("sk-proj-abcdefghijklmnopqrstuvwxyz012345", "openai_key"),
            ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "anthropic_key"),
            ("sk-or-v1-0123456789abcdef0123456789abcdef01234567", "openrouter_key"),
            ("AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789AB", "github_token"),
            ("xoxb-123456789012-abcdefghij", "slack_token"),
            ("AIzaSyA-abcdefghijklmnopqrstuvwxyz012345", "google_api_key"),
            ("sk_live_abcdefghijklmnop1234", "stripe_key"),
            ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "jwt"),
            ("-----BEGIN RSA PRIVATE KEY-----\nMIIE", "private_key"),
        ] {
            let d = run(json!({ "x": text }));
            assert!(d["secrets"].as_array().unwrap().contains(&json!(kind)), "{kind}: {d}");
        }
        let d = run(
            json!({"x": "a password is needed; id 550e8400-e29b-41d4-a716-446655440000, commit 9fceb02d0ae598e95dc970b74767f19372d61af8"}),
        );
        assert_eq!(d["secrets"], json!([]));
        assert_eq!(d["traversal"], false);
    }
}
