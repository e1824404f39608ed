//! The Responses request: declared tools, texts by role, tool results and
//! where the fence notice goes (`instructions`).

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{json, Value};

use super::{builtin_name, full_name, neutral_output};
use crate::context::{content_text, Declared, Texts};
use crate::error::Error;
use crate::fence::{first_url, ToolResult};
use crate::protocol::{array, stream_flag, Declarations, Parsed};

fn bad(m: impl Into<String>) -> Error {
    Error::BadRequest(m.into())
}

/// Tool types whose calls come back to the client (and are gated there).
const CLIENT_TOOLS: [&str; 6] = [
    "function",
    "custom",
    "shell",
    "local_shell",
    "apply_patch",
    "computer",
];

/// Checks the request and reads its declared tools. `background: true` is
/// refused: its result is fetched later from an endpoint that is not gated.
pub fn parse(body: Value) -> Result<Parsed, Error> {
    let stream = stream_flag(&body)?;
    match body.get("background") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            return Err(bad(
                "Background responses are not supported here: use a streamed or plain request.",
            ))
        }
        Some(_) => return Err(bad("'background' must be a boolean.")),
    }
    let (found, hosted) = tools(&body)?;
    let declared: HashMap<String, Declared> = (found.into_iter())
        .map(|(name, p)| (name.into_owned(), Declared::unwritten(p)))
        .collect();
    if let Some(input) = body.get("input") {
        if !input.is_string() && !input.is_array() && !input.is_null() {
            return Err(bad("'input' must be a string or an array."));
        }
    }
    Ok(Parsed {
        model: super::super::model_of(&body),
        structured_output: super::super::structured(
            body.get("text")
                .and_then(|t| t.get("format"))
                .and_then(|f| f.get("type")),
        ),
        choices: 1,
        body,
        declared,
        stream,
        hosted,
        aliases: Vec::new(),
        explicit: Vec::new(),
    })
}

/// The tools `body` declares in body order (each with the parameters of a
/// function), and those of them the provider runs itself.
pub fn tools(body: &Value) -> Result<(Declarations<'_>, Vec<String>), Error> {
    let mut found = Vec::new();
    let mut hosted = Vec::new();
    for (i, t) in array(body.get("tools"), "tools")?.iter().enumerate() {
        let ty = t
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("tools[{i}].type must be a string.")))?;
        match ty {
            "function" | "custom" => {
                let name = tool_name(t, &format!("tools[{i}]"))?;
                let parameters = (ty == "function").then(|| t.get("parameters")).flatten();
                found.push((Cow::Borrowed(name), parameters));
            }
            // Functions and custom tools grouped under a namespace: each is
            // declared (and gated) as `namespace.name`.
            "namespace" => {
                let ns = tool_name(t, &format!("tools[{i}]"))?;
                for (j, inner) in array(t.get("tools"), "tools")?.iter().enumerate() {
                    let at = format!("tools[{i}].tools[{j}]");
                    let inner_ty = inner.get("type").and_then(Value::as_str);
                    if !matches!(inner_ty, Some("function" | "custom")) {
                        return Err(bad(format!("{at}.type must be 'function' or 'custom'.")));
                    }
                    let name = full_name(ns, tool_name(inner, &at)?);
                    let parameters = (inner_ty == Some("function"))
                        .then(|| inner.get("parameters"))
                        .flatten();
                    found.push((Cow::Owned(name), parameters));
                }
            }
            other => {
                let name = builtin_name(other);
                let client = CLIENT_TOOLS.contains(&name)
                    || (other == "tool_search"
                        && t.get("execution").and_then(Value::as_str) == Some("client"));
                if !client {
                    hosted.push(name.to_string());
                }
                found.push((Cow::Borrowed(name), None));
            }
        }
    }
    Ok((found, hosted))
}

/// A tool's non-empty `name`; `at` says where it is for the error.
fn tool_name<'a>(t: &'a Value, at: &str) -> Result<&'a str, Error> {
    t.get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| bad(format!("{at}.name must be a non-empty string.")))
}

fn items(body: &Value) -> &[Value] {
    body.get("input")
        .and_then(Value::as_array)
        .map_or(&[], |a| a)
}

/// Whether the input names an item the provider stored
/// (`{"type": "item_reference", "id": …}`): the model reads it, toolgate
/// sees only its id.
pub fn references_items(body: &Value) -> bool {
    items(body)
        .iter()
        .any(|i| crate::fold::reads_as(i.get("type"), "item_reference"))
}

/// Whether a tool output item holds a part toolgate does not read as text
/// (an image, a file, a screenshot).
pub fn media_results(body: &Value) -> bool {
    items(body).iter().any(|i| {
        OUTPUTS.contains(&&*crate::fold::read(i.get("type")))
            && i.get("output").is_some_and(crate::context::holds_media)
    })
}

/// Output item types that carry a tool's result.
const OUTPUTS: [&str; 6] = [
    "function_call_output",
    "custom_tool_call_output",
    "shell_call_output",
    "local_shell_call_output",
    "apply_patch_call_output",
    "computer_call_output",
];

fn push_line(to: &mut String, text: &str) {
    if !to.is_empty() {
        to.push('\n');
    }
    to.push_str(text);
}

/// The request's texts: `instructions` and system/developer messages, user
/// messages (a string `input` is one), and tool results when `all`.
pub fn texts(body: &Value, all: bool, calls: bool) -> Texts {
    let mut t = Texts::default();
    if let Some(i) = body.get("instructions").and_then(Value::as_str) {
        t.system.push_str(i);
    }
    let user = |t: &mut Texts, text: String| {
        if t.first_user.is_none() {
            t.first_user = Some(text.clone());
        }
        if all {
            t.push_user(&text);
        }
        t.last_user = Some(text);
    };
    if let Some(s) = body.get("input").and_then(Value::as_str) {
        user(&mut t, s.to_string());
    }
    if all {
        let outputs = items(body).iter().filter(|i| {
            let ty = i.get("type").map(|t| crate::fold::read(Some(t)));
            ty.is_some_and(|t| OUTPUTS.contains(&&*t))
        });
        t.reserve_tools(outputs.filter_map(|i| i.get("output")));
    }
    for item in items(body) {
        let ty = match item.get("type") {
            None => Cow::Borrowed("message"),
            t => crate::fold::read(t),
        };
        if OUTPUTS.contains(&&*ty) {
            if all {
                let text = item.get("output").map(output_text).unwrap_or_default();
                let id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
                t.push_tool(id, &text);
            }
            continue;
        }
        if ty != "message" {
            if calls && super::class_of(item) == super::ItemClass::Call {
                if let Ok(call) = super::call_of(item, usize::MAX) {
                    t.push_call(&call.id, &call.name, &call.arguments);
                }
            }
            continue;
        }
        let text = item.get("content").map(content_text).unwrap_or_default();
        match &*crate::fold::read(item.get("role")) {
            "system" | "developer" => push_line(&mut t.system, &text),
            "user" => user(&mut t, text.into_owned()),
            _ => {}
        }
    }
    t
}

/// The text of a tool output: a string, text parts, or shell output streams.
fn output_text(v: &Value) -> String {
    match v {
        Value::Array(parts) => parts
            .iter()
            .flat_map(|p| ["text", "stdout", "stderr"].map(|k| p.get(k).and_then(Value::as_str)))
            .flatten()
            .collect::<Vec<_>>()
            .join("\n"),
        other => content_text(other).into_owned(),
    }
}

/// `call id → (tool name, first URL in its arguments)` from the call items.
fn sources(items: &[Value]) -> HashMap<String, (String, Option<String>)> {
    let mut m = HashMap::new();
    for item in items {
        if super::class_of(item) != super::ItemClass::Call {
            continue;
        }
        let Ok(call) = super::call_of(item, usize::MAX) else {
            continue;
        };
        m.insert(call.id.clone(), (call.name, first_url(&call.arguments)));
    }
    m
}

/// The request's tool results. Text is fenced wherever a result holds it: a
/// string output, the text parts of an array, the `stdout` and `stderr` of
/// shell output; a screenshot or other non-text output is left alone.
pub fn tool_results(body: &mut Value) -> Vec<ToolResult<'_>> {
    let Some(items) = body.get_mut("input").and_then(Value::as_array_mut) else {
        return Vec::new();
    };
    let sources = sources(items);
    let mut out = Vec::new();
    for item in items.iter_mut() {
        let ty = crate::fold::read(item.get("type")).into_owned();
        if !OUTPUTS.contains(&ty.as_str()) {
            continue;
        }
        let Value::Object(m) = item else { continue };
        let call_id = ["call_id", "id"]
            .iter()
            .find_map(|k| m.get(*k).and_then(Value::as_str))
            .unwrap_or("")
            .to_string();
        let (tool, url) = sources
            .get(&call_id)
            .cloned()
            .unwrap_or_else(|| ("unknown".to_string(), None));
        let Some(output) = m.get_mut("output") else {
            continue;
        };
        // Any shape but shell output's streams goes to the fence whole (it
        // finds the text in it and leaves a screenshot alone).
        let whole = output.is_string() || ty != "shell_call_output";
        if whole && !output.is_null() {
            out.push(ToolResult {
                call_id,
                tool,
                url,
                content: output,
            });
            continue;
        }
        let Value::Array(parts) = output else {
            continue;
        };
        if ty != "shell_call_output" {
            continue;
        }
        for part in parts.iter_mut() {
            let Value::Object(p) = part else { continue };
            for (k, v) in p.iter_mut() {
                let key = crate::fold::fold(k.trim());
                if (key == "stdout" || key == "stderr") && v.is_string() {
                    out.push(ToolResult {
                        call_id: call_id.clone(),
                        tool: tool.clone(),
                        url: url.clone(),
                        content: v,
                    });
                }
            }
        }
    }
    out
}

/// Appends the notice to `instructions` (once), or sets it.
pub fn add_notice(body: &mut Value, notice: &str) {
    let Value::Object(obj) = body else { return };
    match obj.get_mut("instructions") {
        Some(Value::String(s)) if s.contains(notice) => {}
        Some(Value::String(s)) if !s.is_empty() => {
            s.push_str("\n\n");
            s.push_str(notice);
        }
        _ => {
            obj.insert("instructions".into(), json!(notice));
        }
    }
}

/// Adds an answer carrying `text` for each withheld call of the response
/// this request continues, unless the request answers it already.
pub fn answer_withheld(body: &mut Value, calls: &[(String, String)], text: &str) {
    let Value::Object(obj) = body else { return };
    let input = obj.entry("input").or_insert(Value::Null);
    if let Value::String(s) = input {
        *input = json!([{"role": "user", "content": std::mem::take(s)}]);
    } else if input.is_null() {
        *input = json!([]);
    }
    let Value::Array(items) = input else { return };
    let answered = |id: &str, items: &[Value]| {
        items.iter().any(|i| {
            i.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| OUTPUTS.contains(&t))
                && ["call_id", "id"]
                    .iter()
                    .any(|k| i.get(*k).and_then(Value::as_str) == Some(id))
        })
    };
    let answers: Vec<Value> = calls
        .iter()
        .filter(|(id, _)| !answered(id, items))
        .filter_map(|(id, ty)| neutral_output(id, ty, text))
        .collect();
    items.splice(0..0, answers);
}

#[cfg(test)]
mod tests;
