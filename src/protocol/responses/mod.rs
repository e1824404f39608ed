//! The Responses API codec (`POST /v1/responses`); no I/O.
//!
//! - [`request`]: declared tools (functions, custom and built-in tools), texts
//!   from `instructions` and `input`, tool results from `*_call_output` items.
//! - [`hide`]: removes denied tools from the request.
//! - [`stream`]: the streaming rewriter: an output item that is a call is held
//!   from `response.output_item.added` to `response.output_item.done`, then
//!   released as it came or replaced by an assistant message at the same
//!   `output_index`.
//! - [`complete`]: the same over a non-streamed response's `output`.
//!
//! The calls a client runs are items of type `function_call`,
//! `custom_tool_call`, `shell_call`, `local_shell_call`, `apply_patch_call`,
//! `computer_call` and a `tool_search_call` whose `execution` is `client`;
//! a function or custom tool inside a `namespace` tool is gated under
//! `namespace.name`. An item type toolgate does not know (a new one, or a
//! misspelled `"function_call "`) is held as a call too, and rejected.
//! Provider-run tools (`web_search_call`, …) already ran when their item
//! arrives: they are gated on the request, where a denied one is removed or
//! refused.

mod codec;
pub use codec::Responses;
pub mod complete;
pub mod follow;
pub mod hide;
pub mod request;
pub mod stream;

use serde_json::{json, Value};

use crate::call::{Call, Kind, MAX_CALL_ID_BYTES, MAX_NAME_BYTES};
use crate::error::Error;
use crate::protocol::malformed;

/// Output item types of tools the provider runs itself (never held).
const HOSTED_CALLS: [&str; 5] = [
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
];

/// Output item types that are neither calls nor reasoning: they pass.
const OTHER_ITEMS: [&str; 16] = [
    "message",
    "function_call_output",
    "custom_tool_call_output",
    "computer_call_output",
    "shell_call_output",
    "local_shell_call_output",
    "apply_patch_call_output",
    "tool_search_output",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "program",
    "program_output",
    "additional_tools",
    "compaction",
    "item_reference",
];

/// A provider-run item (a web search, a file search, …) as a call, for the
/// audit trail and [`crate::context::Context::provider_ran`]: named by its
/// type without `_call` (its input is not kept). `None` for other items.
pub fn hosted_call(item: &Value) -> Option<Call> {
    let t = item.get("type").and_then(Value::as_str)?;
    if !HOSTED_CALLS.contains(&t) {
        return None;
    }
    Some(Call {
        id: (item.get("id").and_then(Value::as_str))
            .unwrap_or("")
            .to_string(),
        kind: Kind::Other(t.to_string()),
        name: t.trim_end_matches("_call").to_string(),
        ..Call::default()
    })
}

/// The tool-search item: run by the provider, or by the client when its
/// `execution` is `client` (then gated as the `tool_search` tool).
const TOOL_SEARCH: &str = "tool_search_call";

/// The keys toolgate reads in a call item. A key that only folds to one of
/// them fails the item.
pub const ITEM_KEYS: [&str; 10] = [
    "type",
    "id",
    "call_id",
    "name",
    "namespace",
    "arguments",
    "input",
    "action",
    "operation",
    "execution",
];

/// How an output item of type `t` is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemClass {
    /// A call the client runs: held and gated.
    Call,
    /// Reasoning: dropped from a final `output` when it leads only to withheld calls.
    Reasoning,
    /// Anything else (messages, provider-run tools): passes.
    Other,
}

/// How an item of type `t` is treated (see [`class_of`] for a whole item).
/// Every type toolgate does not know as a message, reasoning or a tool the
/// provider runs is held as a call: a new item type, or one that differs
/// from a known type by case, spacing or invisible characters
/// (`"Function_Call"`, `"function_call "`), which a lenient reader could
/// take for a call. Its kind ([`call_of`]) is one toolgate rejects.
pub fn classify(t: &str) -> ItemClass {
    match t {
        "reasoning" => ItemClass::Reasoning,
        _ if HOSTED_CALLS.contains(&t) || OTHER_ITEMS.contains(&t) => ItemClass::Other,
        _ => ItemClass::Call,
    }
}

/// How an output item is treated: [`classify`] by its type, and a
/// `tool_search_call` is a call when the client runs it.
pub fn class_of(item: &Value) -> ItemClass {
    let t = item.get("type").and_then(Value::as_str).unwrap_or("");
    match t {
        TOOL_SEARCH => match item.get("execution").and_then(Value::as_str) {
            Some("server") | None => ItemClass::Other,
            _ => ItemClass::Call,
        },
        _ => classify(t),
    }
}

/// The tool name a built-in tool type is declared and gated under.
pub fn builtin_name(tool_type: &str) -> &str {
    match tool_type {
        t if t.starts_with("web_search") => "web_search",
        "computer_use_preview" | "computer_use" => "computer",
        t => t,
    }
}

fn str_field<'a>(item: &'a Value, key: &str) -> Result<&'a str, Error> {
    match item.get(key) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(malformed("an output item field is not a string")),
    }
}

/// The name a function or custom tool is gated under: `namespace.name`
/// for a tool inside a `namespace` tool, else its name.
pub fn full_name(namespace: &str, name: &str) -> String {
    match namespace {
        "" => name.to_string(),
        ns => format!("{ns}.{name}"),
    }
}

/// The canonical call of a complete call item (`item.type` classified as
/// [`ItemClass::Call`]); arguments over `max` bytes are dropped and marked.
pub fn call_of(item: &Value, max: usize) -> Result<Call, Error> {
    let t = str_field(item, "type")?;
    let json_of = |key: &str| item.get(key).map(Value::to_string).unwrap_or_default();
    let named = || -> Result<String, Error> {
        Ok(full_name(
            str_field(item, "namespace")?,
            str_field(item, "name")?,
        ))
    };
    let namespaced = matches!(t, "function_call" | "custom_tool_call")
        && !str_field(item, "namespace")?.is_empty();
    let (kind, name, arguments) = match t {
        "function_call" => (
            Kind::Function,
            named()?,
            str_field(item, "arguments")?.to_string(),
        ),
        "custom_tool_call" => (
            Kind::Custom,
            named()?,
            json!({ "input": str_field(item, "input")? }).to_string(),
        ),
        TOOL_SEARCH => (Kind::ToolSearch, "tool_search".into(), json_of("arguments")),
        "shell_call" => (Kind::Shell, "shell".into(), json_of("action")),
        "local_shell_call" => (Kind::LocalShell, "local_shell".into(), json_of("action")),
        "apply_patch_call" => (Kind::ApplyPatch, "apply_patch".into(), json_of("operation")),
        "computer_call" => (Kind::Computer, "computer".into(), json_of("action")),
        other => (
            Kind::Other(other.to_string()),
            other.to_string(),
            String::new(),
        ),
    };
    let oversized = arguments.len() > max;
    let name_too_long = name.len() > MAX_NAME_BYTES;
    Ok(Call {
        choice: 0,
        id: call_id(item)?.to_string(),
        kind,
        name: if name_too_long { String::new() } else { name },
        arguments: if oversized { String::new() } else { arguments },
        oversized,
        name_too_long,
        namespaced,
    })
}

/// What a call item was decided as, in one value that every later reading
/// of the item is compared against: its item id and type and the canonical
/// call (kind, full name, call id, arguments), byte for byte.
pub fn fingerprint(item_id: &str, item_type: &str, call: &Call) -> [u8; 32] {
    crate::digest::sha256_parts(&[
        &(item_id.len() as u64).to_le_bytes(),
        item_id.as_bytes(),
        &(item_type.len() as u64).to_le_bytes(),
        item_type.as_bytes(),
        &(call.name.len() as u64).to_le_bytes(),
        call.name.as_bytes(),
        &(call.id.len() as u64).to_le_bytes(),
        call.id.as_bytes(),
        &[u8::from(call.oversized), u8::from(call.name_too_long)],
        call.arguments.as_bytes(),
    ])
}

/// The id a client answers a call item with: `call_id`, else the item `id`.
pub fn call_id(item: &Value) -> Result<&str, Error> {
    let id = match str_field(item, "call_id")? {
        "" => str_field(item, "id")?,
        id => id,
    };
    if id.len() > MAX_CALL_ID_BYTES {
        return Err(malformed("a call item's call_id is too long"));
    }
    Ok(id)
}

/// Ids of the messages that replace withheld calls: shaped like the
/// provider's own, the same wherever one call is replaced (stream events and
/// the final `output`), and not derivable without the deployment's key.
pub struct Ids {
    key: [u8; 32],
}

impl Ids {
    pub fn new(key: &[u8; 32]) -> Ids {
        Ids { key: *key }
    }

    /// The message id standing in for the call item `item_id`.
    pub fn message_id(&self, item_id: &str) -> String {
        let mac = crate::fence::marker::hmac_sha256(&self.key, &[item_id.as_bytes()]);
        format!("msg_{}", crate::digest::hex(&mac[..24]))
    }
}

/// The assistant message that stands in for a withheld call; its text a
/// `refusal` part when the request asked for structured output.
pub fn neutral_item(id: &str, text: &str, refusal: bool) -> Value {
    json!({
        "id": id,
        "type": "message",
        "status": "completed",
        "content": [neutral_part(text, refusal)],
        "role": "assistant",
    })
}

fn neutral_part(text: &str, refusal: bool) -> Value {
    match refusal {
        true => json!({ "type": "refusal", "refusal": text }),
        false => json!({ "type": "output_text", "annotations": [], "logprobs": [], "text": text }),
    }
}

/// The item that answers a withheld call of item type `item_type` in a
/// later request, or `None` when that type has no text answer.
pub fn neutral_output(call_id: &str, item_type: &str, text: &str) -> Option<Value> {
    let output_type = match item_type {
        "function_call" => "function_call_output",
        "custom_tool_call" => "custom_tool_call_output",
        "shell_call" => "shell_call_output",
        "local_shell_call" => "local_shell_call_output",
        "apply_patch_call" => "apply_patch_call_output",
        _ => return None,
    };
    Some(match output_type {
        "shell_call_output" => json!({
            "type": output_type,
            "call_id": call_id,
            "output": [{"stdout": "", "stderr": text, "outcome": {"type": "exit", "exit_code": 1}}],
        }),
        "apply_patch_call_output" => json!({
            "type": output_type, "call_id": call_id, "status": "failed", "output": text,
        }),
        "local_shell_call_output" => json!({ "type": output_type, "id": call_id, "output": text }),
        _ => json!({ "type": output_type, "call_id": call_id, "output": text }),
    })
}

/// Which reasoning items of `types` (an `output` array's item types, with
/// whether each call item is withheld) are dropped: a reasoning item whose
/// following items, up to the next item that is not a call, are all withheld
/// calls (and at least one).
pub fn dropped_reasoning(items: &[(ItemClass, bool)]) -> Vec<bool> {
    let mut out = vec![false; items.len()];
    for (i, (class, _)) in items.iter().enumerate() {
        if *class != ItemClass::Reasoning {
            continue;
        }
        let run: Vec<bool> = items[i + 1..]
            .iter()
            .take_while(|(c, _)| *c == ItemClass::Call)
            .map(|(_, withheld)| *withheld)
            .collect();
        out[i] = !run.is_empty() && run.iter().all(|w| *w);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_classified_by_type() {
        for t in [
            "function_call",
            "custom_tool_call",
            "shell_call",
            "apply_patch_call",
            "computer_call",
            "new_thing_call",
        ] {
            assert_eq!(classify(t), ItemClass::Call, "{t}");
        }
        for t in [
            "message",
            "web_search_call",
            "mcp_call",
            "mcp_list_tools",
            "function_call_output",
        ] {
            assert_eq!(classify(t), ItemClass::Other, "{t}");
        }
        // Unknown or misspelled types are held as calls (and rejected).
        for t in [
            "function_call ",
            "Function_Call",
            "tool_use",
            "new_item",
            "",
        ] {
            assert_eq!(classify(t), ItemClass::Call, "{t:?}");
        }
        let search = |e: Value| class_of(&json!({"type": "tool_search_call", "execution": e}));
        assert_eq!(search(json!("client")), ItemClass::Call);
        assert_eq!(search(json!("Client")), ItemClass::Call);
        assert_eq!(search(json!("server")), ItemClass::Other);
        assert_eq!(search(Value::Null), ItemClass::Other);
        assert_eq!(classify("reasoning"), ItemClass::Reasoning);
    }

    #[test]
    fn calls_are_canonical() {
        let c = call_of(
            &json!({"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"}),
            100,
        )
        .unwrap();
        assert_eq!(
            (
                c.id.as_str(),
                c.name.as_str(),
                c.arguments.as_str(),
                &c.kind
            ),
            ("c1", "f", "{\"a\":1}", &Kind::Function)
        );
        let c = call_of(
            &json!({"type":"custom_tool_call","call_id":"c2","name":"g","input":"x y"}),
            100,
        )
        .unwrap();
        assert_eq!(c.arguments, "{\"input\":\"x y\"}");
        let c = call_of(
            &json!({"type":"shell_call","call_id":"c3","action":{"commands":["ls"]}}),
            100,
        )
        .unwrap();
        assert_eq!((c.name.as_str(), c.kind.clone()), ("shell", Kind::Shell));
        assert!(call_of(&json!({"type":"function_call","call_id":"c","name":"f","arguments":"{\"long\":1}"}), 4).unwrap().oversized);
        assert!(call_of(&json!({"type":"function_call","name":5}), 4).is_err());
        let c = call_of(&json!({"type":"odd_call","id":"x"}), 4).unwrap();
        assert!(matches!(c.kind, Kind::Other(_)));
        let c = call_of(&json!({"type":"function_call","call_id":"c","namespace":"crm","name":"delete_contact","arguments":"{}"}), 100).unwrap();
        assert_eq!(c.name, "crm.delete_contact");
        assert!(call_of(&json!({"type":"function_call","namespace":1,"name":"f"}), 4).is_err());
        let c = call_of(&json!({"type":"tool_search_call","call_id":"s","execution":"client","arguments":{"q":"x"}}), 100).unwrap();
        assert_eq!(
            (c.name.as_str(), c.kind.clone(), c.arguments.as_str()),
            ("tool_search", Kind::ToolSearch, "{\"q\":\"x\"}")
        );
    }

    #[test]
    fn reasoning_before_only_withheld_calls_is_dropped() {
        use ItemClass::*;
        let d = dropped_reasoning(&[
            (Reasoning, false),
            (Call, true),
            (Call, true),
            (Reasoning, false),
            (Call, true),
            (Call, false),
            (Reasoning, false),
            (Other, false),
        ]);
        assert_eq!(d, [true, false, false, false, false, false, false, false]);
    }
}
