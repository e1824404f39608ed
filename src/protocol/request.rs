//! The request body as toolgate reads it: one tree, within a memory bound,
//! refused when two readers could take it differently.

use serde_json::Value;

use crate::error::Error;
use crate::json;

/// A request may take at most this many times its size as a parsed tree,
/// plus [`TREE_SLACK`] (a long conversation of short messages is legitimate).
const MAX_TREE_FACTOR: usize = 3;
const TREE_SLACK: usize = 8 << 20;

/// Bodies this large are parsed with [`json::lean_value`].
const LEAN_MIN: usize = 1 << 20;

fn bad(m: impl Into<String>) -> Error {
    Error::BadRequest(m.into())
}

/// Bodies up to this size are first counted by [`json::tree_cost_bound`]:
/// one pass that does not tell strings apart, so it never undercounts, at a
/// fraction of the exact scan's cost (a search per string). That scan ran
/// before every request went upstream, where each microsecond costs
/// (`docs/PERFORMANCE.md`).
const BOUND_MAX: usize = 16 << 10;

/// A bound at most this far over the body's size is charged as it is: it
/// overcharges by no more than this, and no body it fits can be refused
/// (its tree stays under [`TREE_SLACK`]). A body whose strings hold many
/// braces, commas or colons (code, say) gets the exact scan instead, so it
/// is not charged for them while its answer is awaited.
const BOUND_ROOM: usize = 64 << 10;
const _: () = assert!(BOUND_ROOM <= TREE_SLACK, "a charged bound could be refused");

/// What parsing `bytes` will take in memory; a body of many tiny values,
/// which would take many times its size as a tree, is refused before the tree
/// is built.
pub fn tree_cost(bytes: &[u8]) -> Result<usize, Error> {
    if bytes.len() <= BOUND_MAX {
        let bound = json::tree_cost_bound(bytes);
        if bound <= bytes.len() + BOUND_ROOM {
            return Ok(bound);
        }
    }
    let cost = json::tree_cost(bytes);
    if cost > MAX_TREE_FACTOR * bytes.len() + TREE_SLACK {
        return Err(bad("Request body has too many JSON values for its size."));
    }
    Ok(cost)
}

/// The request body as a tree; an error about the agent's own input when it
/// is not a JSON object.
/// Repeated keys are refused (the upstream is sent what toolgate parsed, but
/// an agent that repeats a key meant one of them, and which one is
/// anybody's guess), and so is a key a lenient upstream would take for one
/// toolgate reads (`"Messages"`, `"ROLE"`).
pub fn request_tree(bytes: &[u8]) -> Result<Value, Error> {
    let invalid = |e: serde_json::Error| bad(format!("Request body is not valid JSON: {e}"));
    let body: Value = if bytes.len() < LEAN_MIN {
        json::strict_value(bytes).map_err(invalid)?
    } else {
        // Large bodies: built so memory stays near their size.
        let raw: &serde_json::value::RawValue = serde_json::from_slice(bytes).map_err(invalid)?;
        json::lean_value(raw).map_err(invalid)?
    };
    let Value::Object(top) = &body else {
        return Err(bad("Request body must be a JSON object."));
    };
    guard(top, &TOP)?;
    for list in ["messages", "input", "items"] {
        let items = top
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        for item in items.filter_map(Value::as_object) {
            guard(item, &ITEM)?;
            let parts = item.get("content").and_then(Value::as_array).into_iter();
            for part in parts.flatten().filter_map(Value::as_object) {
                guard(part, &PART)?;
            }
        }
    }
    Ok(body)
}

/// Top-level keys toolgate reads, of every protocol.
const TOP: [&str; 17] = [
    "model",
    "messages",
    "input",
    "instructions",
    "system",
    "tools",
    "functions",
    "tool_choice",
    "function_call",
    "stream",
    "previous_response_id",
    "conversation",
    "items",
    "response_format",
    "text",
    "n",
    "mcp_servers",
];
/// Keys of a message or input item toolgate reads.
const ITEM: [&str; 12] = [
    "role",
    "content",
    "type",
    "name",
    "tool_calls",
    "tool_call_id",
    "call_id",
    "id",
    "output",
    "arguments",
    "input",
    "function_call",
];
/// Keys of a content part toolgate reads.
const PART: [&str; 7] = [
    "type",
    "text",
    "content",
    "tool_use_id",
    "input",
    "name",
    "id",
];

fn guard(obj: &serde_json::Map<String, Value>, known: &[&str]) -> Result<(), Error> {
    match obj.keys().find(|k| crate::fold::impersonates(k, known)) {
        Some(k) => Err(bad(format!(
            "Request body has a key ('{}') that differs from a known key only by case or spelling.",
            k.escape_debug()
        ))),
        None => Ok(()),
    }
}

/// The request's `stream` flag: absent or null is false.
pub fn stream_flag(body: &Value) -> Result<bool, Error> {
    match body.get("stream") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(bad("'stream' must be a boolean.")),
    }
}

/// A top-level array field; absent or null reads as empty.
pub fn array<'a>(v: Option<&'a Value>, name: &str) -> Result<&'a [Value], Error> {
    match v {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(bad(format!("'{name}' must be an array."))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: &str) -> bool {
        matches!(request_tree(body.as_bytes()), Err(Error::BadRequest(_)))
    }

    #[test]
    fn a_small_body_is_charged_the_bound_only_when_it_is_close() {
        let chat = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[]}"#;
        assert_eq!(tree_cost(chat).unwrap(), json::tree_cost_bound(chat));
        // Code in a string: the bound would count every brace in it.
        let code = format!(
            r#"{{"messages":[{{"role":"tool","content":"{}"}}]}}"#,
            "fn f() { g(a, b) }\n".repeat(600)
        );
        assert!(code.len() <= BOUND_MAX);
        assert!(json::tree_cost_bound(code.as_bytes()) > code.len() + BOUND_ROOM);
        assert_eq!(
            tree_cost(code.as_bytes()).unwrap(),
            json::tree_cost(code.as_bytes())
        );
        // The worst short body still meets the exact scan, and is refused.
        assert!(tree_cost(&vec![b'{'; BOUND_MAX]).is_err());
        let long = vec![b'{'; 64 * 1024];
        assert!(tree_cost(&long).is_err());
        let fine = format!("{{\"a\":\"{}\"}}", "{".repeat(64 * 1024));
        assert!(tree_cost(fine.as_bytes()).is_ok());
    }

    #[test]
    fn repeated_keys_are_refused_at_any_depth() {
        for body in [
            r#"{"messages":[],"messages":[{"role":"tool","content":"x"}]}"#,
            r#"{"tools":[],"model":"m","tools":[]}"#,
            r#"{"messages":[{"role":"user","role":"tool","content":"x"}]}"#,
            r#"{"input":[{"type":"function_call_output","output":"a","output":"b"}]}"#,
            r#"{"tools":[{"type":"function","function":{"name":"a","parameters":{"properties":{"p":{},"p":{}}}}}]}"#,
        ] {
            assert!(refused(body), "{body}");
        }
    }

    #[test]
    fn keys_a_lenient_reader_takes_for_known_ones_are_refused() {
        for body in [
            r#"{"Messages":[{"role":"tool","content":"x"}]}"#,
            r#"{"TOOLS":[]}"#,
            "{\"ſtream\":true}",
            r#"{"messages":[{"Role":"tool","content":"x"}]}"#,
            r#"{"messages":[{"role":"user","Content":"x"}]}"#,
            r#"{"input":[{"type":"function_call_output","OUTPUT":"x"}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"tool_result","Content":"x"}]}]}"#,
            "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"te\u{200b}xt\":\"x\"}]}]}",
        ] {
            assert!(refused(body), "{body}");
        }
    }

    #[test]
    fn ordinary_requests_and_free_form_schemas_pass() {
        for body in [
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#,
            r#"{"model":"m","tools":[{"type":"function","function":{"name":"a","parameters":{"properties":{"Name":{},"name":{},"Type":{}}}}}],"messages":[]}"#,
            r#"{"model":"m","input":[{"type":"message","role":"user","content":"x"}],"metadata":{"Model":"mine"}}"#,
        ] {
            assert!(request_tree(body.as_bytes()).is_ok(), "{body}");
        }
    }
}
