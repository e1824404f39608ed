//! Tool-call deltas → complete calls, keyed by (choice, index); memory bounded.
//!
//! Providers differ: a header then
//! argument fragments, a whole call in one entry, a missing `index` (Mistral,
//! Gemini), `index` starting at 1, `id: ""` or `name: ""` on continuations
//! (Qwen, GLM), legacy `function_call` with neither index nor id. Anything that
//! cannot be read as a call is an upstream error, never a panic.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::keys::{ENTRY, FUNCTION};
use super::{ChatCall, Site};
use crate::call::{Call, MAX_CALL_ID_BYTES, MAX_NAME_BYTES};
use crate::error::Error;
use crate::protocol::malformed;
use crate::protocol::map_guard;

/// How many calls one choice may hold, and how many choices may hold calls.
const MAX_CALLS_PER_CHOICE: usize = 128;
const MAX_CHOICES: usize = 128;
/// The key legacy `function_call` deltas are assembled under.
pub const LEGACY_KEY: u64 = u64::MAX;
/// Calls without an `index` that carry a new id are numbered from here.
const SYNTHETIC_BASE: u64 = 1 << 40;

/// One tool-call entry's parts, as read from a chunk.
#[derive(Debug, Default)]
pub struct Delta<'a> {
    /// The entry's `index`, when it has one.
    pub index: Option<u64>,
    pub id: Option<Cow<'a, str>>,
    /// Its `type`.
    pub kind: Option<Cow<'a, str>>,
    pub name: Option<Cow<'a, str>>,
    pub arguments: Cow<'a, str>,
    /// The entry's other keys, kept as they first came.
    pub extra: Map<String, Value>,
}

#[derive(Debug, Default)]
struct ChoiceCalls {
    /// In order of first appearance, with their assembly key.
    calls: Vec<(u64, ChatCall)>,
    /// Bytes of each call's other keys (`extra`), counted against its cap.
    extra_bytes: Vec<usize>,
    /// Whether each call's entries named their `index`.
    indexed: Vec<bool>,
}

/// The choices that hold calls, in order of their index: a sorted `Vec`,
/// not a map. A stream holds its call for most of its life, usually one
/// choice with one call, and a map's first node (about 900 bytes) or a
/// `Vec`'s first four slots would be mostly empty.
#[derive(Debug, Default)]
struct Choices(Vec<(u32, ChoiceCalls)>);

impl Choices {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn find(&self, choice: u32) -> Result<usize, usize> {
        self.0.binary_search_by_key(&choice, |(c, _)| *c)
    }

    fn contains_key(&self, choice: u32) -> bool {
        self.find(choice).is_ok()
    }

    fn get(&self, choice: u32) -> Option<&ChoiceCalls> {
        self.find(choice).ok().map(|i| &self.0[i].1)
    }

    fn get_mut(&mut self, choice: u32) -> Option<&mut ChoiceCalls> {
        self.find(choice).ok().map(|i| &mut self.0[i].1)
    }

    /// `choice`'s calls, made empty when it has none yet.
    fn or_default(&mut self, choice: u32) -> &mut ChoiceCalls {
        let i = match self.find(choice) {
            Ok(i) => i,
            Err(i) => {
                if self.0.is_empty() {
                    self.0.reserve_exact(1);
                }
                self.0.insert(i, (choice, ChoiceCalls::default()));
                i
            }
        };
        &mut self.0[i].1
    }

    /// Removes `choice`'s calls; once none are left the storage goes too.
    fn remove(&mut self, choice: u32) -> Option<ChoiceCalls> {
        let held = self.find(choice).ok().map(|i| self.0.remove(i).1);
        if self.0.is_empty() {
            self.0 = Vec::new();
        }
        held
    }

    fn iter(&self) -> impl Iterator<Item = (u32, &ChoiceCalls)> {
        self.0.iter().map(|(c, held)| (*c, held))
    }
}

#[derive(Debug)]
pub struct Assembler {
    choices: Choices,
    held_bytes: usize,
    max_call_bytes: usize,
    max_held_bytes: usize,
}

impl Assembler {
    pub fn new(max_call_bytes: usize, max_held_bytes: usize) -> Assembler {
        Assembler {
            choices: Choices::default(),
            held_bytes: 0,
            max_call_bytes,
            max_held_bytes,
        }
    }

    /// True when any choice holds a call.
    pub fn any(&self) -> bool {
        !self.choices.is_empty()
    }

    pub fn holds(&self, choice: u32) -> bool {
        self.choices.contains_key(choice)
    }

    /// Choices that hold calls, in order.
    pub fn held_choices(&self) -> Vec<u32> {
        self.choices.iter().map(|(c, _)| c).collect()
    }

    /// Removes and returns a choice's calls in order of first appearance.
    pub fn take(&mut self, choice: u32) -> Vec<ChatCall> {
        let Some(held) = self.choices.remove(choice) else {
            return Vec::new();
        };
        let extra: usize = held.extra_bytes.iter().sum();
        let calls: Vec<ChatCall> = held.calls.into_iter().map(|(_, c)| c).collect();
        let args: usize = calls.iter().map(|c| c.arguments.len()).sum();
        self.held_bytes = self.held_bytes.saturating_sub(args + extra);
        calls
    }

    /// Bytes of every call (and the deltas kept with them) held now.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Removes every held call (used when a stream fails).
    pub fn take_all(&mut self) -> Vec<ChatCall> {
        let keys = self.held_choices();
        keys.into_iter().flat_map(|k| self.take(k)).collect()
    }

    /// One `delta.tool_calls[pos]` entry of choice `choice`.
    pub fn push_tool(&mut self, choice: u32, pos: usize, entry: Value) -> Result<(), Error> {
        let Value::Object(mut entry) = entry else {
            return Err(malformed("tool call entry is not an object"));
        };
        map_guard(&entry, &ENTRY)?;
        let id = take_str(&mut entry, "id")?;
        let index = match entry.remove("index") {
            Some(Value::Number(n)) => Some(
                n.as_u64()
                    .ok_or_else(|| malformed("tool call index is not a non-negative integer"))?,
            ),
            None | Some(Value::Null) => None,
            Some(_) => return Err(malformed("tool call index is not an integer")),
        };
        let kind = take_str(&mut entry, "type")?;
        let (name, arguments) = function_parts(entry.remove("function"))?;
        self.push_delta(
            choice,
            pos,
            Delta {
                index,
                id: id.map(Cow::Owned),
                kind: kind.map(Cow::Owned),
                name: name.map(Cow::Owned),
                arguments: Cow::Owned(arguments),
                extra: entry,
            },
        )
    }

    /// One tool-call entry, already read: the whole-tree and the typed reader
    /// of a chunk end here alike.
    pub fn push_delta(&mut self, choice: u32, pos: usize, d: Delta<'_>) -> Result<(), Error> {
        let key = match d.index {
            Some(k) => k,
            None => self.key_without_index(choice, pos, d.id.as_deref()),
        };
        self.merge(choice, key, false, d)
    }

    /// A choice's first held call when it is complete before the choice
    /// finishes: it named its `index`, id and name, and its arguments are a
    /// whole JSON object (nothing a later fragment could add would leave
    /// them JSON). `(choice, key)`, among the choices `may` lets go; a call
    /// behind one that is not complete waits, so calls keep their order.
    pub fn complete(&self, may: impl Fn(u32) -> bool) -> Option<(u32, u64)> {
        self.choices
            .iter()
            .filter(|(choice, _)| may(*choice))
            .find_map(
                |(choice, held)| match (held.calls.first(), held.indexed.first()) {
                    (Some((key, c)), Some(true)) if whole(c) => Some((choice, *key)),
                    _ => None,
                },
            )
    }

    /// Every call whose arguments are a whole JSON object now, with an
    /// index, an id and a name, and whose key `skip` does not name: by
    /// choice and assembly key.
    pub fn whole_calls(&self, skip: impl Fn(u32, u64) -> bool) -> Vec<(u32, u64, &ChatCall)> {
        let mut found = Vec::new();
        for (choice, held) in self.choices.iter() {
            for ((key, c), indexed) in held.calls.iter().zip(&held.indexed) {
                if *indexed && !skip(choice, *key) && whole(c) {
                    found.push((choice, *key, c));
                }
            }
        }
        found
    }

    /// Removes and returns the call `key` of `choice`.
    pub fn take_one(&mut self, choice: u32, key: u64) -> Option<ChatCall> {
        let held = self.choices.get_mut(choice)?;
        let i = held.calls.iter().position(|(k, _)| *k == key)?;
        let (_, call) = held.calls.remove(i);
        let extra = held.extra_bytes.remove(i);
        held.indexed.remove(i);
        if held.calls.is_empty() {
            self.choices.remove(choice);
        }
        self.held_bytes = self.held_bytes.saturating_sub(call.arguments.len() + extra);
        Some(call)
    }

    /// One legacy `delta.function_call` object of choice `choice`.
    pub fn push_legacy(&mut self, choice: u32, function: Value) -> Result<(), Error> {
        if !function.is_object() {
            return Err(malformed("function_call is not an object"));
        }
        let (name, arguments) = function_parts(Some(function))?;
        let d = Delta {
            name: name.map(Cow::Owned),
            arguments: Cow::Owned(arguments),
            ..Delta::default()
        };
        self.merge(choice, LEGACY_KEY, true, d)
    }

    /// Where an entry without `index` goes: a new call when it brings an id
    /// that differs from the call at its array position, else that position.
    fn key_without_index(&self, choice: u32, pos: usize, id: Option<&str>) -> u64 {
        let pos = pos as u64;
        let Some(c) = self.choices.get(choice) else {
            return pos;
        };
        match (id, c.calls.iter().find(|(k, _)| *k == pos)) {
            (Some(id), Some((_, call)))
                if !id.is_empty() && !call.id.is_empty() && call.id != id =>
            {
                match c.calls.iter().find(|(_, call)| call.id == id) {
                    Some((k, _)) => *k,
                    None => SYNTHETIC_BASE + c.calls.len() as u64,
                }
            }
            _ => pos,
        }
    }

    fn merge(&mut self, choice: u32, key: u64, legacy: bool, d: Delta<'_>) -> Result<(), Error> {
        let indexed = d.index.is_some();
        if !self.choices.contains_key(choice) && self.choices.len() >= MAX_CHOICES {
            return Err(malformed("too many choices with tool calls"));
        }
        let Delta {
            id,
            kind,
            name,
            arguments: args,
            extra,
            ..
        } = d;
        let slot = self.choices.or_default(choice);
        let idx = match slot.calls.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                if slot.calls.len() >= MAX_CALLS_PER_CHOICE {
                    return Err(malformed("too many tool calls in one choice"));
                }
                if slot.calls.is_empty() {
                    // Room for one call, not four: most choices hold one.
                    slot.calls.reserve_exact(1);
                }
                slot.calls.push((
                    key,
                    ChatCall {
                        call: Call {
                            choice,
                            ..Call::default()
                        },
                        site: Site {
                            index: key,
                            legacy,
                            ..Site::default()
                        },
                        wire_type: None,
                    },
                ));
                slot.extra_bytes.push(0);
                slot.indexed.push(indexed);
                slot.calls.len() - 1
            }
        };
        let call = &mut slot.calls[idx].1;
        let extra_bytes = &mut slot.extra_bytes[idx];
        if let Some(id) = id.filter(|s| !s.is_empty()) {
            if id.len() > MAX_CALL_ID_BYTES {
                return Err(malformed("a tool call's id is too long"));
            }
            if call.id.is_empty() {
                call.id = id.into_owned();
            } else if call.id != id {
                return Err(malformed("tool call id changed mid-call"));
            }
        }
        if let Some(k) = kind.filter(|s| !s.is_empty()) {
            call.wire_type.get_or_insert_with(|| k.into_owned());
        }
        if let Some(n) = name.filter(|s| !s.is_empty() && !call.name_too_long) {
            if call.name.is_empty() {
                call.name = n.into_owned();
            } else if call.name != n {
                call.name.push_str(&n);
            }
            if call.name.len() > MAX_NAME_BYTES {
                call.name = String::new();
                call.name_too_long = true;
            }
        }
        if call.oversized {
            return Ok(());
        }
        // Other keys are kept as they first came, and count against the caps.
        let mut added = args.len();
        let mut new_extra = Vec::new();
        for (k, v) in extra {
            if !call.site.extra.contains_key(&k) {
                added += k.len() + serde_json::to_string(&v).map_or(0, |t| t.len());
                new_extra.push((k, v));
            }
        }
        if added == 0 {
            return Ok(());
        }
        let own = call.arguments.len() + *extra_bytes;
        if own + added > self.max_call_bytes || self.held_bytes + added > self.max_held_bytes {
            self.held_bytes -= own;
            *extra_bytes = 0;
            call.arguments = String::new();
            call.site.extra.clear();
            call.oversized = true;
            return Ok(());
        }
        self.held_bytes += added;
        *extra_bytes += added - args.len();
        call.arguments.push_str(&args);
        call.site.extra.extend(new_extra);
        Ok(())
    }
}

/// Whether `c` is a call whose arguments are done: named, with an id, not
/// legacy nor cut, and its arguments a whole JSON object.
fn whole(c: &ChatCall) -> bool {
    let args = c.arguments.trim_ascii();
    !c.site.legacy
        && !c.oversized
        && !c.name_too_long
        && !c.name.is_empty()
        && !c.id.is_empty()
        && args.starts_with('{')
        && args.ends_with('}')
        && serde_json::from_str::<serde::de::IgnoredAny>(args).is_ok()
}

/// A `function` object's `name` and `arguments` (an object or array as its text).
fn function_parts(function: Option<Value>) -> Result<(Option<String>, String), Error> {
    let mut function = match function {
        None | Some(Value::Null) => return Ok((None, String::new())),
        Some(Value::Object(f)) => f,
        Some(_) => return Err(malformed("tool call function is not an object")),
    };
    map_guard(&function, &FUNCTION)?;
    let name = take_str(&mut function, "name")?;
    let args = match function.remove("arguments") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s,
        Some(v @ (Value::Object(_) | Value::Array(_))) => v.to_string(),
        Some(_) => return Err(malformed("tool call arguments are not a string")),
    };
    Ok((name, args))
}

fn take_str(m: &mut Map<String, Value>, key: &str) -> Result<Option<String>, Error> {
    match m.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(malformed("tool call field is not a string")),
    }
}

#[cfg(test)]
mod tests;
