//! Denied tools taken out of a `generateContent` request: function
//! declarations, provider-run tools by their gated name, and the allowed
//! function names of `toolConfig`.

use serde_json::{Map, Value};

use super::keys::{self as k};
use super::request::HOSTED;

/// Removes the named tools (functions, and provider-run tools by their
/// gated name) from `tools` and from the allowed function names; whether
/// the body changed.
pub fn hide(body: &mut Value, names: &[String]) -> bool {
    let Some(top) = body.as_object_mut() else {
        return false;
    };
    let mut changed = false;
    let had_tools = matches!(k::get(top, k::TOOLS), Ok(Some(_)));
    if let Some(Value::Array(tools)) = k::get_mut(top, k::TOOLS) {
        for t in tools.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(Value::Array(decls)) = k::get_mut(t, k::DECLARATIONS) {
                let before = decls.len();
                decls.retain(|f| {
                    let name = (f.as_object())
                        .and_then(|f| k::get(f, k::NAME).ok().flatten())
                        .and_then(Value::as_str);
                    !name.is_some_and(|n| names.iter().any(|x| x == n))
                });
                changed |= decls.len() != before;
            }
            let before = t.len();
            t.retain(|key, v| {
                let hidden = HOSTED
                    .iter()
                    .any(|(h, name)| h.is(key) && names.iter().any(|x| x == name));
                let emptied = k::DECLARATIONS.is(key) && v.as_array().is_some_and(Vec::is_empty);
                !(hidden || emptied)
            });
            changed |= t.len() != before;
        }
        tools.retain(|t| !t.as_object().is_some_and(Map::is_empty));
    }
    let no_tools = had_tools
        && match k::get(top, k::TOOLS) {
            Ok(Some(Value::Array(t))) => t.is_empty(),
            _ => true,
        };
    if no_tools {
        let key = k::spelled(top, k::TOOLS);
        changed |= top.remove(key).is_some();
    }
    if let Some(Value::Object(cfg)) = k::get_mut(top, k::TOOL_CONFIG) {
        if let Some(Value::Object(calling)) = k::get_mut(cfg, k::CALLING) {
            if let Some(Value::Array(allowed)) = k::get_mut(calling, k::ALLOWED) {
                let before = allowed.len();
                allowed.retain(|n| !n.as_str().is_some_and(|n| names.iter().any(|x| x == n)));
                changed |= allowed.len() != before;
                if allowed.is_empty() {
                    let key = k::spelled(calling, k::ALLOWED);
                    calling.remove(key);
                }
            }
        }
    }
    if no_tools {
        // A calling mode means nothing without tools (and `ANY` with none
        // is refused by the provider).
        let key = k::spelled(top, k::TOOL_CONFIG);
        changed |= top.remove(key).is_some();
    }
    changed
}
