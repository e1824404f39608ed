//! Removes denied tools from a Messages request, so the model never sees them.

use serde_json::Value;

use super::request::tool_name;
use crate::protocol::drop_if_empty;

/// Removes `names` from `tools`; a `tool_choice` that forces a removed tool is
/// dropped, and tool settings left without tools are dropped. Returns
/// whether anything changed.
pub fn remove_tools(body: &mut Value, names: &[String]) -> bool {
    let Value::Object(obj) = body else {
        return false;
    };
    let hidden = |n: Option<&str>| n.is_some_and(|n| names.iter().any(|x| x == n));
    let mut changed = false;
    if let Some(Value::Array(tools)) = obj.get_mut("tools") {
        let before = tools.len();
        tools.retain(|t| !hidden(tool_name(t)));
        changed |= tools.len() != before;
    }
    let forced = obj
        .get("tool_choice")
        .filter(|c| c.get("type").and_then(Value::as_str) == Some("tool"))
        .and_then(|c| c.get("name"))
        .and_then(Value::as_str);
    if hidden(forced) {
        obj.remove("tool_choice");
        changed = true;
    }
    drop_if_empty(obj, "tools", &["tool_choice"]);
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removes_tools_and_the_choice_that_forces_one() {
        let mut b = json!({"tools": [
            {"name": "shell_exec", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search"},
            {"name": "ok", "input_schema": {"type": "object"}}
        ], "tool_choice": {"type": "tool", "name": "shell_exec"}});
        assert!(remove_tools(
            &mut b,
            &["shell_exec".into(), "web_search".into()]
        ));
        assert_eq!(
            b["tools"],
            json!([{"name": "ok", "input_schema": {"type": "object"}}])
        );
        assert!(b.get("tool_choice").is_none());
        let mut b = json!({"tools": [{"name": "x"}], "tool_choice": {"type": "any"}});
        assert!(remove_tools(&mut b, &["x".into()]));
        assert_eq!(b, json!({}));
        let mut b = json!({"tools": [{"name": "x"}], "tool_choice": {"type": "auto"}});
        assert!(!remove_tools(&mut b, &["y".into()]));
        assert_eq!(b["tool_choice"], json!({"type": "auto"}));
    }
}
