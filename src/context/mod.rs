//! The context of a request, whatever its wire format: who asks, in which
//! phase and session, for what mission, which tools it declares, and the
//! texts that argument provenance is read from.

use std::borrow::Cow;
use std::collections::HashMap;

use http::{HeaderMap, HeaderName};
use serde_json::Value;

mod declared;
pub mod shape;
mod texts;
pub use declared::{take_schemas, Declared};
pub use texts::{Texts, Turn};

/// The principal of every agent when no `[[client]]` is configured: no
/// client proved who it is, so nothing may be granted to it for later.
pub const ANONYMOUS: &str = "anonymous";

/// What the gates know about the request a call answers.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub request_id: String,
    /// The provider's id for the answer the calls came from, once it came.
    pub upstream_request_id: Option<String>,
    pub principal: String,
    /// The wire format the request came in (`chat`, `responses`), for the audit trail.
    pub protocol: &'static str,
    /// `x-toolgate-phase`, `/phase/{name}/…`, `[policy] default_phase`, else `unknown`.
    pub phase: String,
    /// `x-toolgate-session`, else a fingerprint of the system prompt and first user message.
    pub session: String,
    /// `x-toolgate-agent`, else the principal.
    pub agent: String,
    /// `x-toolgate-mission`, else the system prompt.
    pub mission: Option<String>,
    /// The latest user message.
    pub original_request: Option<String>,
    /// Declared tools by name; built-in tools under their type (`web_search`, `shell`, …).
    pub declared: HashMap<String, Declared>,
    /// All user, system and tool-result text, for argument provenance.
    pub user_text: String,
    pub system_text: String,
    pub tool_text: String,
    /// Where each tool result lies in `tool_text`, with its call id.
    pub tool_results: Vec<(std::ops::Range<usize>, String)>,
    /// The calls the tool results answer: what the agent asked of which
    /// source (read when a rule reads the texts).
    pub sources: Vec<Source>,
    /// The injection scan of the tool results, made once per request when
    /// a rule reads it (see `gate::injection`).
    pub injection: std::sync::OnceLock<Vec<Found>>,
    /// The texts in caseless form, for entity provenance (made once per
    /// request when a rule reads it).
    pub folded: std::sync::OnceLock<Folded>,
    /// Each folded tool result read as the structure it has (made once
    /// per request when a rule reads it; see [`shape`]).
    pub shapes: std::sync::OnceLock<Vec<shape::Shape>>,
    /// Other readings of each tool result (see `gate::injection::readings`).
    pub readings: std::sync::OnceLock<Vec<std::sync::Arc<Vec<String>>>>,
    /// Each tool result's content key, the key its scan and readings are
    /// remembered by across requests (hashed once per request).
    pub result_keys: std::sync::OnceLock<Vec<[u8; 32]>>,
    /// Which follow-up request (`rewrite = "resume"`) the calls come from;
    /// 0 for the agent's own request.
    pub resume: u32,
    /// The request asks for structured output (`response_format`
    /// `json_schema` / `json_object`): a neutral text is a refusal.
    pub structured_output: bool,
    /// The request's verdict counts, for its access line.
    pub tally: std::sync::Arc<crate::call::Tally>,
    /// The request's trace span, parent of its decisions' spans (`[telemetry]`).
    pub trace: Option<crate::telemetry::RequestTrace>,
    /// What the GenAI metrics record of the exchange (models, tokens, first bytes).
    pub exchange: Option<std::sync::Arc<crate::metrics::genai::Exchange>>,
    /// Set when the agent has gone away: calls waiting for a person end.
    pub left: std::sync::Arc<Left>,
    /// The request continues a conversation by reference (a stored
    /// response, a thread) whose earlier turns toolgate does not know (an
    /// expired record, another replica's): `context.history_complete` is
    /// false.
    pub history_incomplete: bool,
    /// A tool the provider runs that reads what toolgate never sees (a web
    /// search, a fetch, a file search, code over stored files, a remote MCP
    /// server) ran earlier in this answer: the model read its output, so
    /// `context.history_complete` is false for the calls after it, and for
    /// the turns that continue this answer.
    pub provider_read: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// A tool result the model reads holds what toolgate does not read as
    /// text (`context.unread_results`).
    pub unread_results: bool,
    /// Declared tools whose definition differs from the one first declared
    /// in this session (`tool.definition_changed`).
    pub redefined: Vec<String>,
    /// The call's tool (an MCP server's) was listed last with another
    /// definition than its pin: only a rule whose condition reads
    /// `tool.definition_changed` may release it or ask about it; otherwise
    /// it is rejected as `tool_definition_changed`.
    pub pin_changed: bool,
    /// The calls decided in this request's answer, the sources of the tool
    /// results a follow-up by reference sends back.
    pub decided: std::sync::Arc<std::sync::Mutex<Vec<Source>>>,
}

/// A call earlier in the conversation, whose result a tool result is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Source {
    pub call_id: String,
    pub name: String,
    /// Its arguments as the agent sent them (JSON text).
    pub arguments: String,
}

/// One suspected injection span of one text (found by `gate::injection`).
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub detector: &'static str,
    /// The detector's part that found it (`addressed_to_model/dear_model`).
    pub pattern: std::sync::Arc<str>,
    /// The span's text, caseless (never audited: it is tool output).
    pub text: String,
}

/// A suspected span in one of the request's tool results.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The tool result's position among the request's tool results.
    pub result: usize,
    pub call_id: String,
    pub span: Span,
}

/// The request's texts in caseless form (see [`crate::fold::fold`]).
#[derive(Debug, Clone, Default)]
pub struct Folded {
    pub user: String,
    pub system: String,
    /// Each tool result with its call id.
    pub tools: Vec<(String, String)>,
}

impl Context {
    /// Whether every text the model read before the call is one toolgate
    /// read too (`context.history_complete`).
    pub fn history_complete(&self) -> bool {
        !self.history_incomplete && !self.read_in_answer()
    }

    /// Whether a provider-run tool read outside content earlier in this
    /// answer (see [`Context::provider_read`]).
    pub fn read_in_answer(&self) -> bool {
        (self.provider_read).load(std::sync::atomic::Ordering::Acquire)
    }

    /// Notes provider-run `calls` seen in the answer (see
    /// [`Context::provider_read`]).
    pub fn provider_ran(&self, calls: &[crate::call::Call]) {
        if calls.iter().any(crate::call::Call::reads_outside) {
            (self.provider_read).store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Each tool result's content key ([`crate::digest::content_key`]), in
    /// `tool_results`' order.
    pub fn result_keys(&self) -> &[[u8; 32]] {
        self.result_keys.get_or_init(|| {
            (self.tool_results.iter())
                .map(|(range, _)| {
                    let text = self.tool_text.get(range.clone()).unwrap_or("");
                    crate::digest::content_key(text.as_bytes())
                })
                .collect()
        })
    }

    /// The texts in caseless form, folded once per request.
    /// Each tool result (folded) read as its structure, in `folded().tools`' order.
    pub fn shapes(&self) -> &[shape::Shape] {
        self.shapes.get_or_init(|| {
            self.folded()
                .tools
                .iter()
                .map(|(_, t)| shape::read(t))
                .collect()
        })
    }

    pub fn folded(&self) -> &Folded {
        self.folded.get_or_init(|| Folded {
            user: crate::fold::fold(&self.user_text).into_owned(),
            system: crate::fold::fold(&self.system_text).into_owned(),
            tools: self
                .tool_results
                .iter()
                .filter_map(|(range, id)| {
                    let text = self.tool_text.get(range.clone())?;
                    Some((id.clone(), crate::fold::fold(text).into_owned()))
                })
                .collect(),
        })
    }
}

/// That the agent went away, for whoever is waiting on its behalf.
#[derive(Debug, Default)]
pub struct Left {
    gone: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl Left {
    /// The agent is gone: every waiter is woken.
    pub fn leave(&self) {
        self.gone.store(true, std::sync::atomic::Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Resolves once the agent is gone (at once if it already is).
    pub async fn wait(&self) {
        let woken = self.notify.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if self.gone.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        woken.await;
    }
}

/// The text of a message's `content` (a string or an array of text parts).
pub fn content_text(content: &Value) -> Cow<'_, str> {
    match content {
        Value::String(s) => Cow::Borrowed(s),
        Value::Array(parts) => Cow::Owned(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => Cow::Borrowed(""),
    }
}

/// Part types that carry what toolgate does not read as text: images,
/// documents, files and audio, in each format's spelling.
const MEDIA: [&str; 10] = [
    "image",
    "image_url",
    "input_image",
    "computer_screenshot",
    "document",
    "file",
    "input_file",
    "audio",
    "input_audio",
    "container_upload",
];
/// Gemini's media part keys, in both spellings.
const MEDIA_KEYS: [&str; 4] = ["inlineData", "inline_data", "fileData", "file_data"];

/// Whether a tool result's content `v` (a string, a list of parts, or one
/// part) holds a part toolgate does not read as text: one whose `type` is
/// an image, a document, a file or audio, or Gemini's `inlineData` or
/// `fileData`. Only the parts themselves are looked at: JSON a tool
/// returned as its data is the tool's text, whatever its fields say.
pub fn holds_media(v: &Value) -> bool {
    let media = |p: &Value| {
        p.as_object().is_some_and(|o| {
            MEDIA.contains(&&*crate::fold::read(o.get("type")))
                || MEDIA_KEYS.iter().any(|k| o.contains_key(*k))
        })
    };
    match v {
        Value::Array(parts) => parts.iter().any(media),
        part => media(part),
    }
}

/// At least how long the text read from a tool result's content `v` is:
/// its strings' lengths and a separator each.
pub fn text_len(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len() + 1,
        Value::Array(a) => a.iter().map(text_len).sum(),
        Value::Object(o) => o.values().map(text_len).sum(),
        _ => 0,
    }
}

/// In tests: the `n` tool texts `t` read from `results` fit the room
/// [`Texts::reserve_tools`] makes for them.
#[cfg(test)]
pub fn assert_room_holds<'a>(t: &Texts, results: impl IntoIterator<Item = &'a Value>, n: usize) {
    let room: usize = results.into_iter().map(text_len).sum();
    assert_eq!(t.tool_results.len(), n);
    assert!(t.tool.len() <= room, "{} > {room}", t.tool.len());
}

/// The agent's context headers, named once: a name given as text is
/// checked and lower-cased again on every lookup.
const PHASE: HeaderName = HeaderName::from_static("x-toolgate-phase");
const SESSION: HeaderName = HeaderName::from_static("x-toolgate-session");
const AGENT: HeaderName = HeaderName::from_static("x-toolgate-agent");
const MISSION: HeaderName = HeaderName::from_static("x-toolgate-mission");

fn header(h: &HeaderMap, name: &HeaderName) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(String::from)
}

/// Fills the context from headers, the path's phase, the config's default
/// phase and the request's texts (the provenance texts are empty unless a
/// rule reads them, so a large history is not copied for nothing).
pub fn fill(
    ctx: &mut Context,
    h: &HeaderMap,
    path_phase: Option<&str>,
    default_phase: Option<&str>,
    t: Texts,
) {
    ctx.phase = header(h, &PHASE)
        .or_else(|| path_phase.map(String::from))
        .or_else(|| default_phase.map(String::from))
        .unwrap_or_else(|| "unknown".into());
    ctx.session = header(h, &SESSION).unwrap_or_else(|| {
        // Hashed in place: a long system prompt is not copied to be hashed.
        let first_user = t.first_user.as_deref().unwrap_or("");
        let digest =
            crate::digest::sha256_parts(&[t.system.as_bytes(), b"\0", first_user.as_bytes()]);
        format!("fp-{}", crate::digest::hex(&digest[..8]))
    });
    ctx.agent = header(h, &AGENT).unwrap_or_else(|| ctx.principal.clone());
    ctx.mission = header(h, &MISSION).or_else(|| (!t.system.is_empty()).then(|| t.system.clone()));
    ctx.original_request = t.last_user.clone();
    take_texts(ctx, t);
}

/// Puts what the request's messages say into the context: the texts the
/// signals read, whether a tool result is one toolgate cannot read, and
/// whether the model read what toolgate never did (the history is then
/// not complete); what was worked out of the texts before is forgotten.
pub fn take_texts(ctx: &mut Context, t: Texts) {
    ctx.user_text = t.user;
    ctx.system_text = t.system;
    ctx.tool_text = t.tool;
    ctx.tool_results = t.tool_results;
    ctx.sources = t.sources;
    ctx.unread_results = t.unread_results;
    ctx.history_incomplete |= t.unseen;
    ctx.injection = std::sync::OnceLock::new();
    ctx.folded = std::sync::OnceLock::new();
    ctx.readings = std::sync::OnceLock::new();
    ctx.result_keys = std::sync::OnceLock::new();
    ctx.shapes = std::sync::OnceLock::new();
}

#[cfg(test)]
mod tests;
