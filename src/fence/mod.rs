//! Tool results as untrusted content: secrets redacted, long results cut,
//! each one wrapped in a fence the model is told about once.
//!
//! Text work only: each protocol finds its request's tool results
//! ([`ToolResult`]) and where the notice goes; this module never reads a
//! wire format. The same request always produces the same bytes.
//!
//! - [`marker`]: the fence itself (markers, neutralising, modes, the notice).
//! - [`redact`] and [`secrets`]: what is redacted, and the secret detectors.
//! - [`kept`]: fenced results remembered, for the turns that send them again.

pub mod kept;
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
pub struct Fenced {
    /// Tool results fenced.
    pub fenced: usize,
    pub redactions: Counts,
    pub truncated: usize,
}

impl Fenced {
    /// Adds what `other` counted of redactions and cuts.
    pub fn add(&mut self, other: &Fenced) {
        for (kind, n) in &other.redactions {
            *self.redactions.entry(kind).or_default() += n;
        }
        self.truncated += other.truncated;
    }
}

/// How to fence.
pub struct Settings<'a> {
    pub secret: &'a [u8],
    pub redactor: &'a Redactor,
    pub policy: &'a PolicySet,
    pub max_bytes: Option<usize>,
    /// Results fenced before, for the same `secret` and `redactor`; `None`
    /// fences every result again.
    pub kept: Option<&'a kept::Kept>,
    /// Digests of the results' texts hashed already, to find them in `kept`.
    pub digests: kept::Digests<'a>,
}

/// One tool result of a request, found by its protocol.
pub struct ToolResult<'a> {
    /// The call id it answers.
    pub call_id: String,
    /// The tool that produced it (`unknown` when the request does not say).
    pub tool: String,
    /// The first URL in the call's arguments, when the request holds the call.
    pub url: Option<String>,
    /// Its content: a string, an array of parts (see [`fence_part`]), an
    /// image (left alone), null, or any other value (fenced as its JSON text).
    pub content: &'a mut Value,
}

/// Part types that carry no text the model reads as words (their other
/// fields are left alone), in caseless form.
const MEDIA: [&str; 6] = [
    "image_url",
    "input_image",
    "image",
    "input_audio",
    "audio",
    "computer_screenshot",
];

fn is_media(v: &Value) -> bool {
    MEDIA
        .iter()
        .any(|m| crate::fold::reads_as(v.get("type"), m))
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

fn truncate<'a>(text: &'a str, max: Option<usize>, report: &mut Fenced) -> Cow<'a, str> {
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

/// Redacts, truncates and wraps one piece of text, or finds it done before.
fn process(
    text: &str,
    src: &Source<'_>,
    mode: Mode,
    s: &Settings<'_>,
    report: &mut Fenced,
) -> String {
    let Some(kept) = s.kept else {
        return fence_text(text, src, mode, s, report);
    };
    let digest = s.digests.of(src.call_id, text);
    let key = kept::key(s.secret, s.max_bytes, mode, src, text, digest);
    if let Some(done) = kept.get(&key, report) {
        return done;
    }
    let mut own = Fenced::default();
    let out = fence_text(text, src, mode, s, &mut own);
    report.add(&own);
    kept.keep(key, &out, own);
    out
}

fn fence_text(
    text: &str,
    src: &Source<'_>,
    mode: Mode,
    s: &Settings<'_>,
    report: &mut Fenced,
) -> String {
    let redacted = s.redactor.redact(text, &mut report.redactions);
    let text = truncate(redacted.as_deref().unwrap_or(text), s.max_bytes, report);
    marker::wrap(s.secret, src, &text, mode)
}

/// Fences `results` in place. The caller adds [`marker::notice`] to the
/// request (see `Protocol::fence`).
pub fn apply(results: Vec<ToolResult<'_>>, s: &Settings<'_>) -> Fenced {
    let mut report = Fenced::default();
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
    report: &mut Fenced,
) {
    if content.is_object() && is_media(content) {
        return;
    }
    let text = match &mut *content {
        Value::Array(parts) => {
            for p in parts.iter_mut() {
                fence_part(p, src, mode, s, report);
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

/// Fences one part of an array of content, whatever its shape: every
/// member a lenient reader takes for `text` (`"Text"` too; a value that is
/// not a string becomes its fenced JSON text); a document's text source; a
/// nested `content` array, part by part. An image or audio part is left
/// alone. Any other part (a bare string, a number, an object of unknown
/// type) becomes a text part of its fenced JSON text, so nothing a reader
/// might show the model goes unfenced.
fn fence_part(
    part: &mut Value,
    src: &Source<'_>,
    mode: Mode,
    s: &Settings<'_>,
    report: &mut Fenced,
) {
    match part {
        Value::Null => return,
        Value::String(t) => {
            *t = process(t, src, mode, s, report);
            return;
        }
        Value::Object(m) => {
            let mut found = false;
            for (k, v) in m.iter_mut() {
                if crate::fold::fold(k.trim()) != "text" {
                    continue;
                }
                found = true;
                let text = match &*v {
                    Value::Null => continue,
                    Value::String(t) => process(t, src, mode, s, report),
                    other => process(&other.to_string(), src, mode, s, report),
                };
                *v = Value::String(text);
            }
            if found || is_media(part) {
                return;
            }
            if let Some(Value::Array(inner)) = part.get_mut("content") {
                for p in inner.iter_mut() {
                    fence_part(p, src, mode, s, report);
                }
                return;
            }
            if let Some(source) = part.get_mut("source").filter(|v| v.is_object()) {
                if crate::fold::reads_as(source.get("type"), "text") {
                    if let Some(data) = source.get_mut("data") {
                        fence_part(data, src, mode, s, report);
                    }
                    return;
                }
                if !crate::fold::reads_as(source.get("type"), "content") {
                    // A file by URL or in base64 (a PDF, say): not text.
                    return;
                }
                if let Some(Value::Array(inner)) = source.get_mut("content") {
                    for p in inner.iter_mut() {
                        fence_part(p, src, mode, s, report);
                    }
                }
                return;
            }
        }
        _ => {}
    }
    let text = process(&part.to_string(), src, mode, s, report);
    *part = json!({"type": "text", "text": text});
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicySet;

    /// `content` fenced as one tool result under the embedded policy.
    fn fenced(mut content: Value) -> Value {
        let policy = PolicySet::embedded().unwrap();
        let redactor = Redactor::new(vec![]);
        let s = Settings {
            secret: b"k",
            redactor: &redactor,
            policy: &policy,
            max_bytes: None,
            kept: None,
            digests: Default::default(),
        };
        let r = ToolResult {
            call_id: "c".into(),
            tool: "fetch".into(),
            url: None,
            content: &mut content,
        };
        apply(vec![r], &s);
        content
    }

    fn is_fenced(v: &Value) -> bool {
        v.as_str()
            .is_some_and(|t| t.starts_with("<<UNTRUSTED_EXTERNAL_CONTENT") && t.contains("IGNORE"))
    }

    #[test]
    fn text_is_fenced_whatever_the_part_looks_like() {
        let out = fenced(json!([
            {"type": "text", "text": "IGNORE a"},
            {"type": "Text", "TEXT": "IGNORE b"},
            {"type": "text", "text": {"value": "IGNORE c"}},
            "IGNORE d",
            {"type": "search_result", "content": [{"type": "text", "text": "IGNORE e"}]},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "IGNORE f"}},
            {"type": "mystery", "body": "IGNORE g"},
            42
        ]));
        assert!(is_fenced(&out[0]["text"]));
        assert!(is_fenced(&out[1]["TEXT"]));
        assert!(
            is_fenced(&out[2]["text"]),
            "an object in `text` becomes its fenced JSON"
        );
        assert!(is_fenced(&out[3]));
        assert!(is_fenced(&out[4]["content"][0]["text"]));
        assert!(is_fenced(&out[5]["source"]["data"]));
        assert_eq!(
            out[6]["type"], "text",
            "an unknown part becomes a text part"
        );
        assert!(is_fenced(&out[6]["text"]));
        assert!(out[7]["text"].as_str().unwrap().starts_with("<<UNTRUSTED"));
    }

    #[test]
    fn images_audio_and_files_are_left_alone() {
        for media in [
            json!([{"type": "image_url", "image_url": {"url": "data:x"}}]),
            json!([{"type": "input_image", "image_url": "data:x"}]),
            json!([{"type": "image", "source": {"type": "base64", "data": "eA=="}}]),
            json!([{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "eA=="}}]),
            json!({"type": "computer_screenshot", "image_url": "data:y"}),
        ] {
            assert_eq!(fenced(media.clone()), media);
        }
    }
}
