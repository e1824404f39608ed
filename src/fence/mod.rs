//! Tool results as untrusted content: secrets redacted, long results cut,
//! each one wrapped in a fence the model is told about once.
//!
//! Text work only: each protocol finds its request's tool results
//! ([`ToolResult`]) and where the notice goes; this module never reads a
//! wire format. The same request always produces the same bytes.
//!
//! - [`marker`]: the fence itself (markers, neutralising, modes, the notice).
//! - [`redact`] and [`secrets`]: what is redacted, and the secret detectors.

pub mod marker;
pub mod redact;
pub mod secrets;

use std::borrow::Cow;

use serde_json::{json, Value};

use crate::policy::PolicySet;
use marker::{Mode, Source};
use redact::{Counts, Redactor};

/// What fencing did to one request.
#[derive(Debug, Default)]
pub struct Report {
    /// Tool results fenced.
    pub fenced: usize,
    pub redactions: Counts,
    pub truncated: usize,
}

/// How to fence.
pub struct Settings<'a> {
    pub secret: &'a [u8],
    pub redactor: &'a Redactor,
    pub policy: &'a PolicySet,
    pub max_bytes: Option<usize>,
}

/// One tool result of a request, found by its protocol.
pub struct ToolResult<'a> {
    /// The call id it answers.
    pub call_id: String,
    /// The tool that produced it (`unknown` when the request does not say).
    pub tool: String,
    /// The first URL in the call's arguments, when the request holds the call.
    pub url: Option<String>,
    /// Its content: a string, an array of parts (parts with `text` are
    /// fenced, others left alone), null, or any other value (fenced as its
    /// JSON text).
    pub content: &'a mut Value,
}

/// The first `http(s)://` URL in `text`.
pub fn first_url(text: &str) -> Option<String> {
    let start = ["https://", "http://"]
        .iter()
        .filter_map(|p| text.find(p))
        .min()?;
    let url: String = text[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !"\"'<>\\".contains(*c))
        .collect();
    Some(url)
}

fn truncate<'a>(text: &'a str, max: Option<usize>, report: &mut Report) -> Cow<'a, str> {
    match max {
        Some(max) if text.len() > max => {
            let mut cut = max;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            report.truncated += 1;
            Cow::Owned(format!(
                "{}\n[truncated: {} of {} bytes removed]",
                &text[..cut],
                text.len() - cut,
                text.len()
            ))
        }
        _ => Cow::Borrowed(text),
    }
}

/// Redacts, truncates and wraps one piece of text.
fn process(
    text: &str,
    src: &Source<'_>,
    mode: Mode,
    s: &Settings<'_>,
    report: &mut Report,
) -> String {
    let redacted = s.redactor.redact(text, &mut report.redactions);
    let text = truncate(redacted.as_deref().unwrap_or(text), s.max_bytes, report);
    marker::wrap(s.secret, src, &text, mode)
}

/// Fences `results` in place. The caller adds [`marker::notice`] to the
/// request (see `Protocol::fence`).
pub fn apply(results: Vec<ToolResult<'_>>, s: &Settings<'_>) -> Report {
    let mut report = Report::default();
    for r in results {
        let mode = s.policy.fence_mode(&r.tool);
        if mode == Mode::Off {
            continue;
        }
        let src = Source {
            tool: &r.tool,
            call_id: &r.call_id,
            url: r.url.as_deref(),
        };
        fence_content(r.content, &src, mode, s, &mut report);
        report.fenced += 1;
    }
    report
}

fn fence_content(
    content: &mut Value,
    src: &Source<'_>,
    mode: Mode,
    s: &Settings<'_>,
    report: &mut Report,
) {
    let text = match &mut *content {
        Value::Array(parts) => {
            // Any part carrying text (`text`, `input_text`, …) is fenced; images and other parts are not.
            for p in parts.iter_mut().filter(|p| p["text"].is_string()) {
                let text = p["text"].as_str().unwrap_or("").to_string();
                p["text"] = json!(process(&text, src, mode, s, report));
            }
            return;
        }
        Value::String(t) => process(&std::mem::take(t), src, mode, s, report),
        Value::Null => process("", src, mode, s, report),
        // A non-standard object or number: fenced as its JSON text, nothing lost.
        other => process(&other.to_string(), src, mode, s, report),
    };
    *content = Value::String(text);
}
