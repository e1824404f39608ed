//! Tool-call deltas → complete calls, keyed by (choice, index); memory bounded.
//!
//! Providers differ: a header then
//! argument fragments, a whole call in one entry, a missing `index` (Mistral,
//! Gemini), `index` starting at 1, `id: ""` or `name: ""` on continuations
//! (Qwen, GLM), legacy `function_call` with neither index nor id. Anything that
//! cannot be read as a call is an upstream error, never a panic.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::keys::{ENTRY, FUNCTION};
use super::{ChatCall, Site};
use crate::call::{Call, MAX_NAME_BYTES};
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
}

#[derive(Debug)]
pub struct Assembler {
    choices: BTreeMap<u32, ChoiceCalls>,
    held_bytes: usize,
    max_call_bytes: usize,
    max_held_bytes: usize,
}

impl Assembler {
    pub fn new(max_call_bytes: usize, max_held_bytes: usize) -> Assembler {
        Assembler {
            choices: BTreeMap::new(),
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
        self.choices.contains_key(&choice)
    }

    /// Choices that hold calls, in order.
    pub fn held_choices(&self) -> Vec<u32> {
        self.choices.keys().copied().collect()
    }

    /// Removes and returns a choice's calls in order of first appearance.
    pub fn take(&mut self, choice: u32) -> Vec<ChatCall> {
        let Some(held) = self.choices.remove(&choice) else {
            return Vec::new();
        };
        if self.choices.is_empty() {
            // An emptied map keeps its node: a held stream need not.
            self.choices = BTreeMap::new();
        }
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
        let Some(c) = self.choices.get(&choice) else {
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
        if !self.choices.contains_key(&choice) && self.choices.len() >= MAX_CHOICES {
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
        let slot = self.choices.entry(choice).or_default();
        let idx = match slot.calls.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                if slot.calls.len() >= MAX_CALLS_PER_CHOICE {
                    return Err(malformed("too many tool calls in one choice"));
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
                slot.calls.len() - 1
            }
        };
        let call = &mut slot.calls[idx].1;
        let extra_bytes = &mut slot.extra_bytes[idx];
        if let Some(id) = id.filter(|s| !s.is_empty()) {
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
mod tests {
    use super::*;
    use serde_json::json;

    fn asm() -> Assembler {
        Assembler::new(1024, 4096)
    }

    #[test]
    fn header_then_fragments() {
        let mut a = asm();
        a.push_tool(0, 0, json!({"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":""}})).unwrap();
        a.push_tool(0, 0, json!({"index":0,"function":{"arguments":"{\"a\""}}))
            .unwrap();
        a.push_tool(
            0,
            0,
            json!({"index":0,"id":"","type":"function","function":{"name":"","arguments":":1}"}}),
        )
        .unwrap();
        let c = a.take(0);
        assert_eq!(c.len(), 1);
        assert_eq!(
            (
                c[0].id.as_str(),
                c[0].name.as_str(),
                c[0].arguments.as_str()
            ),
            ("call_1", "get", "{\"a\":1}")
        );
        assert!(!a.any());
    }

    #[test]
    fn missing_index_uses_position_and_new_ids_start_new_calls() {
        let mut a = asm();
        a.push_tool(
            0,
            0,
            json!({"id":"x","function":{"name":"a","arguments":"{}"}}),
        )
        .unwrap();
        a.push_tool(
            0,
            0,
            json!({"id":"y","function":{"name":"b","arguments":"{}"}}),
        )
        .unwrap();
        a.push_tool(0, 0, json!({"function":{"arguments":""}}))
            .unwrap();
        let c = a.take(0);
        let names: Vec<_> = c.iter().map(|c| (c.id.as_str(), c.name.as_str())).collect();
        assert_eq!(names, [("x", "a"), ("y", "b")]);
    }

    #[test]
    fn choices_are_separate_and_legacy_is_one_call() {
        let mut a = asm();
        a.push_tool(
            1,
            0,
            json!({"index":0,"id":"b","function":{"name":"n1","arguments":"{}"}}),
        )
        .unwrap();
        a.push_legacy(0, json!({"name":"repl","arguments":""}))
            .unwrap();
        a.push_legacy(0, json!({"arguments":"{\"c\":1}"})).unwrap();
        assert_eq!(a.held_choices(), [0, 1]);
        let c0 = a.take(0);
        assert!(c0[0].site.legacy);
        assert_eq!(c0[0].arguments, "{\"c\":1}");
        assert_eq!(a.take(1)[0].name, "n1");
    }

    #[test]
    fn oversized_arguments_are_dropped_and_marked() {
        let mut a = Assembler::new(8, 100);
        a.push_tool(
            0,
            0,
            json!({"index":0,"id":"i","function":{"name":"n","arguments":"{\"abcdef\""}}),
        )
        .unwrap();
        a.push_tool(0, 0, json!({"index":0,"function":{"arguments":":1}"}}))
            .unwrap();
        let c = a.take(0);
        assert!(c[0].oversized);
        assert!(c[0].arguments.is_empty());
        let mut a = Assembler::new(100, 10);
        a.push_tool(
            0,
            0,
            json!({"index":0,"function":{"name":"n","arguments":"123456"}}),
        )
        .unwrap();
        a.push_tool(
            0,
            1,
            json!({"index":1,"function":{"name":"m","arguments":"123456"}}),
        )
        .unwrap();
        let c = a.take(0);
        assert!(
            !c[0].oversized && c[1].oversized,
            "the response-wide bound rejects the second call"
        );
    }

    #[test]
    fn a_name_past_the_cap_is_dropped_at_once_and_other_keys_count() {
        let mut a = asm();
        a.push_tool(0, 0, json!({"index":0,"id":"i","function":{"name":"n"}}))
            .unwrap();
        let long = "x".repeat(MAX_NAME_BYTES);
        a.push_tool(0, 0, json!({"index":0,"function":{"name":long}}))
            .unwrap();
        a.push_tool(0, 0, json!({"index":0,"function":{"name":"more"}}))
            .unwrap();
        let c = a.take(0);
        assert!(c[0].name_too_long && c[0].name.is_empty());
        let mut a = Assembler::new(64, 1024);
        for i in 0..8 {
            let mut e = json!({"index":0,"function":{"arguments":""}});
            e[format!("k{i}")] = json!("0123456789");
            a.push_tool(0, 0, e).unwrap();
        }
        let c = a.take(0);
        assert!(c[0].oversized, "unknown keys filled the call's cap");
        assert!(c[0].site.extra.is_empty());
    }

    #[test]
    fn keys_that_fold_to_known_ones_are_errors() {
        for bad in [
            json!({"index":0,"Function":{"name":"x"}}),
            json!({"index":0,"function":{"NAME":"x"}}),
            json!({"index":0,"function":{"argumentſ":"{}"}}),
            json!({"INDEX":0,"function":{"name":"x"}}),
        ] {
            assert!(asm().push_tool(0, 0, bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn malformed_entries_are_errors() {
        for bad in [
            json!("str"),
            json!({"index":"0"}),
            json!({"index":-1}),
            json!({"index":0,"function":"x"}),
            json!({"index":0,"function":{"arguments":5}}),
            json!({"index":0,"id":7}),
        ] {
            assert!(asm().push_tool(0, 0, bad.clone()).is_err(), "{bad}");
        }
        let mut a = asm();
        a.push_tool(0, 0, json!({"index":0,"id":"a"})).unwrap();
        assert!(a.push_tool(0, 0, json!({"index":0,"id":"b"})).is_err());
    }

    #[test]
    fn object_arguments_are_serialised_and_extras_kept() {
        let mut a = asm();
        a.push_tool(0, 0, json!({"index":0,"id":"i","extra_content":{"g":1},"function":{"name":"n","arguments":{"a":1}}})).unwrap();
        let c = a.take(0);
        assert_eq!(c[0].arguments, "{\"a\":1}");
        assert_eq!(c[0].site.extra["extra_content"], json!({"g":1}));
    }
}
