//! `toolgate approvals list | approve ID | deny ID`: the approvals API of a
//! running toolgate's admin port, from a terminal.

use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::args::{ApprovalsAction, ApprovalsArgs};
use crate::error::Error;

/// Longest argument text printed per call in `list`.
const SHOWN_ARGS: usize = 400;

fn failed(what: String, why: impl std::fmt::Display) -> Error {
    Error::io(what, std::io::Error::other(why.to_string()))
}

async fn call(
    a: &ApprovalsArgs,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, Error> {
    let token = std::env::var(&a.token_env)
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| failed("no approval token".into(), format!("set {}", a.token_env)))?;
    let uri: http::Uri = format!("http://{}{path}", a.addr)
        .parse()
        .map_err(|_| Error::BadRequest(format!("not a host:port: {}", a.addr)))?;
    let payload = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(payload))
        .map_err(|e| Error::BadRequest(e.to_string()))?;
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let where_ = format!("toolgate's admin port at {}", a.addr);
    let exchange = async {
        let resp = client
            .request(req)
            .await
            .map_err(|e| failed(where_.clone(), e))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| failed(where_.clone(), e))?
            .to_bytes();
        Ok::<_, Error>((status, body))
    };
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| failed(where_.clone(), "no answer in 10 s"))??;
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if !status.is_success() {
        let why = v.get("error").and_then(Value::as_str).unwrap_or("");
        return Err(failed(format!("{where_} answered {status}"), why));
    }
    Ok(v)
}

/// Runs the command; what it prints on success.
pub async fn run(a: &ApprovalsArgs) -> Result<String, Error> {
    match &a.action {
        ApprovalsAction::List { json } => {
            let v = call(a, Method::GET, "/approvals", None).await?;
            if *json {
                return Ok(format!(
                    "{}\n",
                    serde_json::to_string_pretty(&v).unwrap_or_default()
                ));
            }
            Ok(listing(&v))
        }
        ApprovalsAction::Approve { id, by, session } => {
            let scope = if *session { "session" } else { "call" };
            answer(a, id, "approve", by.as_deref(), scope).await
        }
        ApprovalsAction::Deny { id, by } => answer(a, id, "deny", by.as_deref(), "call").await,
    }
}

async fn answer(
    a: &ApprovalsArgs,
    id: &str,
    decision: &str,
    by: Option<&str>,
    scope: &str,
) -> Result<String, Error> {
    let by = by
        .map(str::to_string)
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "cli".into());
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(Error::BadRequest(format!("not an approval id: {id}")));
    }
    let body = json!({"decision": decision, "by": by, "scope": scope, "channel": "cli"});
    call(a, Method::POST, &format!("/approvals/{id}"), Some(body)).await?;
    Ok(format!("{id}: {decision} ({scope}) by {by}\n"))
}

/// A cell of the table: what a model or an agent wrote, shown as
/// [`shown`] shows it.
fn cell(v: &Value, key: &str) -> String {
    shown(v.get(key).and_then(Value::as_str).unwrap_or("-"))
}

/// `text` as a person may read it in a terminal: control characters
/// escaped (a terminal would act on them), and characters that change how
/// text reads without being seen (bidi controls, zero-width and other
/// format characters, variation selectors, tags: [`crate::fold::IGNORABLE`])
/// as a visible `⟨U+XXXX⟩`, as the approvals page shows them.
fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else if crate::fold::is_ignorable(c) {
            out.push_str(&format!("⟨U+{:04X}⟩", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// A call's arguments as compact JSON (serde_json writes control
/// characters as escapes), clipped; a text that is not JSON shown escaped.
fn arguments(v: &Value) -> String {
    let text = v.get("arguments").and_then(Value::as_str).unwrap_or("");
    let shown = match serde_json::from_str::<Value>(text) {
        Ok(parsed) => shown(&parsed.to_string()),
        Err(_) => shown(&text.escape_debug().to_string()),
    };
    let mut clipped: String = shown.chars().take(SHOWN_ARGS).collect();
    if clipped.len() < shown.len() {
        clipped.push('…');
    }
    clipped
}

/// The pending calls as a table, each call's arguments on the line below it.
fn listing(v: &Value) -> String {
    let list = v
        .get("pending")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if list.is_empty() {
        return "nothing is waiting\n".into();
    }
    const COLUMNS: [(&str, &str); 7] = [
        ("ID", "id"),
        ("TOOL", "tool"),
        ("RULE", "rule"),
        ("PRINCIPAL", "principal"),
        ("SESSION", "session"),
        ("PHASE", "phase"),
        ("EXPIRES", "expires"),
    ];
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|q| COLUMNS.iter().map(|(_, k)| cell(q, k)).collect())
        .collect();
    let widths: Vec<usize> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (h, _))| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([h.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                let pad = widths[i].saturating_sub(c.chars().count());
                l.push_str(c);
                l.push_str(&" ".repeat(pad + 2));
            }
        }
        l.trim_end().to_string() + "\n"
    };
    let mut out = line(COLUMNS.iter().map(|(h, _)| *h).collect());
    for (q, r) in list.iter().zip(&rows) {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push_str(&format!("  arguments: {}\n", arguments(q)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_a_table_with_readable_arguments_and_no_control_characters() {
        let v = json!({"pending": [
            {"id": "a1", "tool": "pay", "rule": "ask-money", "principal": "ana",
             "session": "s\u{1b}[2J", "phase": "execution", "expires": "2026-11-27T10:00:00Z",
             "arguments": "{\"amount\": 5, \"note\": \"x\\u001b[31m\"}"},
            {"id": "b22", "tool": "refund", "arguments": "not json\n"}
        ]});
        let text = listing(&v);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("ID   TOOL    RULE"), "{text}");
        assert!(lines[1].starts_with("a1   pay     ask-money"), "{text}");
        assert_eq!(
            lines[2],
            r#"  arguments: {"amount":5,"note":"x\u001b[31m"}"#
        );
        assert!(lines[3].starts_with("b22  refund  -"), "{text}");
        assert_eq!(lines[4], r"  arguments: not json\n");
        assert!(
            !text.contains('\u{1b}'),
            "no raw escape reaches the terminal: {text:?}"
        );
        assert!(text.contains(r"s\u{1b}[2J"), "{text}");
        assert_eq!(listing(&json!({"pending": []})), "nothing is waiting\n");
    }

    #[test]
    fn characters_that_hide_text_are_shown_as_marks() {
        // A right-to-left override, a zero-width space, and a variation
        // selector of the supplement (which hid `attacker-acct` after `acme`).
        let args = "{\"to\": \"acme\u{E0100}attacker-acct\", \"x\": \"a\u{202E}b\u{200B}c\"}";
        let v = json!({"pending": [{"id": "a1", "tool": "pay\u{200B}", "arguments": args}]});
        let text = listing(&v);
        for raw in ['\u{E0100}', '\u{202E}', '\u{200B}'] {
            assert!(!text.contains(raw), "{raw:?} printed raw: {text:?}");
        }
        for mark in ["⟨U+E0100⟩", "⟨U+202E⟩", "⟨U+200B⟩"] {
            assert!(text.contains(mark), "{mark}: {text}");
        }
        assert!(text.contains("pay⟨U+200B⟩"), "{text}");
    }
}
