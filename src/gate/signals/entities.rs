//! Entity provenance: every string argument, free text included, is read for
//! entities (URLs, domains, e-mail addresses, phone numbers, IBANs and
//! payment cards by their checksums, account numbers, file paths, ids and
//! numbers of any length), and each is
//! attributed to where it occurs in the conversation: the user's messages,
//! system or developer text, tool results (by call), or nowhere (the model
//! wrote it). Matching is by token on the caseless texts, so a two-digit id
//! counts and `13` does not match inside `2130`.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{json, Value};

use super::provenance::{leaves_of, occurs};
use super::Signals;
use crate::context::Context;

#[allow(clippy::expect_used)] // constant patterns, exercised by the tests
static IBAN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)[a-z]{2}[0-9]{2}(?: ?[a-z0-9]{4}){2,7}(?: ?[a-z0-9]{1,4})?(?-u:\b)")
        .expect("iban pattern")
});
#[allow(clippy::expect_used)] // constant patterns, exercised by the tests
static CARD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)[0-9](?:[ -]?[0-9]){12,18}(?-u:\b)").expect("card pattern")
});
#[allow(clippy::expect_used)] // constant patterns, exercised by the tests
static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:\+|(?-u:\b))[0-9][0-9 ().-]{5,18}[0-9](?-u:\b)").expect("phone pattern")
});

/// File name endings that make a dotted token a file, not a domain.
const FILE_TYPES: &[&str] = &[
    "pdf", "txt", "zip", "doc", "docx", "xls", "xlsx", "csv", "json", "md", "png", "jpg", "jpeg",
    "gif", "py", "rs", "js", "ts", "sh", "log", "tar", "gz", "yaml", "yml", "toml", "html", "xml",
    "ppt", "pptx", "mp4", "mp3", "wav", "bak", "sql", "db", "env", "key", "pem",
];

/// The entities of one caseless value: `(kind, text as written)`.
pub(super) fn of(value: &str) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = Vec::new();
    let mut push = |kind, text: &str| {
        let text = text.trim().to_string();
        if !text.is_empty() && !out.iter().any(|(_, t)| *t == text) {
            out.push((kind, text));
        }
    };
    // IBANs and phone numbers have 7+ digits; most values have none.
    let digits = value.bytes().filter(u8::is_ascii_digit).count();
    let long = if digits >= 7 { value } else { "" };
    for m in IBAN.find_iter(long).filter(|m| iban_checks(m.as_str())) {
        push("iban", m.as_str());
    }
    for m in CARD.find_iter(long).filter(|m| luhn(m.as_str())) {
        push("card", m.as_str());
    }
    for m in PHONE.find_iter(long) {
        let digits = m.as_str().chars().filter(char::is_ascii_digit).count();
        let spaced = m.as_str().contains([' ', '-', '(', '.']) || m.as_str().starts_with('+');
        if (7..=15).contains(&digits) && spaced {
            push("phone", m.as_str());
        }
    }
    for t in super::provenance::entities(value) {
        let kind = if t.contains("://") {
            "url"
        } else if t.contains('@') && t.contains('.') {
            "email"
        } else if t.starts_with('/')
            || t.starts_with("~/")
            || t.contains('\\')
            || t.contains('/')
            || t.rsplit_once('.')
                .is_some_and(|(_, ext)| FILE_TYPES.contains(&ext))
        {
            "path"
        } else if t.chars().all(|c| c.is_ascii_digit()) {
            match t.len() {
                13..=19 if luhn(t) => "card",
                8.. => "account",
                _ => "number",
            }
        } else if is_domain(t) {
            "domain"
        } else {
            "id"
        };
        push(kind, t);
    }
    out
}

/// A host name: two or more dot-separated labels of letters, digits and
/// inner hyphens, the last (the top-level domain) letters only
/// (`www.secure-systems-252.com`; not `1.2.3`, not `10.0.0.1`).
fn is_domain(t: &str) -> bool {
    let labels: Vec<&str> = t.trim_end_matches('.').split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    labels.len() >= 2
        && labels.iter().all(label_ok)
        && labels
            .last()
            .is_some_and(|tld| tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_alphabetic()))
}

/// Whether an IBAN's check digits hold (ISO 13616: the first four
/// characters moved to the end, letters as 10–35, the number mod 97 is 1).
fn iban_checks(text: &str) -> bool {
    let s: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
    if !(15..=34).contains(&s.len()) {
        return false;
    }
    let mut rem: u32 = 0;
    for c in s[4..].iter().chain(&s[..4]) {
        let v = match c.to_digit(36) {
            Some(v) => v,
            None => return false,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

/// Whether a card number's Luhn check digit holds (13 to 19 digits;
/// spaces and hyphens between them allowed).
fn luhn(text: &str) -> bool {
    let digits: Vec<u32> = text.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len())
        || text
            .chars()
            .any(|c| !(c.is_ascii_digit() || c == ' ' || c == '-'))
    {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| match i % 2 {
            1 if d * 2 > 9 => d * 2 - 9,
            1 => d * 2,
            _ => d,
        })
        .sum();
    sum % 10 == 0
}

/// Where `entity` occurs: `user`, `system`, `tool_result:<call id>`.
fn sources(ctx: &Context, entity: &str) -> Vec<String> {
    let f = ctx.folded();
    let mut out = Vec::new();
    if occurs(&f.user, entity) {
        out.push("user".to_string());
    }
    if occurs(&f.system, entity) {
        out.push("system".to_string());
    }
    for (id, text) in &f.tools {
        if occurs(text, entity) {
            out.push(format!("tool_result:{id}"));
        }
    }
    out
}

/// Sets `provenance.entities` (`{kind, path, sources}` per entity; no
/// entity text, so it is audited as it is) and
/// `provenance.entities_only_from_tool_results` (`{kind, path}` of those found
/// in tool results and not in the user's or system text).
pub(super) fn signals(s: &mut Signals, ctx: &Context, args: &Value) {
    let mut leaves = Vec::new();
    leaves_of(args, String::new(), &mut leaves);
    let mut all = Vec::new();
    let mut only_tools = Vec::new();
    for (path, value) in leaves {
        let value = crate::fold::fold(value.trim());
        for (kind, text) in of(&value) {
            let from = sources(ctx, &text);
            let said = from.iter().any(|s| s == "user" || s == "system");
            if !said && from.iter().any(|s| s.starts_with("tool_result:")) {
                let e = json!({"kind": kind, "path": path});
                if !only_tools.contains(&e) {
                    only_tools.push(e);
                }
            }
            all.push(json!({"kind": kind, "path": path, "sources": from}));
        }
    }
    s.set("provenance.entities", Value::Array(all));
    s.set(
        "provenance.entities_only_from_tool_results",
        Value::Array(only_tools),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_are_classified() {
        let found = of("mail bob@corp.example about https://x.example/a, file /srv/a.txt, id acc-99-1337, \
             order 13, account 12345678901, iban de89 3704 0044 0532 0130 00, call +1 415 555 0134, site corp.example");
        let kinds: Vec<(&str, &str)> = found.iter().map(|(k, t)| (*k, t.as_str())).collect();
        for want in [
            ("email", "bob@corp.example"),
            ("url", "https://x.example/a"),
            ("path", "/srv/a.txt"),
            ("id", "acc-99-1337"),
            ("number", "13"),
            ("account", "12345678901"),
            ("iban", "de89 3704 0044 0532 0130 00"),
            ("phone", "+1 415 555 0134"),
            ("domain", "corp.example"),
        ] {
            assert!(kinds.contains(&want), "{want:?} in {kinds:?}");
        }
    }

    #[test]
    fn domains_with_digits_cards_and_ibans_are_told_by_their_shape_and_checksums() {
        // Values are folded before they are read, as `signals` does.
        let kinds = |v: &str| -> Vec<(&'static str, String)> { of(&crate::fold::fold(v)) };
        let has = |v: &str, want: (&str, &str)| {
            let k = kinds(v);
            assert!(
                k.iter().any(|(a, b)| *a == want.0 && b == want.1),
                "{want:?} in {k:?}"
            );
        };
        has(
            "see www.secure-systems-252.com now",
            ("domain", "www.secure-systems-252.com"),
        );
        has(
            "log in at login-2.bank-1.example",
            ("domain", "login-2.bank-1.example"),
        );
        has(
            "pay with 4111 1111 1111 1111 today",
            ("card", "4111 1111 1111 1111"),
        );
        has("card 4012888888881881", ("card", "4012888888881881"));
        has(
            "iban GB82 WEST 1234 5698 7654 32",
            ("iban", "gb82 west 1234 5698 7654 32"),
        );
        for (v, not) in [
            ("version 1.2.3", "domain"),
            ("host 10.0.0.1", "domain"),
            ("card 4111 1111 1111 1112", "card"),
            ("order 1234567890123", "card"),
            ("iban gb82 west 1234 5698 7654 33", "iban"),
        ] {
            assert!(
                !kinds(v).iter().any(|(k, _)| *k == not),
                "{v}: {:?}",
                kinds(v)
            );
        }
    }

    #[test]
    fn each_entity_is_attributed_by_token() {
        let mut t = crate::context::Texts::default();
        t.push_tool(
            "call_9",
            "Found: file 13 (old.zip), owner Drop@Evil.example",
        );
        let ctx = Context {
            user_text: "Delete the file named old.zip, ticket 2130".into(),
            tool_text: t.tool,
            tool_results: t.tool_results,
            ..Context::default()
        };
        let mut s = Signals::default();
        signals(
            &mut s,
            &ctx,
            &json!({"file_id": 13, "cc": "drop@evil.example", "note": "ref 4242", "name": "old.zip"}),
        );
        assert_eq!(
            s.get("provenance.entities").unwrap().value,
            json!([
                {"kind": "email", "path": "/cc", "sources": ["tool_result:call_9"]},
                {"kind": "number", "path": "/file_id", "sources": ["tool_result:call_9"]},
                {"kind": "path", "path": "/name", "sources": ["user", "tool_result:call_9"]},
                {"kind": "number", "path": "/note", "sources": []},
            ])
        );
        assert_eq!(
            s.get("provenance.entities_only_from_tool_results")
                .unwrap()
                .value,
            json!([{"kind": "email", "path": "/cc"}, {"kind": "number", "path": "/file_id"}])
        );
    }
}
