//! What a person is asked: the call (arguments redacted and clipped), the
//! rule that asked, who asked and when it expires; and the digests that bind
//! an answer to exactly that call, or a session approval to the same tool
//! with the same arguments.

use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

use crate::call::Call;
use crate::context::Context;
use crate::digest::{hex, rfc3339_of, sha256};
use crate::fence::redact::Redactor;

/// Longest argument text shown (after redaction), in bytes.
const MAX_ARGS: usize = 16 * 1024;
/// Longest user request shown, in characters.
const MAX_REQUEST: usize = 500;
/// Longest name or id shown, in characters.
const MAX_NAME: usize = 256;

/// One pending question, as `GET /approvals` lists it and the webhook receives it.
#[derive(Debug, Clone, Serialize)]
pub struct Question {
    pub id: String,
    pub tool: String,
    /// The arguments' text with secrets redacted, clipped.
    pub arguments: String,
    pub arguments_clipped: bool,
    /// The size of the arguments the call runs with (redacted), in bytes.
    pub arguments_bytes: usize,
    /// Binds an answer to this call: SHA-256 of tool, canonical arguments,
    /// call id and session.
    pub digest: String,
    pub rule: Option<String>,
    pub principal: String,
    pub session: String,
    pub phase: String,
    pub agent: String,
    pub protocol: &'static str,
    pub call_id: String,
    pub request_id: String,
    /// The user's latest message, clipped.
    pub request: Option<String>,
    pub created: String,
    pub expires: String,
}

/// The arguments as one canonical text: parsed and written with sorted keys
/// and no spaces, so the same arguments give the same digest whatever their
/// spacing or key order; text that is not JSON stays as it is.
pub fn canonical(arguments: &str) -> String {
    match serde_json::from_str::<Value>(arguments) {
        // serde_json's maps are ordered by key (no `preserve_order`).
        Ok(v) => v.to_string(),
        Err(_) => arguments.to_string(),
    }
}

fn joined(parts: &[&str]) -> [u8; 32] {
    let mut buf = Vec::new();
    for p in parts {
        buf.extend_from_slice(&(p.len() as u64).to_be_bytes());
        buf.extend_from_slice(p.as_bytes());
    }
    sha256(&buf)
}

/// The digest one answer is bound to.
pub fn call_digest(call: &Call, canonical: &str, session: &str) -> [u8; 32] {
    joined(&["call", &call.name, canonical, &call.id, session])
}

/// The key of a session approval: the same tool with the same arguments,
/// for the same principal in the same session.
pub fn grant_key(ctx: &Context, tool: &str, canonical: &str) -> [u8; 32] {
    joined(&["session", &ctx.principal, &ctx.session, tool, canonical])
}

fn clip_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The question for `call`, asked by `rule`, open from `created` to `expires`.
pub struct Asking<'a> {
    pub id: &'a str,
    pub call: &'a Call,
    pub ctx: &'a Context,
    pub rule: Option<&'a str>,
    pub digest: &'a [u8; 32],
    pub created: SystemTime,
    pub expires: SystemTime,
}

impl Asking<'_> {
    pub fn question(&self, redactor: &Redactor) -> Question {
        let mut counts = Default::default();
        let args = redactor
            .redact(&self.call.arguments, &mut counts)
            .unwrap_or_else(|| self.call.arguments.clone());
        let clipped = args.len() > MAX_ARGS;
        let arguments_bytes = args.len();
        let arguments = match clipped {
            true => {
                let mut end = MAX_ARGS;
                while !args.is_char_boundary(end) {
                    end -= 1;
                }
                args[..end].to_string()
            }
            false => args,
        };
        let ctx = self.ctx;
        Question {
            id: self.id.to_string(),
            tool: clip_chars(&self.call.name, MAX_NAME),
            arguments,
            arguments_clipped: clipped,
            arguments_bytes,
            digest: hex(self.digest),
            rule: self.rule.map(str::to_string),
            principal: ctx.principal.clone(),
            session: clip_chars(&ctx.session, MAX_NAME),
            phase: clip_chars(&ctx.phase, MAX_NAME),
            agent: clip_chars(&ctx.agent, MAX_NAME),
            protocol: ctx.protocol,
            call_id: clip_chars(&self.call.id, MAX_NAME),
            request_id: ctx.request_id.clone(),
            request: ctx.original_request.as_deref().map(|r| {
                let mut counts = Default::default();
                let r = redactor
                    .redact(r, &mut counts)
                    .unwrap_or_else(|| r.to_string());
                clip_chars(&r, MAX_REQUEST)
            }),
            created: rfc3339_of(self.created),
            expires: rfc3339_of(self.expires),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_arguments_ignore_spacing_and_key_order() {
        assert_eq!(
            canonical(r#"{ "b": 1, "a": [1, 2] }"#),
            r#"{"a":[1,2],"b":1}"#
        );
        assert_eq!(canonical("not json"), "not json");
        let call = |args: &str, id: &str| Call {
            id: id.into(),
            name: "pay".into(),
            arguments: args.into(),
            ..Call::default()
        };
        let a = call_digest(&call("{}", "c1"), "{}", "s");
        assert_eq!(a, call_digest(&call("{ }", "c1"), "{}", "s"));
        assert_ne!(a, call_digest(&call("{}", "c2"), "{}", "s"));
        assert_ne!(a, call_digest(&call("{}", "c1"), "{}", "t"));
        assert_ne!(a, call_digest(&call("{}", "c1"), r#"{"x":1}"#, "s"));
        // Length-prefixed parts: moving a byte across a boundary changes it.
        assert_ne!(joined(&["ab", "c"]), joined(&["a", "bc"]));
    }

    #[test]
    fn the_question_redacts_and_clips() {
        let ctx = Context {
            principal: "alice".into(),
            original_request: Some("x".repeat(600)),
            ..Context::default()
        };
        let call = Call {
            id: "c1".into(),
            name: "send".into(),
            arguments: format!(
                r#"{{"key":"sk-proj-abcdefghijklmnopqrstuvwxyz0123456789","pad":"{}"}}"#,
                "y".repeat(20_000)
            ),
            ..Call::default()
        };
        let now = SystemTime::now();
        let q = Asking {
            id: "i",
            call: &call,
            ctx: &ctx,
            rule: Some("r"),
            digest: &[0; 32],
            created: now,
            expires: now,
        }
        .question(&Redactor::new(Vec::new()));
        assert!(
            !q.arguments.contains("sk-proj-abc"),
            "{}",
            &q.arguments[..80]
        );
        assert!(q.arguments.contains("[REDACTED"));
        assert!(q.arguments_clipped && q.arguments.len() <= MAX_ARGS);
        assert_eq!(q.request.as_deref().map(|r| r.chars().count()), Some(501));
    }
}
