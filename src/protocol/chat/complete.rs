//! Non-streaming chat completions: find every call, then drop the rejected ones.
//!
//! The body is read borrowed ([`crate::json::Obj`]): no JSON tree is built,
//! so a large body costs little more than its own size. Calls come from
//! `choices[].message.tool_calls` and legacy `choices[].message.function_call`,
//! in body order, and verdicts are bound to them in that order. Allowed
//! entries stay exactly as the upstream sent them (only a present `index` is
//! renumbered); a choice left with no call gets the neutral message and
//! `finish_reason: "stop"`.
//!
//! Fails closed on anything two readers could take differently: duplicate or
//! out-of-range choice indices, a repeated key, or a key that only differs by
//! case (or width, or invisible characters) from one toolgate reads.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::keys::{CHOICE, ENTRY, FUNCTION, MESSAGE, TOP};
use super::{kind_of, Site};
use crate::call::{Call, Release, MAX_CALL_ID_BYTES, MAX_NAME_BYTES};
use crate::error::Error;
use crate::json::{self, is_null, write_key, write_obj, write_string, Obj, Sink};
use crate::protocol::malformed;
use crate::protocol::{fold_guard, Resumption};

/// Where one call sits.
enum Slot {
    Tool(usize),
    Legacy,
    /// Written as text in the content (`[gate] text_tool_calls`).
    Text,
}

struct Choice<'a> {
    index: u32,
    obj: Obj<'a>,
    message: Option<Obj<'a>>,
    /// Tool-call entries of the message, raw.
    entries: Vec<&'a RawValue>,
    slots: Vec<Slot>,
    text: Option<TextBody>,
}

/// A parsed response body, borrowed from its text.
pub struct Body<'a> {
    top: Obj<'a>,
    choices: Option<Vec<Choice<'a>>>,
    calls: Vec<Call>,
    /// The calls' ids, in order: the rewrite drops reasoning that names a
    /// withheld one, after [`Body::forget_calls`] too.
    ids: Vec<String>,
    /// The neutral text goes in `refusal`, not `content` (the request asked
    /// for structured output, which the content must parse as).
    refusal: bool,
}

impl<'a> Body<'a> {
    /// Parses `text` and finds its calls. An `error` object is an error.
    pub fn parse(text: &'a str, max_call_bytes: usize) -> Result<Body<'a>, Error> {
        // A repeated key anywhere fails, also in members read no further
        // (`usage`, `logprobs`): an unchanged body goes on as it came.
        if !json::is_strict(text) {
            return Err(malformed("response is not unambiguous JSON"));
        }
        let top: Obj =
            serde_json::from_str(text).map_err(|_| malformed("response is not a JSON object"))?;
        fold_guard(top.ambiguous(&TOP))?;
        if top.present("error").is_some() {
            return Err(Error::UpstreamEvent(bytes::Bytes::copy_from_slice(
                text.as_bytes(),
            )));
        }
        let Some(raw) = top.present("choices") else {
            return Ok(Body {
                top,
                choices: None,
                calls: Vec::new(),
                ids: Vec::new(),
                refusal: false,
            });
        };
        let raws = json::array(raw).ok_or_else(|| malformed("choices is not an array"))?;
        let mut seen = std::collections::HashSet::new();
        let mut choices = Vec::with_capacity(raws.len());
        let mut calls = Vec::new();
        for (pos, raw) in raws.iter().enumerate() {
            let obj = Obj::of(raw).ok_or_else(|| malformed("choice is not an object"))?;
            fold_guard(obj.ambiguous(&CHOICE))?;
            let index = choice_index(&obj, pos)?;
            if index as usize >= raws.len() || !seen.insert(index) {
                return Err(malformed("choice indices are repeated or out of range"));
            }
            let mut ch = Choice {
                index,
                text: None,
                message: None,
                entries: Vec::new(),
                slots: Vec::new(),
                obj,
            };
            if let Some(m) = ch.obj.present("message") {
                let msg = Obj::of(m).ok_or_else(|| malformed("message is not an object"))?;
                fold_guard(msg.ambiguous(&MESSAGE))?;
                if let Some(tc) = msg.present("tool_calls") {
                    ch.entries =
                        json::array(tc).ok_or_else(|| malformed("tool_calls is not an array"))?;
                    for (i, e) in ch.entries.iter().enumerate() {
                        let e = Obj::of(e)
                            .ok_or_else(|| malformed("tool call entry is not an object"))?;
                        calls.push(call(index, &e, max_call_bytes)?);
                        ch.slots.push(Slot::Tool(i));
                    }
                }
                if let Some(f) = msg.present("function_call") {
                    if Obj::of(f).is_none() {
                        return Err(malformed("function_call is not an object"));
                    }
                    let wrapped = Obj {
                        entries: vec![(Cow::Borrowed("function"), f)],
                    };
                    calls.push(call(index, &wrapped, max_call_bytes)?);
                    ch.slots.push(Slot::Legacy);
                }
                ch.message = Some(msg);
            }
            choices.push(ch);
        }
        Ok(Body {
            top,
            choices: Some(choices),
            ids: calls.iter().map(|c| c.id.clone()).collect(),
            calls,
            refusal: false,
        })
    }

    /// A choice left without calls says the neutral text as a refusal
    /// (`message.refusal`), its `content` as it was.
    pub fn refuse(&mut self, yes: bool) {
        self.refusal = yes;
    }

    /// The follow-up `resume` needs when the body has one choice and every
    /// one of its calls is withheld for resume; call before [`Self::forget_calls`].
    pub fn resumption(&self, verdicts: &[Release], result: &str) -> Option<Resumption> {
        let [ch] = self.choices.as_deref()? else {
            return None;
        };
        if ch.text.is_some() {
            return None;
        }
        let all = (0..self.calls.len()).all(|i| Release::at(verdicts, i).resumable());
        if self.calls.is_empty() || !all {
            return None;
        }
        let sites: Vec<Site> = ch
            .slots
            .iter()
            .map(|s| match s {
                Slot::Legacy => Site {
                    legacy: true,
                    ..Site::default()
                },
                Slot::Tool(i) => Site {
                    extra: extra_keys(ch.entries.get(*i).copied()),
                    ..Site::default()
                },
                Slot::Text => Site::default(),
            })
            .collect();
        let text = ch
            .message
            .as_ref()
            .and_then(|m| m.present("content"))
            .and_then(|c| serde_json::from_str::<String>(c.get()).ok());
        let pairs: Vec<(&Call, &Site)> = self.calls.iter().zip(&sites).collect();
        Some(Resumption {
            turn: super::follow::turn(&pairs, text.as_deref(), result),
            denied: (self.calls.iter().zip(0..))
                .filter(|(_, i)| Release::at(verdicts, *i) == Release::Resume { deny: true })
                .map(|(c, _)| c.name.clone())
                .collect(),
            text,
            usage: self
                .top
                .present("usage")
                .and_then(|u| serde_json::from_str(u.get()).ok()),
            ..Resumption::default()
        })
    }

    /// Writes the body with the calls whose `allowed` entry is false removed
    /// (a missing entry counts as false); false, with nothing written, when
    /// every call is allowed and the body can go out as it came.
    ///
    /// `out` receives the body: values that stay as they came are written
    /// with [`Sink::raw`], so a [`crate::json::Spliced`] sink copies none of
    /// them.
    pub fn rewrite(&self, verdicts: &[Release], neutral: &str, out: &mut impl Sink) -> bool {
        let Some(choices) = self.choices.as_ref() else {
            return false;
        };
        let total: usize = choices.iter().map(|c| c.slots.len()).sum();
        if (0..total).all(|i| Release::at(verdicts, i).allowed()) {
            return false;
        }
        let mut next = 0usize;
        out.text("{");
        for (i, (k, v)) in self.top.entries.iter().enumerate() {
            if i > 0 {
                out.text(",");
            }
            write_key(out, k);
            if k == "choices" {
                out.text("[");
                for (j, ch) in choices.iter().enumerate() {
                    if j > 0 {
                        out.text(",");
                    }
                    let allowed = allowed_slice(verdicts, next, ch.slots.len());
                    let withheld: Vec<&str> = self
                        .ids
                        .iter()
                        .skip(next)
                        .zip(&allowed)
                        .filter(|(_, &a)| !a)
                        .map(|(id, _)| id.as_str())
                        .collect();
                    next += ch.slots.len();
                    let w = Withheld {
                        ids: &withheld,
                        neutral,
                        refusal: self.refusal,
                    };
                    write_choice(out, ch, &allowed, &w);
                }
                out.text("]");
            } else {
                out.raw(v);
            }
        }
        out.text("}");
        true
    }
}

/// Keys of a tool-call entry besides the call itself (kept in a follow-up).
fn extra_keys(entry: Option<&RawValue>) -> serde_json::Map<String, serde_json::Value> {
    let mut m: serde_json::Map<String, serde_json::Value> = entry
        .and_then(|e| serde_json::from_str(e.get()).ok())
        .unwrap_or_default();
    m.retain(|k, _| !matches!(k.as_str(), "index" | "id" | "type" | "function"));
    m
}

fn allowed_slice(verdicts: &[Release], from: usize, n: usize) -> Vec<bool> {
    (from..from + n)
        .map(|i| Release::at(verdicts, i).allowed())
        .collect()
}

/// What a choice's rewrite needs besides its verdicts.
struct Withheld<'w> {
    /// Ids of the calls withheld (reasoning that names one is dropped).
    ids: &'w [&'w str],
    neutral: &'w str,
    refusal: bool,
}

fn write_choice(out: &mut impl Sink, ch: &Choice, verdicts: &[bool], w: &Withheld<'_>) {
    let (Some(msg), false) = (&ch.message, verdicts.iter().all(|&a| a)) else {
        // Unchanged: as it came (no calls, or all of them allowed).
        write_obj(out, &ch.obj, |_, _| None);
        return;
    };
    let kept_tools: Vec<&RawValue> = ch
        .slots
        .iter()
        .zip(verdicts)
        .filter_map(|(s, &a)| match s {
            Slot::Tool(i) if a => ch.entries.get(*i).copied(),
            _ => None,
        })
        .collect();
    let legacy_kept = ch
        .slots
        .iter()
        .zip(verdicts)
        .any(|(s, &a)| matches!(s, Slot::Legacy) && a);
    let (content, text_kept) = text::content(ch, verdicts);
    let none_left = kept_tools.is_empty() && !legacy_kept && text_kept == 0;
    let kept = Kept {
        tools: &kept_tools,
        legacy: legacy_kept,
        none_left,
        content: content.as_deref(),
        parts: text::parts(ch),
    };
    out.text("{");
    for (i, (k, v)) in ch.obj.entries.iter().enumerate() {
        if i > 0 {
            out.text(",");
        }
        write_key(out, k);
        match k.as_ref() {
            "message" => write_message(out, msg, &kept, w),
            "finish_reason" if none_left => out.text("\"stop\""),
            "native_finish_reason" if none_left && !is_null(v) => out.text("\"stop\""),
            _ => out.raw(v),
        }
    }
    out.text("}");
}

/// What a choice keeps of its calls.
struct Kept<'k> {
    tools: &'k [&'k RawValue],
    legacy: bool,
    none_left: bool,
    /// The content rewritten without the blocks of withheld text calls.
    content: Option<&'k str>,
    /// The parts that content came in, when it came in parts.
    parts: Option<&'k [serde_json::Value]>,
}

/// Writes a message with only its kept calls; one left with none says the
/// neutral text (after its own content, or as its refusal). What stays as
/// it came is written raw, so a large content is sliced, not copied.
fn write_message(out: &mut impl Sink, msg: &Obj, kept: &Kept<'_>, w: &Withheld<'_>) {
    let (neutral, refusal) = (w.neutral, w.refusal);
    let (kept_tools, legacy_kept, none_left) = (kept.tools, kept.legacy, kept.none_left);
    let mut first = true;
    let mut wrote_content = false;
    out.text("{");
    for (k, v) in &msg.entries {
        let dropped = match k.as_ref() {
            "tool_calls" => !is_null(v) && kept_tools.is_empty(),
            "function_call" => !is_null(v) && !legacy_kept,
            "refusal" => none_left && refusal,
            _ => false,
        };
        if dropped {
            continue;
        }
        if !first {
            out.text(",");
        }
        first = false;
        write_key(out, k);
        match k.as_ref() {
            "tool_calls" if !is_null(v) => write_tools(out, kept_tools),
            "reasoning_details" => write_reasoning(out, v, w.ids),
            "content" if kept.content.is_some() => {
                let text = kept.content.unwrap_or_default();
                let text = match (none_left && !refusal, text.is_empty()) {
                    (true, true) => Cow::Borrowed(neutral),
                    (true, false) => Cow::Owned(format!("{text}\n\n{neutral}")),
                    (false, _) => Cow::Borrowed(text),
                };
                text::write_content(out, kept.parts, &text);
                wrote_content = true;
            }
            "content" if none_left && !refusal => {
                append_neutral(out, v, neutral);
                wrote_content = true;
            }
            _ => out.raw(v),
        }
    }
    if none_left && (refusal || !wrote_content) {
        if !first {
            out.text(",");
        }
        write_key(out, if refusal { "refusal" } else { "content" });
        write_string(out, neutral);
    }
    out.text("}");
}

fn choice_index(ch: &Obj, pos: usize) -> Result<u32, Error> {
    match ch.present("index") {
        None => u32::try_from(pos).ok(),
        Some(v) => v.get().parse::<u32>().ok(),
    }
    .ok_or_else(|| malformed("choice index is not a small integer"))
}

fn string_field(v: Option<&RawValue>) -> Result<String, Error> {
    match v.filter(|v| !is_null(v)) {
        None => Ok(String::new()),
        Some(v) => json::string(v)
            .map(Cow::into_owned)
            .ok_or_else(|| malformed("tool call field is not a string")),
    }
}

fn call(choice: u32, e: &Obj, max: usize) -> Result<Call, Error> {
    fold_guard(e.ambiguous(&ENTRY))?;
    let f = match e.present("function") {
        None => None,
        Some(f) => {
            Some(Obj::of(f).ok_or_else(|| malformed("tool call function is not an object"))?)
        }
    };
    if let Some(f) = &f {
        fold_guard(f.ambiguous(&FUNCTION))?;
    }
    let arguments = match f.as_ref().and_then(|f| f.present("arguments")) {
        None => String::new(),
        Some(v) if v.get().starts_with(['{', '[']) => v.get().to_string(),
        Some(v) => json::string(v)
            .map(Cow::into_owned)
            .ok_or_else(|| malformed("tool call arguments are not a string"))?,
    };
    let name = string_field(f.as_ref().and_then(|f| f.get("name")))?;
    let id = string_field(e.get("id"))?;
    if id.len() > MAX_CALL_ID_BYTES {
        return Err(malformed("a tool call's id is too long"));
    }
    let oversized = arguments.len() > max;
    let name_too_long = name.len() > MAX_NAME_BYTES;
    Ok(Call {
        choice,
        id,
        kind: match e.present("type") {
            None => kind_of(None),
            Some(v) => kind_of(Some(&string_field(Some(v))?)),
        },
        name: if name_too_long { String::new() } else { name },
        name_too_long,
        arguments: if oversized { String::new() } else { arguments },
        oversized,
        namespaced: false,
    })
}

mod text;
mod write;
use text::TextBody;
use write::{append_neutral, write_reasoning, write_tools};

impl crate::protocol::Complete for Body<'_> {
    fn usage(&self) -> crate::protocol::usage::Usage {
        crate::protocol::usage::Usage::of_top(&self.top)
    }
    fn calls(&self) -> &[Call] {
        &self.calls
    }
    fn resumption(&self, _text: &str, verdicts: &[Release], result: &str) -> Option<Resumption> {
        Body::resumption(self, verdicts, result)
    }
    fn forget_calls(&mut self) {
        self.calls = Vec::new();
    }
    fn rewrite(
        &self,
        verdicts: &[Release],
        neutral: &str,
        _id_key: &[u8; 32],
        out: &mut crate::json::Spliced<'_>,
    ) -> bool {
        Body::rewrite(self, verdicts, neutral, out)
    }
}

#[cfg(test)]
mod tests;
