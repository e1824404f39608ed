//! The approvals API on the admin port: `GET /approvals` lists the calls
//! waiting for a person, `POST /approvals/{id}` answers one (both need
//! `Authorization: Bearer` with the token from `[approval] token_env`), and
//! `/approvals/ui` is the page a person answers them on (static: it asks
//! for the token and calls the API from the browser).

use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::json;

use crate::approval::{Answer, Channel, Refused};
use crate::proxy::state::State;

const PAGE: &str = include_str!("../approval/ui/index.html");
const SCRIPT: &str = include_str!("../approval/ui/ui.js");
const STYLE: &str = include_str!("../approval/ui/ui.css");
/// The page loads only its own script and style, and nothing may frame it.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
/// Longest answer body.
const MAX_BODY: usize = 16 * 1024;
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// `POST /approvals/{id}`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    decision: String,
    by: String,
    #[serde(default)]
    scope: Option<String>,
    /// The question's digest as the person saw it: the answer is refused
    /// when it is not the waiting call's.
    #[serde(default)]
    digest: Option<String>,
    /// `api` (the default), `ui` or `cli`.
    #[serde(default)]
    channel: Option<String>,
}

fn respond(status: StatusCode, ctype: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(ctype),
    );
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    h.insert(
        "x-content-type-options",
        header::HeaderValue::from_static("nosniff"),
    );
    r
}

fn json(status: StatusCode, v: serde_json::Value) -> Response<Full<Bytes>> {
    respond(status, "application/json", Bytes::from(v.to_string()))
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json(status, json!({"error": message}))
}

fn asset(ctype: &'static str, text: &'static str) -> Response<Full<Bytes>> {
    let mut r = respond(StatusCode::OK, ctype, Bytes::from_static(text.as_bytes()));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_FRAME_OPTIONS,
        header::HeaderValue::from_static("DENY"),
    );
    h.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    r
}

/// Whether `path` is the approvals API's.
pub fn owns(path: &str) -> bool {
    path == "/approvals" || path.starts_with("/approvals/")
}

pub async fn handle(req: Request<Incoming>, state: &State) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let get = req.method() == Method::GET || req.method() == Method::HEAD;
    match path.as_str() {
        "/approvals/ui" | "/approvals/ui/" if get => {
            return asset("text/html; charset=utf-8", PAGE)
        }
        "/approvals/ui.js" if get => return asset("text/javascript; charset=utf-8", SCRIPT),
        "/approvals/ui.css" if get => return asset("text/css; charset=utf-8", STYLE),
        _ => {}
    }
    let approvals = &state.approvals;
    if !approvals.authorized(req.headers().get(header::AUTHORIZATION)) {
        let mut r = error(StatusCode::UNAUTHORIZED, "a bearer token is required");
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return r;
    }
    if path == "/approvals" {
        if !get {
            return error(StatusCode::METHOD_NOT_ALLOWED, "use GET");
        }
        let pending = approvals.list_all().await;
        return json(StatusCode::OK, json!({ "pending": pending }));
    }
    let id = path.trim_start_matches("/approvals/");
    if id.is_empty() || id.contains('/') {
        return error(StatusCode::NOT_FOUND, "not found");
    }
    if req.method() != Method::POST {
        return error(StatusCode::METHOD_NOT_ALLOWED, "use POST");
    }
    let id = id.to_string();
    let read = Limited::new(req.into_body(), MAX_BODY).collect();
    let body = match tokio::time::timeout(BODY_TIMEOUT, read).await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(_)) => return error(StatusCode::PAYLOAD_TOO_LARGE, "the body is too large"),
        Err(_) => return error(StatusCode::REQUEST_TIMEOUT, "the body was not sent in time"),
    };
    let answer = match read_decision(&body) {
        Ok(a) => a,
        Err(m) => return error(StatusCode::BAD_REQUEST, &m),
    };
    let (answer, digest) = answer;
    let (approve, session) = (answer.approve, answer.session);
    match approvals
        .answer_anywhere(&id, answer, digest.as_deref())
        .await
    {
        Ok(()) => json(
            StatusCode::OK,
            json!({
                "id": id,
                "decision": if approve { "approve" } else { "deny" },
                "scope": if session { "session" } else { "call" },
            }),
        ),
        Err(Refused::Unknown) => error(StatusCode::NOT_FOUND, "no such approval"),
        Err(Refused::Settled) => error(StatusCode::CONFLICT, "this approval is already settled"),
        Err(Refused::Mismatch) => {
            error(StatusCode::CONFLICT, "the digest is not the waiting call's")
        }
        Err(Refused::Anonymous) => error(
            StatusCode::BAD_REQUEST,
            "session approvals need an authenticated agent ([[client]]): approve this call alone",
        ),
    }
}

/// The answer in a `POST /approvals/{id}` body, and the digest it names.
fn read_decision(body: &[u8]) -> Result<(Answer, Option<String>), String> {
    let d: Decision =
        serde_json::from_slice(body).map_err(|e| format!("the body is not a decision: {e}"))?;
    let approve = match d.decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return Err("decision must be \"approve\" or \"deny\"".into()),
    };
    let session = match d.scope.as_deref() {
        None | Some("call") => false,
        Some("session") => true,
        Some(_) => return Err("scope must be \"call\" or \"session\"".into()),
    };
    let channel = match d.channel.as_deref() {
        None => Channel::Api,
        Some(c) => Channel::named(c).ok_or("channel must be \"api\", \"ui\" or \"cli\"")?,
    };
    let by = d.by.trim();
    if by.is_empty() || by.chars().count() > 256 || by.chars().any(char::is_control) {
        return Err("by must name who decides (1 to 256 printable characters)".into());
    }
    Ok((
        Answer {
            approve,
            by: by.to_string(),
            channel,
            session,
        },
        d.digest,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_is_read_strictly() {
        let ok =
            read_decision(br#"{"decision":"approve","by":"ana","scope":"session","channel":"ui"}"#);
        assert_eq!(
            ok.map(|(a, d)| (a.approve, a.by, a.channel, a.session, d)),
            Ok((true, "ana".into(), Channel::Ui, true, None))
        );
        for bad in [
            r#"{"decision":"yes","by":"a"}"#,
            r#"{"decision":"deny"}"#,
            r#"{"decision":"deny","by":" "}"#,
            r#"{"decision":"deny","by":"a","scope":"forever"}"#,
            r#"{"decision":"deny","by":"a","channel":"webhook"}"#,
            r#"{"decision":"deny","by":"a","extra":1}"#,
            "not json",
        ] {
            assert!(read_decision(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    /// The ranges of the page's `HIDDEN` class, as `(first, last)`.
    fn hidden_ranges() -> Vec<(u32, u32)> {
        let line = SCRIPT
            .lines()
            .find(|l| l.starts_with("const HIDDEN = /["))
            .unwrap_or_default();
        let class = line
            .trim_start_matches("const HIDDEN = /[")
            .split(']')
            .next()
            .unwrap_or_default();
        let cp = |s: &str| u32::from_str_radix(s.trim_matches(|c| c == '{' || c == '}'), 16).ok();
        // `\u{0000}-\u{0008}\u{00AD}…`: each piece a code point, and
        // whether a range opens after it.
        class
            .split("\\u")
            .filter_map(|piece| {
                let (a, dash) = piece.split_once('}')?;
                Some((cp(a)?, dash == "-"))
            })
            .fold(Vec::new(), |mut out: Vec<(u32, u32)>, (c, opens)| {
                match out.last_mut() {
                    Some(last) if last.1 == u32::MAX => last.1 = c,
                    _ => out.push((c, if opens { u32::MAX } else { c })),
                }
                out
            })
    }

    #[test]
    fn the_page_marks_every_character_no_reader_counts() {
        let ranges = hidden_ranges();
        assert!(ranges.len() > 10, "{ranges:?}");
        let marked = |c: u32| ranges.iter().any(|&(a, b)| (a..=b).contains(&c));
        for (lo, hi) in crate::fold::IGNORABLE {
            for c in lo..=hi {
                assert!(marked(c), "U+{c:04X} is not marked on the page");
            }
        }
        // Controls but tab and newline, and the variation selectors
        // supplement that hid `attacker-acct` after `acme`.
        for c in [0x00, 0x1B, 0x7F, 0x9F, 0x202E, 0xE0100, 0xE01EF] {
            assert!(marked(c), "U+{c:04X}");
        }
        assert!(!marked(0x09) && !marked(0x0A) && !marked(u32::from('a')));
    }
}
