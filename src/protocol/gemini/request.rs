//! The `generateContent` request: declared functions, texts by role, tool
//! results (`functionResponse` parts), the fence notice and hidden tools.
//! The model and the streaming choice are in the path ([`read_path`]).

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::keys::{self as k, Ambiguous, Key};
use crate::context::Declared;
use crate::error::Error;
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
    CACHED,
    Key("safetySettings", "safety_settings"),
    Key("model", "model"),
];
/// A context cache the request continues (`cachedContents/{id}`): turns,
/// tools and system text the provider holds, made by another request.
const CACHED: Key = Key("cachedContent", "cached_content");
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
const RESULT: [Key; 4] = [k::ID, k::NAME, k::RESPONSE, k::PARTS];
const DECLARATION: [Key; 3] = [k::NAME, k::PARAMETERS, k::JSON_SCHEMA];

/// Tools the provider runs itself, by the name a rule gates them under.
pub(super) const HOSTED: [(Key, &str); 9] = [
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

/// Each function declaration's name and whole object, in body order.
pub fn definitions(body: &Value) -> Vec<(String, &Value)> {
    let Some(top) = body.as_object() else {
        return Vec::new();
    };
    let tools = k::get(top, k::TOOLS)
        .ok()
        .flatten()
        .and_then(Value::as_array);
    let decls = (tools.into_iter().flatten())
        .filter_map(Value::as_object)
        .filter_map(|t| k::get(t, k::DECLARATIONS).ok().flatten())
        .filter_map(Value::as_array)
        .flatten();
    decls
        .filter_map(|f| Some((f.get("name")?.as_str()?.to_string(), f)))
        .collect()
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

/// Whether the model reads what toolgate never sees: a context cache the
/// request names (made by another request; creating one is not served
/// here), or a tool Google runs that grounds the answer without showing
/// what it read (search, a URL's page, maps, file search, retrieval: the
/// answer carries only their metadata). Code execution shows its parts,
/// which the answer's reader reports as provider-run calls.
pub fn unseen(body: &Value) -> bool {
    let Some(top) = body.as_object() else {
        return false;
    };
    let cached = !matches!(k::get(top, CACHED), Ok(None | Some(Value::Null)));
    let grounded = hosted(top).map_or(true, |names| {
        (names.iter()).any(|n| !matches!(n.as_str(), "code_execution" | "computer_use"))
    });
    cached || grounded
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
