//! Removes denied tools from a Responses request, so the model never sees them.

use std::borrow::Cow;

use serde_json::Value;

use super::{builtin_name, full_name};
use crate::protocol::drop_if_empty;

/// The name a `tools[]` entry (or a `tool_choice` naming one) is gated under;
/// `ns` is the namespace tool it sits in, if any.
fn tool_name<'a>(t: &'a Value, ns: &str) -> Option<Cow<'a, str>> {
    let ty = t.get("type").and_then(Value::as_str)?;
    match ty {
        "function" | "custom" => {
            let name = t.get("name").and_then(Value::as_str)?;
            let ns = t.get("namespace").and_then(Value::as_str).unwrap_or(ns);
            Some(match ns {
                "" => Cow::Borrowed(name),
                ns => Cow::Owned(full_name(ns, name)),
            })
        }
        "namespace" => None,
        other => Some(Cow::Borrowed(builtin_name(other))),
    }
}

/// Removes `names` from `tools`; a `tool_choice` that forces a removed tool is
/// dropped, an `allowed_tools` choice loses the removed ones, and tool
/// settings left without tools are dropped. Returns whether anything changed.
pub fn remove_tools(body: &mut Value, names: &[String]) -> bool {
    let Value::Object(obj) = body else {
        return false;
    };
    let hidden_in =
        |t: &Value, ns: &str| tool_name(t, ns).is_some_and(|n| names.iter().any(|x| *x == n));
    let hidden = |t: &Value| hidden_in(t, "");
    let mut changed = false;
    if let Some(Value::Array(tools)) = obj.get_mut("tools") {
        let before = tools.len();
        // A namespace loses its hidden tools, and goes when none is left.
        for t in tools.iter_mut() {
            if t.get("type").and_then(Value::as_str) != Some("namespace") {
                continue;
            }
            let ns = t
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if let Some(Value::Array(inner)) = t.get_mut("tools") {
                let n = inner.len();
                inner.retain(|i| !hidden_in(i, &ns));
                changed |= inner.len() != n;
            }
        }
        tools.retain(|t| {
            let empty_ns = t.get("type").and_then(Value::as_str) == Some("namespace")
                && t.get("tools")
                    .and_then(Value::as_array)
                    .is_some_and(Vec::is_empty);
            !hidden(t) && !empty_ns
        });
        changed |= tools.len() != before;
    }
    if let Some(choice) = obj.get_mut("tool_choice") {
        if choice.is_object() && hidden(choice) {
            obj.remove("tool_choice");
            changed = true;
        } else if let Some(Value::Array(allowed)) = choice.get_mut("tools") {
            let before = allowed.len();
            allowed.retain(|t| !hidden(t));
            if allowed.len() != before {
                changed = true;
                if allowed.is_empty() {
                    obj.remove("tool_choice");
                }
            }
        }
    }
    drop_if_empty(obj, "tools", &["tool_choice", "parallel_tool_calls"]);
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removes_functions_and_built_in_tools_and_their_choices() {
        let mut b = json!({"tools": [
            {"type": "function", "name": "shell_exec"},
            {"type": "web_search_preview"},
            {"type": "function", "name": "ok"}
        ], "tool_choice": {"type": "function", "name": "shell_exec"}});
        assert!(remove_tools(
            &mut b,
            &["shell_exec".into(), "web_search".into()]
        ));
        assert_eq!(b["tools"], json!([{"type": "function", "name": "ok"}]));
        assert!(b.get("tool_choice").is_none());
        let mut b = json!({"tools": [{"type": "function", "name": "x"}], "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "x"}]}, "parallel_tool_calls": true});
        assert!(remove_tools(&mut b, &["x".into()]));
        assert_eq!(b, json!({}));
        let mut b = json!({"tools": [{"type": "function", "name": "x"}]});
        assert!(!remove_tools(&mut b, &["y".into()]));
    }

    #[test]
    fn removes_tools_inside_a_namespace() {
        let mut b = json!({"tools": [
            {"type": "namespace", "name": "crm", "description": "", "tools": [
                {"type": "function", "name": "delete_contact"},
                {"type": "function", "name": "find_contact"}
            ]},
            {"type": "namespace", "name": "ops", "description": "", "tools": [
                {"type": "function", "name": "wipe"}
            ]},
            {"type": "function", "name": "delete_contact"}
        ], "tool_choice": {"type": "function", "namespace": "crm", "name": "delete_contact"}});
        assert!(remove_tools(
            &mut b,
            &["crm.delete_contact".into(), "ops.wipe".into()]
        ));
        assert_eq!(
            b["tools"],
            json!([
                {"type": "namespace", "name": "crm", "description": "", "tools": [
                    {"type": "function", "name": "find_contact"}
                ]},
                {"type": "function", "name": "delete_contact"}
            ])
        );
        assert!(b.get("tool_choice").is_none());
    }
}
