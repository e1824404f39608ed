//! The `generateContent` request: declared functions, texts by role, tool
//! results (`functionResponse` parts), the fence notice and hidden tools.
//! The model and the streaming choice are in the path ([`read_path`]).

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::keys::{self as k, Ambiguous, Key};
use crate::context::{Declared, Texts};
use crate::error::Error;
use crate::fence::{first_url, ToolResult};
use crate::protocol::{Declarations, Parsed};

fn bad(m: impl Into<String>) -> Error {
    Error::BadRequest(m.into())
}

fn refused(a: Ambiguous) -> Error {
    match a {
        Ambiguous::Both(k) => bad(format!("'{k}' is given in both spellings in one object.")),
        Ambiguous::Folded(k) => bad(format!(
            "A key differs from '{k}' only by case or spelling."
        )),
    }
}

const TOP: [Key; 8] = [
    k::CONTENTS,
    k::TOOLS,
    k::TOOL_CONFIG,
    k::SYSTEM,
    k::GENERATION,
    Key("cachedContent", "cached_content"),
    Key("safetySettings", "safety_settings"),
    Key("model", "model"),
];
const CONTENT: [Key; 2] = [k::ROLE, k::PARTS];
const PART: [Key; 7] = [
    k::TEXT,
    k::FUNCTION_CALL,
    k::FUNCTION_RESPONSE,
    k::THOUGHT,
    k::THOUGHT_SIGNATURE,
    k::INLINE_DATA,
    k::FILE_DATA,
];
const CALL: [Key; 3] = [k::ID, k::NAME, k::ARGS];
const RESULT: [Key; 3] = [k::ID, k::NAME, k::RESPONSE];
const DECLARATION: [Key; 3] = [k::NAME, k::PARAMETERS, k::JSON_SCHEMA];

/// Tools the provider runs itself, by the name a rule gates them under.
const HOSTED: [(Key, &str); 9] = [
    (Key("googleSearch", "google_search"), "google_search"),
    (
        Key("googleSearchRetrieval", "google_search_retrieval"),
        "google_search_retrieval",
    ),
    (Key("codeExecution", "code_execution"), "code_execution"),
    (Key("urlContext", "url_context"), "url_context"),
    (Key("googleMaps", "google_maps"), "google_maps"),
    (Key("fileSearch", "file_search"), "file_search"),
    (
        Key("enterpriseWebSearch", "enterprise_web_search"),
        "enterprise_web_search",
    ),
    (Key("retrieval", "retrieval"), "retrieval"),
    (Key("computerUse", "computer_use"), "computer_use"),
];

fn obj(v: &Value, what: impl Fn() -> String) -> Result<&Map<String, Value>, Error> {
    v.as_object()
        .ok_or_else(|| bad(format!("{} must be an object.", what())))
}

fn list(v: Option<&Value>, what: impl Fn() -> String) -> Result<&[Value], Error> {
    match v {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(bad(format!("{} must be an array.", what()))),
    }
}

/// What a path says: the model (`models/{model}:verb`) and whether the
/// answer streams (`:streamGenerateContent`, which must ask for `alt=sse`).
pub fn read_path(parsed: &mut Parsed, rest: &str, query: Option<&str>) -> Result<(), Error> {
    let Some((model, verb)) = rest.rsplit('/').next().and_then(|s| s.rsplit_once(':')) else {
        return Ok(());
    };
    parsed.model = Some(model.to_string());
    parsed.stream = verb.eq_ignore_ascii_case("streamGenerateContent");
    if parsed.stream {
        let sse = (query.unwrap_or("").split('&')).any(|p| p.eq_ignore_ascii_case("alt=sse"));
        if !sse {
            return Err(bad(
                "A streamed answer is served as server-sent events only: add '?alt=sse'.",
            ));
        }
    }
    Ok(())
}

/// The functions `body` declares, each with its JSON Schema
/// (`parametersJsonSchema`) where it has one, in body order; a classic
/// `parameters` schema is given its JSON Schema form by [`parse`].
pub fn declarations(body: &Value) -> Result<Declarations<'_>, Error> {
    Ok(functions(body)?
        .into_iter()
        .map(|(name, f)| {
            let schema = k::get(f, k::JSON_SCHEMA).ok().flatten();
            (Cow::Borrowed(name), schema)
        })
        .collect())
}

/// A function declaration: its name and object.
type Function<'a> = (&'a str, &'a Map<String, Value>);

/// Every function declaration: its name and object, in body order.
fn functions(body: &Value) -> Result<Vec<Function<'_>>, Error> {
    let Some(top) = body.as_object() else {
        return Ok(Vec::new());
    };
    let tools = list(k::get(top, k::TOOLS).map_err(refused)?, || "'tools'".into())?;
    let mut out = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let t = obj(t, || format!("tools[{i}]"))?;
        let decls = list(k::get(t, k::DECLARATIONS).map_err(refused)?, || {
            format!("tools[{i}].functionDeclarations")
        })?;
        for (j, f) in decls.iter().enumerate() {
            let at = || format!("tools[{i}].functionDeclarations[{j}]");
            let f = obj(f, at)?;
            k::guard(f, &DECLARATION).map_err(refused)?;
            let name = match k::get(f, k::NAME).map_err(refused)? {
                Some(Value::String(n)) if !n.is_empty() => n.as_str(),
                _ => return Err(bad(format!("{}.name must be a non-empty string.", at()))),
            };
            let both = k::get(f, k::JSON_SCHEMA).map_err(refused)?.is_some()
                && k::get(f, k::PARAMETERS).map_err(refused)?.is_some();
            if both {
                return Err(bad(format!(
                    "{} gives both 'parameters' and 'parametersJsonSchema'.",
                    at()
                )));
            }
            out.push((name, f));
        }
    }
    Ok(out)
}

/// A classic (OpenAPI) schema in JSON Schema's words: type names in
/// lower case (`"OBJECT"` → `"object"`), at every depth.
fn json_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(key, v)| {
                    let v = match (key.as_str(), v) {
                        ("type", Value::String(t)) => Value::String(t.to_ascii_lowercase()),
                        _ => json_schema(v),
                    };
                    (key.clone(), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(json_schema).collect()),
        other => other.clone(),
    }
}

/// Checks the request and reads its declared tools. Errors are about the
/// agent's own input.
pub fn parse(body: Value) -> Result<Parsed, Error> {
    let top = obj(&body, || "The request body".into())?;
    k::guard(top, &TOP).map_err(refused)?;
    let contents = list(k::get(top, k::CONTENTS).map_err(refused)?, || {
        "'contents'".into()
    })?;
    for (i, c) in contents.iter().enumerate() {
        let c = obj(c, || format!("contents[{i}]"))?;
        k::guard(c, &CONTENT).map_err(refused)?;
        let parts = list(k::get(c, k::PARTS).map_err(refused)?, || {
            format!("contents[{i}].parts")
        })?;
        for (j, p) in parts.iter().enumerate() {
            let p = obj(p, || format!("contents[{i}].parts[{j}]"))?;
            k::guard(p, &PART).map_err(refused)?;
            for (key, known) in [
                (k::FUNCTION_CALL, &CALL[..]),
                (k::FUNCTION_RESPONSE, &RESULT[..]),
            ] {
                if let Some(v) = k::get(p, key).map_err(refused)? {
                    k::guard(obj(v, || format!("contents[{i}].parts[{j}]"))?, known)
                        .map_err(refused)?;
                }
            }
        }
    }
    let mut declared = HashMap::new();
    for (name, f) in functions(&body)? {
        let d = match (
            k::get(f, k::JSON_SCHEMA).ok().flatten(),
            k::get(f, k::PARAMETERS).ok().flatten(),
        ) {
            (Some(s), _) => Declared::unwritten(Some(s)),
            (None, Some(p)) => Declared::new(Some(&json_schema(p))),
            (None, None) => Declared::new(None),
        };
        declared.insert(name.to_string(), d);
    }
    let hosted = hosted(top)?;
    let generation = k::get(top, k::GENERATION)
        .ok()
        .flatten()
        .and_then(Value::as_object);
    let structured = generation.is_some_and(|g| {
        let json =
            k::get(g, k::MIME).ok().flatten().and_then(Value::as_str) == Some("application/json");
        json || k::get(g, k::RESPONSE_SCHEMA).ok().flatten().is_some()
            || k::get(g, k::RESPONSE_JSON_SCHEMA).ok().flatten().is_some()
    });
    let choices = generation
        .and_then(|g| k::get(g, k::CANDIDATE_COUNT).ok().flatten())
        .and_then(Value::as_u64)
        .unwrap_or(1);
    Ok(Parsed {
        model: None,
        structured_output: structured,
        choices,
        stream: false,
        body,
        declared,
        hosted,
        aliases: Vec::new(),
        explicit: Vec::new(),
    })
}

/// The provider-run tools the request declares; a tool toolgate does not
/// know is refused (it could run anything, ungated).
fn hosted(top: &Map<String, Value>) -> Result<Vec<String>, Error> {
    let tools = list(k::get(top, k::TOOLS).map_err(refused)?, || "'tools'".into())?;
    let mut out = Vec::new();
    for (i, t) in tools.iter().filter_map(Value::as_object).enumerate() {
        let mut keys: Vec<Key> = HOSTED.iter().map(|h| h.0).collect();
        keys.push(k::DECLARATIONS);
        k::guard(t, &keys).map_err(refused)?;
        for key in t.keys() {
            if k::DECLARATIONS.is(key) {
                continue;
            }
            match HOSTED.iter().find(|h| h.0.is(key)) {
                Some((_, name)) => out.push(name.to_string()),
                None => {
                    return Err(bad(format!(
                        "tools[{i}] holds a tool toolgate does not gate: '{}'.",
                        key.chars().take(64).collect::<String>()
                    )))
                }
            }
        }
    }
    Ok(out)
}

/// The parts of each turn: its role and parts.
fn turns(body: &Value) -> impl Iterator<Item = (&str, &[Value])> {
    let contents = (body.as_object())
        .and_then(|t| k::get(t, k::CONTENTS).ok().flatten())
        .and_then(Value::as_array);
    contents.into_iter().flatten().filter_map(|c| {
        let c = c.as_object()?;
        let role = k::get(c, k::ROLE)
            .ok()
            .flatten()
            .and_then(Value::as_str)
            .unwrap_or("user");
        let parts = k::get(c, k::PARTS)
            .ok()
            .flatten()
            .and_then(Value::as_array)?;
        Some((role, parts.as_slice()))
    })
}

/// The text of some parts (thoughts left out), joined by line ends.
fn parts_text(parts: &[Value]) -> String {
    let texts = parts.iter().filter_map(Value::as_object).filter(|p| {
        !k::get(p, k::THOUGHT)
            .ok()
            .flatten()
            .is_some_and(|t| t == &Value::Bool(true))
    });
    let texts: Vec<&str> = texts
        .filter_map(|p| k::get(p, k::TEXT).ok().flatten().and_then(Value::as_str))
        .collect();
    texts.join("\n")
}

/// The id a call or its result is known by: its own, else its name and
/// how many of that name came before (Gemini pairs them by order).
struct Ids(HashMap<String, usize>);

impl Ids {
    fn next(&mut self, m: &Map<String, Value>) -> (String, String) {
        let name = k::get(m, k::NAME)
            .ok()
            .flatten()
            .and_then(Value::as_str)
            .unwrap_or("");
        let n = self.0.entry(name.to_string()).or_insert(0);
        *n += 1;
        let id = match k::get(m, k::ID).ok().flatten().and_then(Value::as_str) {
            Some(id) => id.to_string(),
            None => format!("{name}#{n}"),
        };
        (id, name.to_string())
    }
}

/// The texts of the request: the system instruction, user turns, tool
/// results (all only when `all`) and the model's calls (when `calls`).
pub fn texts(body: &Value, all: bool, calls: bool) -> Texts {
    let mut t = Texts::default();
    if let Some(s) = (body.as_object())
        .and_then(|top| k::get(top, k::SYSTEM).ok().flatten())
        .and_then(Value::as_object)
        .and_then(|s| k::get(s, k::PARTS).ok().flatten())
        .and_then(Value::as_array)
    {
        t.system = parts_text(s);
    }
    let (mut call_ids, mut result_ids) = (Ids(HashMap::new()), Ids(HashMap::new()));
    for (role, parts) in turns(body) {
        for p in parts.iter().filter_map(Value::as_object) {
            if let Some(c) = k::get(p, k::FUNCTION_CALL)
                .ok()
                .flatten()
                .and_then(Value::as_object)
            {
                let (id, name) = call_ids.next(c);
                if calls {
                    let args = k::get(c, k::ARGS).ok().flatten().map(Value::to_string);
                    t.push_call(&id, &name, args.as_deref().unwrap_or("{}"));
                }
            }
            if let Some(r) = k::get(p, k::FUNCTION_RESPONSE)
                .ok()
                .flatten()
                .and_then(Value::as_object)
            {
                let (id, _) = result_ids.next(r);
                if all {
                    let text = k::get(r, k::RESPONSE).ok().flatten().map(result_text);
                    t.push_tool(&id, text.as_deref().unwrap_or(""));
                }
            }
        }
        if role == "user" {
            let text = parts_text(parts);
            if text.is_empty() {
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
    }
    t
}

/// A function's response as the model reads it: one field's string as
/// it is, anything else as its JSON text.
fn result_text(v: &Value) -> String {
    match v {
        Value::Object(m) if m.len() == 1 => match m.values().next() {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        },
        other => other.to_string(),
    }
}

/// The request's tool results, each with the tool and URL of the call it
/// answers. A response of one field is fenced in that field; one of
/// several becomes `{"output": <the response>}` so it is fenced whole.
pub fn tool_results(body: &mut Value) -> Vec<ToolResult<'_>> {
    let mut sources = HashMap::new();
    let mut ids = Ids(HashMap::new());
    for (_, parts) in turns(body) {
        for p in parts.iter().filter_map(Value::as_object) {
            if let Some(c) = k::get(p, k::FUNCTION_CALL)
                .ok()
                .flatten()
                .and_then(Value::as_object)
            {
                let (id, name) = ids.next(c);
                let args = k::get(c, k::ARGS).ok().flatten().map(Value::to_string);
                sources.insert(id, (name, args.as_deref().and_then(first_url)));
            }
        }
    }
    let mut ids = Ids(HashMap::new());
    let mut out = Vec::new();
    let Some(top) = body.as_object_mut() else {
        return out;
    };
    let Some(Value::Array(contents)) = k::get_mut(top, k::CONTENTS) else {
        return out;
    };
    for c in contents.iter_mut().filter_map(Value::as_object_mut) {
        let Some(Value::Array(parts)) = k::get_mut(c, k::PARTS) else {
            continue;
        };
        for p in parts.iter_mut().filter_map(Value::as_object_mut) {
            let Some(Value::Object(r)) = k::get_mut(p, k::FUNCTION_RESPONSE) else {
                continue;
            };
            let (call_id, name) = ids.next(r);
            let (tool, url) = match sources.get(&call_id) {
                Some((t, u)) => (t.clone(), u.clone()),
                None => (
                    if name.is_empty() {
                        "unknown".into()
                    } else {
                        name
                    },
                    None,
                ),
            };
            let key = k::spelled(r, k::RESPONSE);
            let response = r.entry(key).or_insert_with(|| json!({}));
            if !matches!(response, Value::Object(m) if m.len() == 1) {
                let whole = std::mem::take(response);
                *response = json!({ "output": whole });
            }
            let Value::Object(m) = response else { continue };
            let Some(content) = m.values_mut().next() else {
                continue;
            };
            out.push(ToolResult {
                call_id,
                tool,
                url,
                content,
            });
        }
    }
    out
}

/// Appends the notice to the system instruction (once), or makes one.
pub fn add_notice(body: &mut Value, notice: &str) {
    let Some(top) = body.as_object_mut() else {
        return;
    };
    let key = k::spelled(top, k::SYSTEM);
    let system = top.entry(key).or_insert_with(|| json!({"parts": []}));
    match system {
        Value::Object(s) => {
            let parts = s.entry("parts").or_insert_with(|| json!([]));
            if let Value::Array(parts) = parts {
                if !parts
                    .iter()
                    .any(|p| p.get("text").and_then(Value::as_str) == Some(notice))
                {
                    parts.push(json!({ "text": notice }));
                }
            }
        }
        // A bare string (which the API also takes) becomes parts.
        Value::String(s) => {
            let own = std::mem::take(s);
            *system = json!({"parts": [{"text": own}, {"text": notice}]});
        }
        other => *other = json!({"parts": [{"text": notice}]}),
    }
}

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
