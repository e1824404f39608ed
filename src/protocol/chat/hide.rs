//! Hidden tools (a user must not be able to tell that a tool exists): tools the
//! rules deny whatever the arguments are removed from the request before it
//! goes upstream, so the model never sees them.

use serde_json::Value;

use super::request::function_str;
use crate::protocol::drop_if_empty;

/// Removes `names` from `tools` and `functions`; a `tool_choice` or
/// `function_call` that forces a removed tool is dropped, and so are tool
/// settings left without tools. Returns whether anything changed.
pub fn remove_tools(body: &mut Value, names: &[String]) -> bool {
    let Value::Object(obj) = body else {
        return false;
    };
    if names.is_empty() {
        return false;
    }
    let mut changed = false;
    let hidden = |n: Option<&str>| n.is_some_and(|n| names.iter().any(|x| x == n));
    if let Some(Value::Array(tools)) = obj.get_mut("tools") {
        let before = tools.len();
        tools.retain(|t| !hidden(function_str(t, "name")));
        changed |= tools.len() != before;
    }
    if let Some(Value::Array(fs)) = obj.get_mut("functions") {
        let before = fs.len();
        fs.retain(|f| !hidden(f.get("name").and_then(Value::as_str)));
        changed |= fs.len() != before;
    }
    if hidden(obj.get("tool_choice").and_then(|c| function_str(c, "name"))) {
        obj.remove("tool_choice");
        changed = true;
    }
    if hidden(
        obj.get("function_call")
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str),
    ) {
        obj.remove("function_call");
        changed = true;
    }
    drop_if_empty(obj, "tools", &["tool_choice", "parallel_tool_calls"]);
    drop_if_empty(obj, "functions", &["function_call"]);
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removes_hidden_tools_and_what_forces_them() {
        let mut b = json!({"tools": [
            {"type": "function", "function": {"name": "keep"}},
            {"type": "function", "function": {"name": "secret_admin"}}],
            "tool_choice": {"type": "function", "function": {"name": "secret_admin"}},
            "functions": [{"name": "secret_admin"}], "function_call": {"name": "secret_admin"}});
        assert!(remove_tools(&mut b, &["secret_admin".into()]));
        assert_eq!(
            b,
            json!({"tools": [{"type": "function", "function": {"name": "keep"}}]})
        );
        assert!(!remove_tools(&mut b, &["other".into()]));
    }

    #[test]
    fn no_tools_left_means_no_tool_settings() {
        let mut b = json!({"tools": [{"type": "function", "function": {"name": "x"}}], "tool_choice": "required", "parallel_tool_calls": true});
        assert!(remove_tools(&mut b, &["x".into()]));
        assert_eq!(b, json!({}));
    }
}
