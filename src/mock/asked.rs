//! What a request asks, read the way a provider reads it: which wire format,
//! whether to stream, the user's last words, the tools declared and the
//! tool results sent back.

use serde_json::Value;

use super::server::Seen;

/// The wire format of a request, by its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wire {
    Chat,
    Responses,
    Messages,
    /// Google's `models/{model}:generateContent` (`:streamGenerateContent`).
    Gemini,
}

/// A request as the scripted model understands it.
#[derive(Debug, Clone)]
pub struct Asked {
    pub wire: Wire,
    pub stream: bool,
    /// The client asked for a usage chunk (`stream_options.include_usage`).
    pub include_usage: bool,
    pub model: String,
    /// The text of the last user message that has text.
    pub last_user_text: String,
    /// The names of the tools the request declares (a Responses
    /// namespace's as `ns.tool`).
    pub declared: Vec<String>,
    /// The Responses namespaces the request declares: a script's call
    /// `ns.tool` of one is sent as a namespaced call.
    pub namespaces: Vec<String>,
    /// The tool results the request carries, as text.
    pub tool_results: Vec<String>,
}

impl Wire {
    /// The wire format a path is for; `None` for any other path.
    pub fn of_path(path: &str) -> Option<Wire> {
        let path = path.split('?').next().unwrap_or_default();
        if path.ends_with("/chat/completions") {
            Some(Wire::Chat)
        } else if path.ends_with("/responses") {
            Some(Wire::Responses)
        } else if path.ends_with("/messages") {
            Some(Wire::Messages)
        } else if path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent") {
            Some(Wire::Gemini)
        } else {
            None
        }
    }
}

/// The text of a `content` that is a string or a list of text parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                p if p["type"] == "tool_result" => None,
                p => p["text"].as_str(),
            })
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn tool_results(wire: Wire, items: &[Value]) -> Vec<String> {
    match wire {
        Wire::Chat => items
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| text_of(&m["content"]))
            .collect(),
        Wire::Responses => items
            .iter()
            .filter(|i| i["type"] == "function_call_output")
            .map(|i| match &i["output"] {
                Value::String(s) => s.clone(),
                o => text_of(o),
            })
            .collect(),
        Wire::Messages => items
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| text_of(&b["content"]))
            .collect(),
        Wire::Gemini => gemini_parts(items)
            .map(|p| either(p, "functionResponse", "function_response"))
            .filter(|r| r.is_object())
            .map(|r| either(r, "response", "response").to_string())
            .collect(),
    }
}

/// `v[camel]`, else `v[snake]` (Google reads both spellings).
fn either<'a>(v: &'a Value, camel: &str, snake: &str) -> &'a Value {
    match &v[camel] {
        Value::Null => &v[snake],
        found => found,
    }
}

/// Every part of a Gemini request's `contents`.
fn gemini_parts(items: &[Value]) -> impl Iterator<Item = &Value> {
    items.iter().filter_map(|c| c["parts"].as_array()).flatten()
}

/// A Gemini turn's text, and whether it is the user's.
fn gemini_text(c: &Value) -> (bool, String) {
    let user = c["role"].as_str().is_none_or(|r| r == "user");
    let parts = c["parts"].as_array().map(Vec::as_slice).unwrap_or_default();
    let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
    (user, text.join(""))
}

fn namespaces(wire: Wire, req: &Value) -> Vec<String> {
    let tools = req["tools"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    tools
        .iter()
        .filter(|t| wire == Wire::Responses && t["type"] == "namespace")
        .filter_map(|t| t["name"].as_str())
        .map(str::to_string)
        .collect()
}

fn declared(wire: Wire, req: &Value) -> Vec<String> {
    let tools = req["tools"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if wire == Wire::Gemini {
        let decls = tools
            .iter()
            .filter_map(|t| either(t, "functionDeclarations", "function_declarations").as_array());
        return decls
            .flatten()
            .filter_map(|f| f["name"].as_str())
            .map(str::to_string)
            .collect();
    }
    let mut out = Vec::new();
    for t in tools {
        // A Responses namespace declares each of its tools as `ns.tool`.
        if wire == Wire::Responses && t["type"] == "namespace" {
            let ns = t["name"].as_str().unwrap_or_default();
            let inner = t["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
            out.extend(
                inner
                    .iter()
                    .filter_map(|f| f["name"].as_str())
                    .map(|n| format!("{ns}.{n}")),
            );
            continue;
        }
        let name = match wire {
            Wire::Chat => t["function"]["name"].as_str(),
            Wire::Responses | Wire::Messages | Wire::Gemini => t["name"].as_str(),
        };
        out.extend(name.map(str::to_string));
    }
    out
}

impl Asked {
    /// Reads a request; `None` when its path is no model endpoint or its
    /// body no JSON object.
    pub fn read(seen: &Seen) -> Option<Asked> {
        let wire = Wire::of_path(&seen.path)?;
        let req: Value = serde_json::from_slice(&seen.body).ok()?;
        req.as_object()?;
        let items: Vec<Value> = match (wire, &req["input"]) {
            (Wire::Responses, Value::String(s)) => {
                vec![serde_json::json!({"role": "user", "content": s})]
            }
            (Wire::Responses, v) => v.as_array().cloned().unwrap_or_default(),
            (Wire::Gemini, _) => req["contents"].as_array().cloned().unwrap_or_default(),
            _ => req["messages"].as_array().cloned().unwrap_or_default(),
        };
        let last_user_text = match wire {
            Wire::Gemini => items
                .iter()
                .rev()
                .map(gemini_text)
                .find(|(user, t)| *user && !t.is_empty())
                .map(|(_, t)| t),
            _ => items
                .iter()
                .rev()
                .filter(|m| m["role"] == "user")
                .map(|m| text_of(&m["content"]))
                .find(|t| !t.is_empty()),
        }
        .unwrap_or_default();
        // Gemini says the model and the streaming choice in the path.
        let path = seen.path.split('?').next().unwrap_or_default();
        let (model, stream) = match path.rsplit('/').next().and_then(|s| s.split_once(':')) {
            Some((m, verb)) if wire == Wire::Gemini => (Some(m), verb == "streamGenerateContent"),
            _ => (req["model"].as_str(), req["stream"] == true),
        };
        Some(Asked {
            wire,
            stream,
            include_usage: req["stream_options"]["include_usage"] == true,
            model: model.unwrap_or("mock-model").to_string(),
            last_user_text,
            declared: declared(wire, &req),
            namespaces: namespaces(wire, &req),
            tool_results: tool_results(wire, &items),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_responses_namespace_declares_each_tool_as_ns_dot_tool() {
        let req = serde_json::json!({"tools": [
            {"type": "function", "name": "shell"},
            {"type": "namespace", "name": "mcp__crm", "tools": [{"name": "a"}, {"name": "b"}]},
        ]});
        assert_eq!(
            declared(Wire::Responses, &req),
            ["shell", "mcp__crm.a", "mcp__crm.b"]
        );
        assert_eq!(namespaces(Wire::Responses, &req), ["mcp__crm"]);
        assert!(namespaces(Wire::Chat, &req).is_empty());
    }
}
