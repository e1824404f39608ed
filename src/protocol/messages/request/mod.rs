//! The Messages request: declared tools, texts by role, tool results and
//! where the fence notice goes (`system`).

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{json, Value};

use crate::context::{content_text, Declared, Texts};
use crate::error::Error;
use crate::fence::{first_url, ToolResult};
use crate::protocol::{array, stream_flag, Declarations, Parsed};

mod thread;
pub use thread::{answer_withheld, thread, Thread};

fn bad(m: impl Into<String>) -> Error {
    Error::BadRequest(m.into())
}

/// Prefixes of Anthropic-defined tool types whose calls come back to the
/// client as `tool_use` blocks (and are gated there).
const CLIENT_TYPES: [&str; 4] = ["bash_", "text_editor_", "computer_", "memory_"];

/// The name a tool type is also known by: its type without the version
/// (`web_search_20250305` → `web_search`, `tool_search_tool_bm25_…` →
/// `tool_search`); `None` for custom tools.
pub fn type_base(ty: &str) -> Option<&str> {
    if ty == "custom" {
        return None;
    }
    if ty.starts_with("tool_search_tool") {
        return Some("tool_search");
    }
    let base = match ty.rsplit_once('_') {
        Some((b, v)) if !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()) => b,
        _ => ty,
    };
    Some(base)
}

/// The name a `tools[]` entry is declared and gated under.
pub fn tool_name(t: &Value) -> Option<&str> {
    let ty = t.get("type").and_then(Value::as_str);
    match t
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        Some(n) => Some(n),
        None => ty.and_then(type_base),
    }
}

/// Checks the request and reads its declared tools. Tools the provider runs
/// (server tools, and any type toolgate does not know) are `hosted`: gated
/// on the request alone. Each MCP server is named `mcp.<name>` in
/// `explicit`: the request is refused unless a rule allows it.
pub fn parse(body: Value) -> Result<Parsed, Error> {
    let stream = stream_flag(&body)?;
    let (found, hosted, aliases) = tools(&body)?;
    let declared: HashMap<String, Declared> = (found.into_iter())
        .map(|(name, p)| (name.into_owned(), Declared::unwritten(p)))
        .collect();
    let mut explicit = Vec::new();
    for (i, s) in array(body.get("mcp_servers"), "mcp_servers")?
        .iter()
        .enumerate()
    {
        let name = s
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| bad(format!("mcp_servers[{i}].name must be a non-empty string.")))?;
        explicit.push(format!("mcp.{name}"));
    }
    match body.get("messages") {
        Some(Value::Array(_)) => {}
        _ => return Err(bad("'messages' must be an array.")),
    }
    thread(&body)?;
    match body.get("system") {
        None | Some(Value::Null) | Some(Value::String(_)) | Some(Value::Array(_)) => {}
        Some(_) => return Err(bad("'system' must be a string or an array.")),
    }
    Ok(Parsed {
        model: crate::protocol::model_of(&body),
        structured_output: false,
        choices: 1,
        body,
        declared,
        stream,
        hosted,
        aliases,
        explicit,
    })
}

/// A request's tools (see [`parse`]): the declared (each with the
/// `input_schema` of a custom tool), the hosted, the aliases.
type Tools<'a> = (Declarations<'a>, Vec<String>, Vec<(String, String)>);

/// The tools `body` declares in body order, those the provider runs, and
/// the other names Anthropic-defined ones are known by.
pub fn tools(body: &Value) -> Result<Tools<'_>, Error> {
    let mut found = Vec::new();
    let mut hosted = Vec::new();
    let mut aliases = Vec::new();
    for (i, t) in array(body.get("tools"), "tools")?.iter().enumerate() {
        if !t.is_object() {
            return Err(bad(format!("tools[{i}] must be an object.")));
        }
        let ty = match t.get("type") {
            None | Some(Value::Null) => "custom",
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(bad(format!("tools[{i}].type must be a string."))),
        };
        let name = tool_name(t)
            .ok_or_else(|| bad(format!("tools[{i}].name must be a non-empty string.")))?;
        if ty != "custom" && !CLIENT_TYPES.iter().any(|p| ty.starts_with(p)) {
            hosted.push(name.to_string());
        }
        if let Some(base) = type_base(ty).filter(|b| *b != name) {
            aliases.push((base.to_string(), name.to_string()));
        }
        let parameters = (ty == "custom").then(|| t.get("input_schema")).flatten();
        found.push((Cow::Borrowed(name), parameters));
    }
    Ok((found, hosted, aliases))
}

fn messages(body: &Value) -> &[Value] {
    body.get("messages")
        .and_then(Value::as_array)
        .map_or(&[], |a| a)
}

fn push_line(to: &mut String, text: &str) {
    if !to.is_empty() {
        to.push('\n');
    }
    to.push_str(text);
}

/// The text blocks of a message's content (a string is one).
fn user_text(content: &Value) -> String {
    match content {
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        other => content_text(other).into_owned(),
    }
}

/// The text of a tool result's content: a string, or its text blocks (and
/// those of search results).
fn result_text(content: &Value) -> String {
    match content {
        Value::Array(blocks) => {
            let mut out = Vec::new();
            for b in blocks {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    out.push(t.to_string());
                } else if let Some(c) = b.get("content") {
                    out.push(result_text(c));
                }
            }
            out.join("\n")
        }
        other => content_text(other).into_owned(),
    }
}

/// Whether a `tool_result` block holds one toolgate does not read as text
/// (an image, a document).
pub fn media_results(body: &Value) -> bool {
    let blocks = (messages(body).iter())
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten();
    blocks.into_iter().any(|b| {
        crate::fold::reads_as(b.get("type"), "tool_result")
            && b.get("content").is_some_and(crate::context::holds_media)
    })
}

/// The request's texts: `system`, user messages' text blocks, and tool
/// results when `all`.
pub fn texts(body: &Value, all: bool, calls: bool) -> Texts {
    let mut t = Texts::default();
    match body.get("system") {
        Some(Value::String(s)) => t.system.push_str(s),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                if let Some(s) = b.get("text").and_then(Value::as_str) {
                    push_line(&mut t.system, s);
                }
            }
        }
        _ => {}
    }
    if all {
        let results = (messages(body).iter())
            .filter(|m| crate::fold::reads_as(m.get("role"), "user"))
            .filter_map(|m| m.get("content").and_then(Value::as_array))
            .flatten()
            .filter(|b| crate::fold::reads_as(b.get("type"), "tool_result"));
        t.reserve_tools(results.filter_map(|b| b.get("content")));
    }
    for m in messages(body) {
        if !crate::fold::reads_as(m.get("role"), "user") {
            if calls {
                for (id, name, input) in tool_uses(m) {
                    let input = input.map(Value::to_string).unwrap_or_default();
                    t.push_call(id.unwrap_or(""), name.unwrap_or(""), &input);
                }
            }
            continue;
        }
        let content = m.get("content").unwrap_or(&Value::Null);
        if all {
            if let Value::Array(blocks) = content {
                for b in blocks {
                    if crate::fold::reads_as(b.get("type"), "tool_result") {
                        let text = b.get("content").map(result_text).unwrap_or_default();
                        let id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
                        t.push_tool(id, &text);
                    }
                }
            }
        }
        let text = user_text(content);
        if text.is_empty() {
            // A turn of tool results only is not the user speaking.
            continue;
        }
        if t.first_user.is_none() {
            t.first_user = Some(text.clone());
        }
        if all {
            t.push_user(&text);
        }
        t.last_user = Some(text);
    }
    t
}

/// The `tool_use` blocks of a turn: id, name and input.
fn tool_uses(msg: &Value) -> impl Iterator<Item = (Option<&str>, Option<&str>, Option<&Value>)> {
    let blocks = match msg.get("content") {
        Some(Value::Array(blocks)) => blocks.as_slice(),
        _ => &[],
    };
    blocks
        .iter()
        .filter(|b| {
            b.get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .ends_with("tool_use")
        })
        .map(|b| {
            let text = |k: &str| b.get(k).and_then(Value::as_str);
            (text("id"), text("name"), b.get("input"))
        })
}

/// `tool_use id → (tool name, first URL in its input)` from assistant turns.
fn sources(msgs: &[Value]) -> HashMap<String, (String, Option<String>)> {
    let mut m = HashMap::new();
    for (id, name, input) in msgs.iter().flat_map(tool_uses) {
        let (Some(id), Some(name)) = (id, name) else {
            continue;
        };
        let url = input.and_then(|i| first_url(&i.to_string()));
        m.insert(id.to_string(), (name.to_string(), url));
    }
    m
}

/// The request's tool results: the content of every `tool_result` block (a
/// string, or its text blocks; a search result's text blocks too). Images
/// and documents are left alone; `tool_use_id` and `is_error` are kept.
pub fn tool_results(body: &mut Value) -> Vec<ToolResult<'_>> {
    let Some(msgs) = body.get_mut("messages").and_then(Value::as_array_mut) else {
        return Vec::new();
    };
    let sources = sources(msgs);
    let mut out = Vec::new();
    for msg in msgs.iter_mut() {
        // Whatever the message's role: a lenient provider could read a
        // result anywhere.
        let Some(Value::Array(blocks)) = msg.get_mut("content") else {
            continue;
        };
        for b in blocks.iter_mut() {
            if !crate::fold::reads_as(b.get("type"), "tool_result") {
                continue;
            }
            let Value::Object(m) = b else { continue };
            let id = m
                .get("tool_use_id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let (tool, url) = sources
                .get(&id)
                .cloned()
                .unwrap_or_else(|| ("unknown".to_string(), None));
            let Some(content) = m.get_mut("content") else {
                continue;
            };
            push_result(content, &id, &tool, &url, &mut out);
        }
    }
    out
}

/// A result's content, whatever its shape (the fence finds the text in
/// it: a string, text blocks, a search result's blocks, a text document).
fn push_result<'a>(
    content: &'a mut Value,
    id: &str,
    tool: &str,
    url: &Option<String>,
    out: &mut Vec<ToolResult<'a>>,
) {
    if content.is_null() {
        return;
    }
    out.push(ToolResult {
        call_id: id.to_string(),
        tool: tool.to_string(),
        url: url.clone(),
        content,
    });
}

/// Appends the notice to `system` (once): to a string, as a last text block
/// of an array, or as the whole system text. A thread's continue takes the
/// thread's `system` (the server refuses one sent again): it gets none.
pub fn add_notice(body: &mut Value, notice: &str) {
    if matches!(thread(body), Ok(Thread::Continue(_))) {
        return;
    }
    let Value::Object(obj) = body else { return };
    match obj.get_mut("system") {
        Some(Value::String(s)) if s.contains(notice) => {}
        Some(Value::String(s)) if !s.is_empty() => {
            s.push_str("\n\n");
            s.push_str(notice);
        }
        Some(Value::Array(blocks)) => {
            let present = blocks
                .iter()
                .any(|b| b.get("text").and_then(Value::as_str) == Some(notice));
            if !present {
                blocks.push(json!({"type": "text", "text": notice}));
            }
        }
        _ => {
            obj.insert("system".into(), json!(notice));
        }
    }
}

#[cfg(test)]
mod tests;
