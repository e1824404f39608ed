//! The approval webhook: each question is POSTed as JSON, signed
//! `x-toolgate-signature: t=<unix>,sha256=<hex HMAC-SHA256 of "t.body">`,
//! and retried with backoff while the question is open. The receiver may
//! answer at once (`{"id": …, "decision": "approve" | "deny", "by": …,
//! "scope": …}` in its response, signed the same way with the same key, `id`
//! the question's; an answer unsigned, signed wrong, older than five
//! minutes or naming another question is ignored) or later through the API.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method};
use http_body_util::{BodyExt, Full, Limited};
use serde::Deserialize;

use super::question::Question;
use super::{Answer, Approvals, Channel};
use crate::error::Error;
use crate::upstream::Upstream;

/// Attempts per question (the first and its retries).
const ATTEMPTS: u32 = 8;
const FIRST_DELAY: Duration = Duration::from_millis(500);
const MAX_DELAY: Duration = Duration::from_secs(30);
/// How long one delivery may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// How much of the receiver's answer is read.
const MAX_ANSWER: usize = 16 * 1024;

/// The webhook's client and signing key.
pub(super) struct Hook {
    upstream: Arc<Upstream>,
    secret: Arc<[u8]>,
}

/// How old a signed answer may be.
const MAX_SKEW_SECS: u64 = 300;

#[derive(Deserialize)]
struct Reply {
    id: Option<String>,
    decision: Option<String>,
    by: Option<String>,
    scope: Option<String>,
}

impl Hook {
    pub(super) fn new(
        url: &str,
        ca_file: Option<&std::path::Path>,
        secret: Vec<u8>,
    ) -> Result<Hook, Error> {
        Ok(Hook {
            upstream: Arc::new(Upstream::to_url(
                url,
                ("approval", "approval.webhook"),
                ca_file,
                TIMEOUT,
            )?),
            secret: Arc::from(secret),
        })
    }

    /// Delivers `q` in the background until it is delivered, answered
    /// elsewhere, expired, or the attempts run out.
    pub(super) fn send(&self, approvals: Arc<Approvals>, q: Arc<Question>) {
        let (up, secret) = (self.upstream.clone(), self.secret.clone());
        tokio::spawn(async move { deliver(&up, &secret, &approvals, &q).await });
    }
}

/// `t=<unix>,sha256=<hex>` for `body` sent at `t`.
pub fn signature(secret: &[u8], t: u64, body: &[u8]) -> String {
    let mac = crate::fence::marker::hmac_sha256(secret, &[t.to_string().as_bytes(), b".", body]);
    format!("t={t},sha256={}", crate::digest::hex(&mac))
}

async fn deliver(up: &Upstream, secret: &[u8], approvals: &Approvals, q: &Question) {
    let Ok(body) = serde_json::to_vec(q) else {
        return;
    };
    let body = Bytes::from(body);
    let mut delay = FIRST_DELAY;
    for attempt in 1..=ATTEMPTS {
        if !approvals.is_open(&q.id) {
            return;
        }
        match post(up, secret, body.clone()).await {
            Ok((status, signed, answer)) if status.is_success() => {
                if answer.is_empty() {
                    return;
                }
                let Some(mut a) = reply(&answer)
                    .filter(|_| verified(secret, signed.as_deref(), &answer, &q.id, unix_now()))
                else {
                    tracing::warn!(approval = %q.id, "the approval webhook's answer is not signed for this question; ignored");
                    return;
                };
                let mut taken = approvals.answer(&q.id, a.clone(), None);
                if let Err(super::Refused::Anonymous) = taken {
                    // Approved for the session of an unauthenticated agent: this call only.
                    a.session = false;
                    taken = approvals.answer(&q.id, a, None);
                }
                tracing::info!(approval = %q.id, ok = taken.is_ok(), "the approval webhook answered");
                return;
            }
            Ok((status, _, _)) => {
                tracing::warn!(approval = %q.id, attempt, %status, "the approval webhook refused the question");
                let again = status.is_server_error()
                    || status == http::StatusCode::TOO_MANY_REQUESTS
                    || status == http::StatusCode::REQUEST_TIMEOUT;
                if !again {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(approval = %q.id, attempt, error = %e, "the approval webhook could not be reached");
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_DELAY);
    }
    tracing::warn!(approval = %q.id, "the approval webhook gave up; the call waits for the API or its time-out");
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// Whether `body`, answering question `id`, carries a fresh signature by
/// the webhook's key (`x-toolgate-signature: t=…,sha256=…`).
fn verified(secret: &[u8], signed: Option<&str>, body: &[u8], id: &str, now: u64) -> bool {
    let Some((t, mac)) = signed.and_then(|s| {
        let (t, mac) = s.split_once(',')?;
        Some((t.strip_prefix("t=")?.parse::<u64>().ok()?, mac))
    }) else {
        return false;
    };
    let fresh = now.abs_diff(t) <= MAX_SKEW_SECS;
    // Hashes compared, so the time taken says nothing about the MAC.
    let want = crate::digest::sha256(signature(secret, t, body).as_bytes());
    let mac_ok = want == crate::digest::sha256(format!("t={t},{mac}").as_bytes());
    let names = serde_json::from_slice::<Reply>(body)
        .ok()
        .and_then(|r| r.id)
        .is_some_and(|r| r == id);
    fresh && mac_ok && names
}

async fn post(
    up: &Upstream,
    secret: &[u8],
    body: Bytes,
) -> Result<(http::StatusCode, Option<String>, Bytes), Error> {
    let t = unix_now();
    let sig = signature(secret, t, &body);
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let payload = Full::new(body).map_err(|never| match never {}).boxed();
    let mut req = up.request(Method::POST, "", None, headers, payload)?;
    // After `request`, which drops `x-toolgate-*` headers an agent sent.
    if let Ok(v) = HeaderValue::from_str(&sig) {
        req.headers_mut().insert("x-toolgate-signature", v);
    }
    let resp = up.send(req).await?;
    let (head, body) = resp.into_parts();
    let signed = head
        .headers
        .get("x-toolgate-signature")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let read = Limited::new(body, MAX_ANSWER).collect();
    let bytes = match tokio::time::timeout(TIMEOUT, read).await {
        Ok(Ok(b)) => b.to_bytes(),
        _ => Bytes::new(),
    };
    Ok((head.status, signed, bytes))
}

/// The receiver's immediate answer, if its body has one.
fn reply(body: &[u8]) -> Option<Answer> {
    let r: Reply = serde_json::from_slice(body).ok()?;
    let approve = match r.decision.as_deref()? {
        "approve" => true,
        "deny" => false,
        _ => return None,
    };
    Some(Answer {
        approve,
        by: r
            .by
            .filter(|b| !b.trim().is_empty())
            .map(|b| b.chars().take(256).collect())
            .unwrap_or_else(|| "webhook".into()),
        channel: Channel::Webhook,
        session: r.scope.as_deref() == Some("session"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_an_hmac_of_time_dot_body() {
        let s = signature(b"k", 1_700_000_000, b"{}");
        let mac = crate::fence::marker::hmac_sha256(b"k", &[b"1700000000.{}"]);
        assert_eq!(
            s,
            format!("t=1700000000,sha256={}", crate::digest::hex(&mac))
        );
    }

    #[test]
    fn an_answer_counts_only_signed_fresh_and_for_its_question() {
        let body = br#"{"id":"q1","decision":"approve"}"#;
        let now = 1_700_000_000;
        let sig = signature(b"k", now, body);
        assert!(verified(b"k", Some(&sig), body, "q1", now + 10));
        assert!(!verified(b"k", None, body, "q1", now), "unsigned");
        assert!(
            !verified(b"other", Some(&sig), body, "q1", now),
            "another key"
        );
        assert!(
            !verified(b"k", Some(&sig), body, "q2", now),
            "another question"
        );
        assert!(!verified(b"k", Some(&sig), body, "q1", now + 3600), "stale");
        let tampered = br#"{"id":"q1","decision":"approve","scope":"session"}"#;
        assert!(
            !verified(b"k", Some(&sig), tampered, "q1", now),
            "another body"
        );
    }

    #[test]
    fn a_reply_answers_only_with_a_known_decision() {
        let a = reply(br#"{"decision":"approve","by":"ops","scope":"session"}"#);
        assert_eq!(
            a.map(|a| (a.approve, a.by, a.session)),
            Some((true, "ops".into(), true))
        );
        assert_eq!(
            reply(br#"{"decision":"deny"}"#).map(|a| (a.approve, a.by)),
            Some((false, "webhook".into()))
        );
        assert!(reply(br#"{"decision":"maybe"}"#).is_none());
        assert!(reply(b"accepted").is_none());
        assert!(reply(br#"{"received":true}"#).is_none());
    }
}
