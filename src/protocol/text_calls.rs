//! Tool calls a model writes as text (`[gate] text_tool_calls`): Hermes and
//! Qwen's `<tool_call>{…}</tool_call>`, Llama's `<|python_tag|>{…}`,
//! Mistral's `[TOOL_CALLS][…]` and `[TOOL_CALLS]name[ARGS]{…}`.
//!
//! Models served without a tool parser (vLLM, llama.cpp, Ollama in raw mode)
//! answer with these in their text, and the agent's own parser runs them.
//! A [`TextScan`] lets text go on until an opening marker and holds all that
//! follows; [`split`] reads the held text into blocks of calls, each gated
//! like a structured call; [`rebuild`] writes back the text with the blocks
//! of withheld calls taken out. A block that cannot be read is one call that
//! is always withheld: what toolgate cannot read, it does not let through.

use serde_json::Value;

use crate::call::{Call, Kind};

const TOOL_CALL: &str = "<tool_call>";
const TOOL_CALL_END: &str = "</tool_call>";
const PYTHON_TAG: &str = "<|python_tag|>";
const PYTHON_ENDS: [&str; 2] = ["<|eom_id|>", "<|eot_id|>"];
const MISTRAL: &str = "[TOOL_CALLS]";
const MISTRAL_ARGS: &str = "[ARGS]";

/// The opening markers.
pub const MARKERS: [&str; 3] = [TOOL_CALL, PYTHON_TAG, MISTRAL];

/// Where the first marker in `s` starts.
pub fn find_marker(s: &str) -> Option<usize> {
    MARKERS.iter().filter_map(|m| s.find(m)).min()
}

/// The text of a content part that is text (`{"type": "text", "text":
/// …}`, or one without a type); other parts (images, thinking) are not.
pub fn part_text(part: &mut Value) -> Option<&mut String> {
    let p = part.as_object_mut()?;
    if p.get("type").is_some_and(|t| t != "text") {
        return None;
    }
    match p.get_mut("text")? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// How many bytes at the end of `s` could begin a marker.
fn partial_marker(s: &str) -> usize {
    MARKERS
        .iter()
        .flat_map(|m| (1..m.len()).rev().find(|&k| s.ends_with(&m[..k])))
        .max()
        .unwrap_or(0)
}

/// One choice's text as it streams.
#[derive(Debug, Default)]
pub struct TextScan {
    /// Text not sent yet: the end that could begin a marker, or, once a
    /// marker came, everything from it on.
    kept: String,
    holding: bool,
}

impl TextScan {
    /// Takes the next piece of text and returns what may go out now.
    pub fn push(&mut self, text: &str) -> String {
        self.kept.push_str(text);
        if self.holding {
            return String::new();
        }
        if let Some(i) = find_marker(&self.kept) {
            self.holding = true;
            return self.kept.drain(..i).collect();
        }
        // Markers are ASCII: the cut is on a character boundary.
        let cut = self.kept.len() - partial_marker(&self.kept);
        self.kept.drain(..cut).collect()
    }

    /// Whether a call's text is held (a marker came).
    pub fn holds_call(&self) -> bool {
        self.holding
    }

    /// How much text is held.
    pub fn held_len(&self) -> usize {
        self.kept.len()
    }

    /// Text held back only because it could have begun a marker: at the
    /// end of the text it is plain text.
    pub fn take_tail(&mut self) -> String {
        match self.holding {
            true => String::new(),
            false => std::mem::take(&mut self.kept),
        }
    }

    /// The held call text, from its marker on.
    pub fn take_held(&mut self) -> Option<String> {
        if !self.holding {
            return None;
        }
        self.holding = false;
        Some(std::mem::take(&mut self.kept))
    }
}

/// One call read from text.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCall {
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
    /// The array element as written (Mistral's list), to write back.
    item: Option<Value>,
}

/// Held text, in order: plain text and the blocks of calls.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Text(String),
    /// One marker's block as written; no calls when it could not be read
    /// (it then stands for one call that is always withheld).
    Block {
        raw: String,
        calls: Vec<TextCall>,
        /// Mistral's JSON list: written back with the allowed calls only.
        list: bool,
    },
}

/// Reads held text (from its first marker) into pieces.
pub fn split(held: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut rest = held;
    while !rest.is_empty() {
        let Some(i) = find_marker(rest) else {
            out.push(Piece::Text(rest.to_string()));
            break;
        };
        if i > 0 {
            out.push(Piece::Text(rest[..i].to_string()));
            rest = &rest[i..];
        }
        let (end, piece) = block(rest);
        out.push(piece);
        rest = &rest[end..];
    }
    out
}

/// The block at the start of `s` (which starts with a marker) and where it ends.
fn block(s: &str) -> (usize, Piece) {
    let (end, calls, list) = if let Some(body) = s.strip_prefix(TOOL_CALL) {
        let (len, skip) = match body.find(TOOL_CALL_END) {
            Some(j) => (j, TOOL_CALL_END.len()),
            None => (body.len(), 0),
        };
        (TOOL_CALL.len() + len + skip, one(&body[..len]), false)
    } else if let Some(body) = s.strip_prefix(PYTHON_TAG) {
        let (len, skip) = PYTHON_ENDS
            .iter()
            .filter_map(|e| body.find(e).map(|j| (j, e.len())))
            .min()
            .unwrap_or((body.len(), 0));
        (PYTHON_TAG.len() + len + skip, one(&body[..len]), false)
    } else {
        let body = s.get(MISTRAL.len()..).unwrap_or("");
        let len = body.find(MISTRAL).unwrap_or(body.len());
        let text = &body[..len];
        let list = text.trim_start().starts_with('[');
        let calls = match (list, text.split_once(MISTRAL_ARGS)) {
            (true, _) => listed(text),
            (false, Some((name, args))) => named(name.trim(), args),
            (false, None) => Vec::new(),
        };
        (MISTRAL.len() + len, calls, list)
    };
    let raw = s[..end].to_string();
    (end, Piece::Block { raw, calls, list })
}

/// A call written as `{"name": …, "arguments"|"parameters": {…}}`.
fn call_of(v: Value) -> Option<TextCall> {
    let Value::Object(mut o) = v.clone() else {
        return None;
    };
    let name = match o.remove("name") {
        Some(Value::String(n)) if !n.is_empty() => n,
        _ => return None,
    };
    let args = match (o.remove("arguments"), o.remove("parameters")) {
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => Value::Object(Default::default()),
        (Some(_), Some(_)) => return None,
    };
    let arguments = match args {
        Value::Object(_) => serde_json::to_string(&args).ok()?,
        // Some models write the arguments as a JSON string.
        Value::String(s) => s,
        _ => return None,
    };
    Some(TextCall {
        name,
        arguments,
        item: Some(v),
    })
}

/// One JSON call (duplicate keys refused: another reader could take the other).
fn one(body: &str) -> Vec<TextCall> {
    crate::json::strict_value(body.trim().as_bytes())
        .ok()
        .and_then(call_of)
        .into_iter()
        .collect()
}

/// Mistral's list: every element must be a call, or none is read.
fn listed(body: &str) -> Vec<TextCall> {
    match crate::json::strict_value(body.trim().as_bytes()) {
        Ok(Value::Array(items)) if !items.is_empty() => items
            .into_iter()
            .map(call_of)
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Mistral's `name[ARGS]{…}`.
fn named(name: &str, args: &str) -> Vec<TextCall> {
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    match crate::json::strict_value(args.trim().as_bytes()) {
        Ok(v @ Value::Object(_)) if valid => vec![TextCall {
            name: name.to_string(),
            arguments: v.to_string(),
            item: None,
        }],
        _ => Vec::new(),
    }
}

/// The calls of `pieces` for the gates, in order: a block that could not be
/// read is one call of a kind that is always withheld. Ids are `text-<choice>-<n>`.
pub fn calls(pieces: &[Piece], choice: u32) -> Vec<Call> {
    let mut out = Vec::new();
    for p in pieces {
        let Piece::Block { calls, .. } = p else {
            continue;
        };
        let id = |n: usize| format!("text-{choice}-{n}");
        if calls.is_empty() {
            out.push(Call {
                choice,
                id: id(out.len()),
                kind: Kind::Other("unreadable text call".into()),
                ..Call::default()
            });
        }
        for c in calls {
            out.push(Call {
                choice,
                id: id(out.len()),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
                ..Call::default()
            });
        }
    }
    out
}

/// How many calls [`calls`] gives for `pieces`.
pub fn count(pieces: &[Piece]) -> usize {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Block { calls, .. } => calls.len().max(1),
            Piece::Text(_) => 0,
        })
        .sum()
}

/// The text with the blocks of withheld calls taken out (`allowed[i]`
/// answers call `i` of [`calls`]), and how many calls were kept.
pub fn rebuild(pieces: &[Piece], allowed: impl Fn(usize) -> bool) -> (String, usize) {
    let (mut text, mut n, mut kept) = (String::new(), 0, 0);
    for p in pieces {
        match p {
            Piece::Text(t) => text.push_str(t),
            Piece::Block { calls, .. } if calls.is_empty() => n += 1,
            Piece::Block { raw, calls, list } => {
                let ok: Vec<bool> = (n..n + calls.len()).map(&allowed).collect();
                n += calls.len();
                let k = ok.iter().filter(|a| **a).count();
                kept += k;
                if k == calls.len() {
                    text.push_str(raw);
                } else if k > 0 && *list {
                    let items: Vec<&Value> = calls
                        .iter()
                        .zip(&ok)
                        .filter(|(_, a)| **a)
                        .filter_map(|(c, _)| c.item.as_ref())
                        .collect();
                    text.push_str(MISTRAL);
                    text.push_str(&serde_json::to_string(&items).unwrap_or_default());
                }
            }
        }
    }
    (text, kept)
}

#[cfg(test)]
mod tests;
