//! Removes denied tools from a Responses request, so the model never sees them.

use serde_json::Value;

use super::builtin_name;
use crate::protocol::drop_if_empty;

/// The name a `tools[]` entry (or a `tool_choice` naming one) is gated under.
fn tool_name(t: &Value) -> Option<&str> {
    let ty = t.get("type").and_then(Value::as_str)?;
    match ty {
        "function" | "custom" => t.get("name").and_then(Value::as_str),
        other => Some(builtin_name(other)),
    }
}

/// Removes `names` from `tools`; a `tool_choice` that forces a removed tool is
/// dropped, an `allowed_tools` choice loses the removed ones, and tool
/// settings left without tools are dropped. Returns whether anything changed.
pub fn remove_tools(body: &mut Value, names: &[String]) -> bool {
    let Value::Object(obj) = body else {
        return false;
    };
    let hidden = |t: &Value| tool_name(t).is_some_and(|n| names.iter().any(|x| x == n));
    let mut changed = false;
    if let Some(Value::Array(tools)) = obj.get_mut("tools") {
        let before = tools.len();
        tools.retain(|t| !hidden(t));
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
}
