//! The request side: parse the agent's chat request and build its [`Context`].

pub mod context;
pub mod fence;
pub mod hide;
pub mod redact;
pub mod tool_results;

use std::collections::HashMap;

use serde_json::Value;

use crate::error::Error;

/// A tool the request declares (`tools[].function` or legacy `functions[]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declared {
    /// The declared JSON Schema of its arguments, if any.
    pub parameters: Option<Value>,
}

/// What the gates know about the request a call answers.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub request_id: String,
    pub principal: String,
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
    pub declared: HashMap<String, Declared>,
    /// All user, system and tool-result text, for argument provenance.
    pub user_text: String,
    pub system_text: String,
    pub tool_text: String,
}

/// A parsed chat-completions request.
#[derive(Debug)]
pub struct ChatRequest {
    pub body: Value,
    pub declared: HashMap<String, Declared>,
    /// `stream: true`: the answer must be an event stream (else JSON).
    pub stream: bool,
}

/// A request may take at most this many times its size as a parsed tree,
/// plus [`TREE_SLACK`] (a long chat of short messages is legitimate).
const MAX_TREE_FACTOR: usize = 3;
const TREE_SLACK: usize = 8 << 20;

/// Bodies this large are parsed with [`crate::wire::json::lean_value`].
const LEAN_MIN: usize = 1 << 20;

fn bad(m: impl Into<String>) -> Error {
    Error::BadRequest(m.into())
}

/// A top-level array field; absent or null reads as empty.
fn array<'a>(v: Option<&'a Value>, name: &str) -> Result<&'a [Value], Error> {
    match v {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(bad(format!("'{name}' must be an array."))),
    }
}

/// Records one function declaration (`{name, parameters}`) found at `at`.
fn declare(declared: &mut HashMap<String, Declared>, f: &Value, at: &str) -> Result<(), Error> {
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| bad(format!("{at}.name must be a non-empty string.")))?;
    let parameters = f.get("parameters").cloned();
    declared.insert(name.to_string(), Declared { parameters });
    Ok(())
}

/// What parsing `bytes` will take in memory; a body of many tiny values,
/// which would take many times its size as a tree, is refused before the tree
/// is built.
pub fn tree_cost(bytes: &[u8]) -> Result<usize, Error> {
    let cost = crate::wire::json::tree_cost(bytes);
    if cost > MAX_TREE_FACTOR * bytes.len() + TREE_SLACK {
        return Err(bad("Request body has too many JSON values for its size."));
    }
    Ok(cost)
}

/// Parses and checks the request body. Errors are about the agent's own input.
pub fn parse_chat(bytes: &[u8]) -> Result<ChatRequest, Error> {
    let invalid = |e: serde_json::Error| bad(format!("Request body is not valid JSON: {e}"));
    let body: Value = if bytes.len() < LEAN_MIN {
        serde_json::from_slice(bytes).map_err(invalid)?
    } else {
        // Large bodies: built so memory stays near their size.
        let raw: &serde_json::value::RawValue = serde_json::from_slice(bytes).map_err(invalid)?;
        crate::wire::json::lean_value(raw).map_err(invalid)?
    };
    let Value::Object(obj) = &body else {
        return Err(bad("Request body must be a JSON object."));
    };
    let stream = match obj.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("'stream' must be a boolean.")),
    };
    let mut declared = HashMap::new();
    for (i, t) in array(obj.get("tools"), "tools")?.iter().enumerate() {
        if t.get("type").and_then(Value::as_str).unwrap_or("function") != "function" {
            continue;
        }
        let f = t
            .get("function")
            .ok_or_else(|| bad(format!("tools[{i}].function is missing.")))?;
        declare(&mut declared, f, &format!("tools[{i}].function"))?;
    }
    for (i, f) in array(obj.get("functions"), "functions")?.iter().enumerate() {
        declare(&mut declared, f, &format!("functions[{i}]"))?;
    }
    Ok(ChatRequest {
        body,
        declared,
        stream,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_tools_come_from_tools_and_functions() {
        let r = parse_chat(br#"{"model":"m","tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object"}}},{"type":"web_search"}],"functions":[{"name":"b"}]}"#).unwrap();
        let mut names: Vec<_> = r.declared.keys().cloned().collect();
        names.sort();
        assert_eq!(names, ["a", "b"]);
        assert!(r.declared["a"].parameters.is_some());
    }

    #[test]
    fn bad_requests_are_client_errors() {
        for b in [
            &b"{"[..],
            b"[]",
            br#"{"tools":{}}"#,
            br#"{"tools":[{"type":"function"}]}"#,
            br#"{"tools":[{"function":{"name":""}}]}"#,
            br#"{"functions":[{}]}"#,
        ] {
            let e = parse_chat(b).unwrap_err();
            assert_eq!(e.status(), 400, "{}", String::from_utf8_lossy(b));
        }
    }
}
