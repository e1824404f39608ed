//! Entity provenance: every string argument, free text included, is read for
//! entities (URLs, domains, e-mail addresses, phone numbers, IBANs and
//! account numbers, file paths, ids and numbers of any length), and each is
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
    for m in IBAN.find_iter(long) {
        push("iban", m.as_str());
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
            if t.len() >= 8 {
                "account"
            } else {
                "number"
            }
        } else if t.contains('.')
            && !t.chars().any(|c| c.is_ascii_digit())
            && t.rsplit('.').next().is_some_and(|tld| tld.len() >= 2)
        {
            "domain"
        } else {
            "id"
        };
        push(kind, t);
    }
    out
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
