//! A `GenerateContentResponse` — a whole body, or one event of a stream —
//! read for the calls in its candidates' parts, and written again with the
//! withheld calls taken out, every other byte as it came.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::keys::{self as k, Ambiguous, Key};
use crate::call::{Call, Kind, MAX_CALL_ID_BYTES, MAX_NAME_BYTES};
use crate::error::Error;
use crate::json::{self, write_obj, write_string, Obj, Sink};
use crate::protocol::malformed;
use crate::protocol::usage::Usage;

/// The top-level keys toolgate reads.
const TOP: [Key; 6] = [
    k::CANDIDATES,
    k::USAGE,
    k::MODEL_VERSION,
    k::RESPONSE_ID,
    k::PROMPT_FEEDBACK,
    k::ERROR,
];
const CANDIDATE: [Key; 3] = [k::CONTENT, k::FINISH_REASON, k::INDEX];
const CONTENT: [Key; 2] = [k::PARTS, k::ROLE];
/// A part's data fields: one per part.
const DATA: [Key; 7] = [
    k::TEXT,
    k::FUNCTION_CALL,
    k::FUNCTION_RESPONSE,
    k::EXECUTABLE_CODE,
    k::CODE_RESULT,
    k::INLINE_DATA,
    k::FILE_DATA,
];
/// A part's other fields, beside its data.
const META: [Key; 5] = [
    k::THOUGHT,
    k::THOUGHT_SIGNATURE,
    k::PART_METADATA,
    k::VIDEO_METADATA,
    k::MEDIA_RESOLUTION,
];
/// Every field of a part toolgate reads: its data and the rest.
const PART: [Key; 12] = [
    k::TEXT,
    k::FUNCTION_CALL,
    k::FUNCTION_RESPONSE,
    k::EXECUTABLE_CODE,
    k::CODE_RESULT,
    k::INLINE_DATA,
    k::FILE_DATA,
    k::THOUGHT,
    k::THOUGHT_SIGNATURE,
    k::PART_METADATA,
    k::VIDEO_METADATA,
    k::MEDIA_RESOLUTION,
];
const CALL: [Key; 5] = [k::ID, k::NAME, k::ARGS, k::PARTIAL_ARGS, k::WILL_CONTINUE];

/// Where a call sits: its candidate's position and its part's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site {
    pub candidate: usize,
    pub part: usize,
}

/// What a response holds.
#[derive(Debug, Default)]
pub struct Read {
    /// The calls the agent would run, in order, with their places.
    pub calls: Vec<(Call, Site)>,
    /// Code the provider ran.
    pub hosted: Vec<Call>,
    pub usage: Usage,
    /// A candidate finished, or the prompt was blocked: an answer ends here.
    pub finished: bool,
}

fn unreadable(a: Ambiguous) -> Error {
    match a {
        Ambiguous::Both(_) => malformed("a key is spelled both ways in one object"),
        Ambiguous::Folded(_) => {
            malformed("a key differs from a known key only by case or spelling")
        }
    }
}

fn object<'a>(v: &'a Value, what: &'static str) -> Result<&'a Map<String, Value>, Error> {
    v.as_object().ok_or_else(|| malformed(what))
}

/// Reads a parsed response. A body with `error` is the provider's error
/// (`Error::UpstreamEvent` with `text`). `nth` numbers the responses of a
/// stream, for the ids of calls that come without one.
pub fn read(tree: &Value, text: &[u8], max_call: usize, nth: u64) -> Result<Read, Error> {
    let top = object(tree, "a response is not a JSON object")?;
    k::guard(top, &TOP).map_err(unreadable)?;
    if k::get(top, k::ERROR).map_err(unreadable)?.is_some() {
        return Err(Error::UpstreamEvent(bytes::Bytes::copy_from_slice(text)));
    }
    let mut out = Read {
        usage: usage(top),
        ..Read::default()
    };
    let feedback = k::get(top, k::PROMPT_FEEDBACK).map_err(unreadable)?;
    out.finished = feedback
        .and_then(Value::as_object)
        .is_some_and(|f| f.contains_key("blockReason") || f.contains_key("block_reason"));
    let candidates = match k::get(top, k::CANDIDATES).map_err(unreadable)? {
        None | Some(Value::Null) => return Ok(out),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(malformed("candidates is not an array")),
    };
    for (ci, c) in candidates.iter().enumerate() {
        let c = object(c, "a candidate is not an object")?;
        k::guard(c, &CANDIDATE).map_err(unreadable)?;
        let choice = match k::get(c, k::INDEX).map_err(unreadable)? {
            None => ci as u32,
            Some(i) => i
                .as_u64()
                .and_then(|i| u32::try_from(i).ok())
                .ok_or_else(|| malformed("a candidate's index is not a number"))?,
        };
        if let Some(Value::String(r)) = k::get(c, k::FINISH_REASON).map_err(unreadable)? {
            out.finished = true;
            out.usage.finished(choice, r);
        }
        let Some(content) = k::get(c, k::CONTENT).map_err(unreadable)? else {
            continue;
        };
        let content = object(content, "a candidate's content is not an object")?;
        k::guard(content, &CONTENT).map_err(unreadable)?;
        let parts = match k::get(content, k::PARTS).map_err(unreadable)? {
            None | Some(Value::Null) => continue,
            Some(Value::Array(a)) => a,
            Some(_) => return Err(malformed("a content's parts is not an array")),
        };
        for (pi, p) in parts.iter().enumerate() {
            let site = Site {
                candidate: ci,
                part: pi,
            };
            let p = object(p, "a part is not an object")?;
            match part(p, max_call, || format!("gemini_{nth}_{ci}_{pi}"))? {
                Part::Passes => {}
                Part::Call(mut call) => {
                    call.choice = choice;
                    out.calls.push((call, site));
                }
                Part::Hosted(call) => out.hosted.push(call),
            }
        }
    }
    Ok(out)
}

/// What a part is.
enum Part {
    Passes,
    Call(Call),
    Hosted(Call),
}

fn part(p: &Map<String, Value>, max_call: usize, id: impl Fn() -> String) -> Result<Part, Error> {
    k::guard(p, &PART).map_err(unreadable)?;
    let mut data = None;
    for key in p.keys() {
        if k::known(key, &META).is_some() {
            continue;
        }
        if data.is_some() {
            return Err(malformed("a part holds two kinds of data"));
        }
        data = Some(key.as_str());
    }
    let Some(key) = data else {
        return Ok(Part::Passes);
    };
    let value = &p[key];
    Ok(match k::known(key, &DATA) {
        Some(k::FUNCTION_CALL) => Part::Call(call(value, max_call, id)?),
        Some(k::EXECUTABLE_CODE) => Part::Hosted(Call {
            id: id(),
            name: "code_execution".into(),
            arguments: value.to_string(),
            ..Call::default()
        }),
        Some(_) => Part::Passes,
        // A data field toolgate does not know could carry a call the
        // client runs: held, and rejected.
        None => Part::Call(Call {
            id: id(),
            kind: Kind::Other(key.chars().take(64).collect()),
            name: key.chars().take(64).collect(),
            arguments: "{}".into(),
            ..Call::default()
        }),
    })
}

/// A `functionCall`: its name, arguments (an object) and id, when given.
fn call(v: &Value, max_call: usize, id: impl Fn() -> String) -> Result<Call, Error> {
    let m = object(v, "a functionCall is not an object")?;
    k::guard(m, &CALL).map_err(unreadable)?;
    if k::get(m, k::PARTIAL_ARGS).map_err(unreadable)?.is_some()
        || k::get(m, k::WILL_CONTINUE).map_err(unreadable)?.is_some()
    {
        // Arguments streamed in pieces are not assembled here.
        return Err(malformed("a call's arguments come in pieces"));
    }
    let name = match k::get(m, k::NAME).map_err(unreadable)? {
        Some(Value::String(n)) if !n.is_empty() => n,
        _ => return Err(malformed("a functionCall has no name")),
    };
    let arguments = match k::get(m, k::ARGS).map_err(unreadable)? {
        None | Some(Value::Null) => "{}".to_string(),
        Some(a @ Value::Object(_)) => a.to_string(),
        Some(_) => return Err(malformed("a functionCall's args is not an object")),
    };
    let id = match k::get(m, k::ID).map_err(unreadable)? {
        None | Some(Value::Null) => id(),
        Some(Value::String(s)) if s.len() <= MAX_CALL_ID_BYTES => s.clone(),
        Some(_) => return Err(malformed("a functionCall's id is not a short string")),
    };
    let mut c = Call {
        id,
        name: name.clone(),
        arguments,
        ..Call::default()
    };
    if c.name.len() > MAX_NAME_BYTES {
        c.name = String::new();
        c.name_too_long = true;
    }
    if c.arguments.len() > max_call {
        c.arguments = String::new();
        c.oversized = true;
    }
    Ok(c)
}

/// The tokens, model and id a response reports.
fn usage(top: &Map<String, Value>) -> Usage {
    let n = |m: &Map<String, Value>, key: Key| {
        k::get(m, key)
            .ok()
            .flatten()
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let s = |key: Key| {
        k::get(top, key)
            .ok()
            .flatten()
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut u = Usage {
        model: s(k::MODEL_VERSION),
        id: s(k::RESPONSE_ID),
        ..Usage::default()
    };
    if let Some(m) = k::get(top, k::USAGE)
        .ok()
        .flatten()
        .and_then(Value::as_object)
    {
        u.input = n(m, Key("promptTokenCount", "prompt_token_count"))
            + n(
                m,
                Key("toolUsePromptTokenCount", "tool_use_prompt_token_count"),
            );
        u.output = n(m, Key("candidatesTokenCount", "candidates_token_count"))
            + n(m, Key("thoughtsTokenCount", "thoughts_token_count"));
    }
    u
}

/// Writes the response `text` without the parts at `drop` (sorted); a
/// candidate that loses every call it had gets `neutral` as a text part
/// where its first one was. The keys written around are the ones
/// [`read`] found (`candidates`, `content`, `parts` have one spelling).
pub fn write_without(
    text: &str,
    drop: &[Site],
    calls_of: &dyn Fn(usize) -> usize,
    neutral: &str,
    out: &mut impl Sink,
) -> Result<(), Error> {
    let top: Obj = serde_json::from_str(text).map_err(|_| malformed("response is not JSON"))?;
    let mut failed = false;
    write_obj(out, &top, |key, v| {
        if key != "candidates" {
            return None;
        }
        let r = candidates(v, drop, calls_of, neutral);
        failed |= r.is_none();
        r
    });
    if failed {
        return Err(malformed("a candidate could not be written again"));
    }
    Ok(())
}

fn candidates(
    v: &RawValue,
    drop: &[Site],
    calls_of: &dyn Fn(usize) -> usize,
    neutral: &str,
) -> Option<String> {
    let list = json::array(v)?;
    let mut s = String::from("[");
    for (ci, c) in list.into_iter().enumerate() {
        if ci > 0 {
            s.push(',');
        }
        let gone: Vec<usize> = (drop.iter())
            .filter(|d| d.candidate == ci)
            .map(|d| d.part)
            .collect();
        if gone.is_empty() {
            s.push_str(c.get());
            continue;
        }
        let cand = Obj::of(c)?;
        let all_gone = gone.len() == calls_of(ci);
        let mut ok = true;
        write_obj(&mut s, &cand, |key, v| {
            if key != "content" {
                return None;
            }
            let content = Obj::of(v);
            let Some(content) = content else {
                ok = false;
                return None;
            };
            let mut c = String::new();
            write_obj(&mut c, &content, |key, v| {
                if key != "parts" {
                    return None;
                }
                let parts = json::array(v);
                let Some(parts) = parts else {
                    ok = false;
                    return None;
                };
                let mut p = String::from("[");
                let mut first = true;
                for (pi, part) in parts.into_iter().enumerate() {
                    let text = if !gone.contains(&pi) {
                        part.get().to_string()
                    } else if all_gone && Some(&pi) == gone.first() {
                        let mut t = String::from("{\"text\":");
                        write_string(&mut t, neutral);
                        t.push('}');
                        t
                    } else {
                        continue;
                    };
                    if !first {
                        p.push(',');
                    }
                    first = false;
                    p.push_str(&text);
                }
                p.push(']');
                Some(p)
            });
            Some(c)
        });
        if !ok {
            return None;
        }
    }
    s.push(']');
    Some(s)
}
