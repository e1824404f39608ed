//! Signals: sensors populate them, policies alone issue verdicts.
//!
//! A signal has a dotted name (`tool.class`), a JSON value and a method.
//! Deterministic signals are set first; an assisted signal (from an LLM sensor)
//! may only fill a name that is still unset, and is discarded below the
//! confidence threshold.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Map, Value};

use super::detect;
use super::schema::{self, SchemaCache};
use crate::call::Call;
use crate::context::Context;
use crate::policy::{PolicySet, ToolClass};

mod actions;
mod audit;
mod described;
mod entities;
mod pointed;
mod provenance;
mod record;
pub use audit::AuditView;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Deterministic,
    Assisted,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Deterministic => "deterministic",
            Method::Assisted => "assisted",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    pub value: Value,
    pub method: Method,
    pub confidence: Option<f64>,
}

/// What happened to an offered assisted signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    Accepted,
    /// A bool that may only be raised (see [`RAISABLE`]) went from false to true.
    Raised,
    /// The name was already set (deterministic, or earlier): determinism wins.
    AlreadySet,
    /// Below the confidence threshold.
    LowConfidence,
}

/// Deterministic bools a sensor may raise from false to true, never lower:
/// an assisted injection sensor can see what the detectors missed, but what
/// they found stands.
pub const RAISABLE: [&str; 1] = ["context.injection_suspected"];

/// Top-level names that exist even before their sensor runs, so rules can
/// read `sentinel.decision` without `has()`: `(variable, key)` defaults to
/// `key = "none"` and `confidence = 0.0`.
const ASSISTED_DEFAULTS: [(&str, &str); 2] = [("sentinel", "decision"), ("output", "verdict")];

/// A signal name's top-level part (`schema` of `schema.valid`). A byte
/// search: `split_once` with a char pattern costs several times as much, and
/// every decision asks it of every signal.
fn top_of(name: &str) -> &str {
    match memchr::memchr(b'.', name.as_bytes()) {
        // `.` is ASCII: `i` is a character boundary.
        Some(i) => &name[..i],
        None => name,
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signals {
    /// Named by `&'static str` where the name is fixed (most are): no
    /// allocation per signal per call.
    map: BTreeMap<Cow<'static, str>, Signal>,
    /// The sensor calls made for this decision (timings, not signals).
    runs: Vec<super::sensor::SensorRun>,
}

impl Signals {
    pub fn ran(&mut self, run: super::sensor::SensorRun) {
        self.runs.push(run);
    }

    pub fn runs(&self) -> &[super::sensor::SensorRun] {
        &self.runs
    }

    pub fn set(&mut self, name: impl Into<Cow<'static, str>>, value: Value) {
        self.map.insert(
            name.into(),
            Signal {
                value,
                method: Method::Deterministic,
                confidence: None,
            },
        );
    }

    pub fn get(&self, name: &str) -> Option<&Signal> {
        self.map.get(name)
    }

    /// Offers an assisted signal; see [`Offer`].
    pub fn offer(&mut self, name: &str, value: Value, confidence: f64, threshold: f64) -> Offer {
        let raises = RAISABLE.contains(&name)
            && value == Value::Bool(true)
            && self
                .map
                .get(name)
                .is_some_and(|s| s.value == Value::Bool(false));
        if self.map.contains_key(name) && !raises {
            return Offer::AlreadySet;
        }
        // NaN never passes.
        if confidence.is_nan() || confidence < threshold {
            return Offer::LowConfidence;
        }
        self.map.insert(
            Cow::Owned(name.to_string()),
            Signal {
                value,
                method: Method::Assisted,
                confidence: Some(confidence),
            },
        );
        if raises {
            Offer::Raised
        } else {
            Offer::Accepted
        }
    }

    /// The CEL variables: `a.b` becomes key `b` of variable `a`.
    pub fn vars(&self) -> HashMap<String, cel::Value> {
        self.vars_only(None)
    }

    /// The CEL variables the given top-level names need (`None` = all). Binding
    /// converts values deeply, so variables no rule reads (often the
    /// arguments) are left out.
    pub fn vars_only(&self, only: Option<&[&str]>) -> HashMap<String, cel::Value> {
        use crate::policy::expr::to_cel;
        let wanted = |top: &str| only.is_none_or(|o| o.contains(&top));
        let mut nested: BTreeMap<&str, HashMap<String, cel::Value>> = BTreeMap::new();
        let mut vars: HashMap<String, cel::Value> = HashMap::new();
        for (top, key) in ASSISTED_DEFAULTS.into_iter().filter(|(t, _)| wanted(t)) {
            let none = cel::Value::String(std::sync::Arc::new("none".to_string()));
            nested.insert(
                top,
                HashMap::from([
                    (key.to_string(), none),
                    ("confidence".to_string(), cel::Value::Float(0.0)),
                ]),
            );
        }
        for (name, s) in &self.map {
            let top = top_of(name);
            if !wanted(top) {
                continue;
            }
            match name.split_once('.') {
                Some((top, rest)) => {
                    nested
                        .entry(top)
                        .or_default()
                        .insert(rest.to_string(), to_cel(&s.value));
                }
                None => {
                    vars.insert(name.to_string(), to_cel(&s.value));
                }
            }
        }
        for (top, m) in nested {
            vars.insert(top.to_string(), cel::Value::from(m));
        }
        vars
    }

    /// A key naming `tool` and the values of the signals under the
    /// top-level names `only` (what a pass over the rules reads), or `None`
    /// when it would be longer than `max` bytes.
    pub fn memo_key(&self, tool: &str, only: &[&str], max: usize) -> Option<Vec<u8>> {
        // Written by serde_json straight into bytes: through `fmt` it cost
        // more than the lookup it keys.
        let mut key = Vec::with_capacity(128);
        serde_json::to_writer(&mut key, tool).ok()?;
        for (name, s) in &self.map {
            let top = top_of(name);
            if !only.contains(&top) {
                continue;
            }
            // The tool is JSON, names are dotted identifiers and values JSON:
            // no raw `\0` occurs in any, so the key reads back one way only.
            key.push(0);
            key.extend_from_slice(name.as_bytes());
            key.push(0);
            serde_json::to_writer(&mut key, &s.value).ok()?;
            if key.len() > max {
                return None;
            }
        }
        Some(key)
    }

    /// Every signal with its method (and confidence), for `explain`.
    pub fn to_json(&self) -> Value {
        let m: Map<String, Value> = self
            .map
            .iter()
            .map(|(k, s)| {
                let mut o = json!({"value": s.value, "method": s.method.as_str()});
                if let Some(c) = s.confidence {
                    o["confidence"] = json!(c);
                }
                (k.to_string(), o)
            })
            .collect();
        Value::Object(m)
    }

    /// The same without anything taken from the arguments' values (for the audit
    /// trail): `args`, `schema.errors` and the outgoing text are left out,
    /// detector and claim lists become counts.
    pub fn to_audit_json(&self) -> Value {
        serde_json::to_value(self.audit_view()).unwrap_or(Value::Null)
    }
}

/// The namespace of a tool: the text before its first separator (`comm` in
/// `comm.send`, `comm_send`, `comm__send`, `comm/send`, `comm-send`); empty
/// without one. `name` is expected in its caseless form ([`crate::fold`]).
/// How a tool's namespace is read from its name: the text before the first
/// explicit separator (`.`, `/`, `__` by default), or a configured prefix
/// followed by `_` or `-` (`comm` makes `comm_send` a `comm` tool). Nothing
/// else: `get_weather` has no namespace.
#[derive(Debug, Clone, Default)]
pub struct Namespaces {
    pub separators: Vec<String>,
    pub prefixes: Vec<String>,
}

impl Namespaces {
    /// From `[policy]` (prefixes in the caseless form tool names are
    /// compared in).
    pub fn of_config(p: &crate::config::Policy) -> Namespaces {
        Namespaces {
            separators: p.namespace_separators.clone(),
            prefixes: p
                .namespace_prefixes
                .iter()
                .map(|p| crate::fold::fold(p).into_owned())
                .collect(),
        }
    }

    pub fn of<'a>(&self, name: &'a str) -> &'a str {
        let by_separator = self.separators.iter().filter_map(|s| name.find(s.as_str()));
        let by_prefix = self.prefixes.iter().filter_map(|p| {
            let rest = name.strip_prefix(p.as_str())?;
            (rest.starts_with('_') || rest.starts_with('-')).then_some(p.len())
        });
        by_separator
            .chain(by_prefix)
            .min()
            .map(|i| &name[..i])
            .unwrap_or("")
    }
}

/// Signals that do not depend on the arguments (enough to tell whether rules
/// deny a tool whatever its arguments).
/// `tool.name` and `tool.namespace` are the caseless form of the name (so
/// `Comm.Send` is `comm.send` in namespace `comm`); `tool.declared` is true
/// only for the exact name the request declared.
pub fn static_signals(
    raw: &str,
    ctx: &Context,
    policy: &PolicySet,
    spaces: &Namespaces,
) -> Signals {
    let folded = crate::fold::fold(raw);
    let name = folded.as_ref();
    let mut s = Signals::default();
    s.set("tool.name", json!(name));
    s.set("tool.namespace", json!(spaces.of(name)));
    let class = policy
        .tool_entry(name)
        .map(|e| e.class)
        .unwrap_or(ToolClass::Unclassified);
    s.set("tool.class", json!(class.as_str()));
    s.set("tool.declared", json!(ctx.declared.contains_key(raw)));
    s.set(
        "tool.definition_changed",
        json!(ctx.redefined.iter().any(|n| n == raw)),
    );
    s.set("phase", json!(ctx.phase));
    s.set("principal", json!(ctx.principal));
    s.set("session", json!(ctx.session));
    s.set("agent", json!(ctx.agent));
    s.set("context.history_complete", json!(ctx.history_complete()));
    s.set("context.unread_results", json!(ctx.unread_results));
    s
}

/// Which of the costlier signal groups to compute.
#[derive(Debug, Clone, Copy)]
pub struct Needs {
    pub schema: bool,
    pub detect: bool,
    pub command: bool,
    /// `provenance.args_from_{tool_results,user,system}`.
    pub provenance: bool,
    /// `context.*` and `provenance.args_from_suspected_injection`.
    pub taint: bool,
    /// `provenance.entities*`.
    pub entities: bool,
    /// `provenance.described_*`.
    pub described: bool,
    pub output: bool,
}

impl Needs {
    pub const ALL: Needs = Needs {
        schema: true,
        detect: true,
        command: true,
        provenance: true,
        taint: true,
        entities: true,
        described: true,
        output: true,
    };

    /// The groups the given signal paths read (`provenance.entities`, or a
    /// bare `provenance` for all under it).
    pub fn of<'a>(variables: impl Iterator<Item = &'a str>) -> Needs {
        let mut n = Needs {
            schema: false,
            detect: false,
            command: false,
            provenance: false,
            taint: false,
            entities: false,
            described: false,
            output: false,
        };
        for v in variables {
            match v {
                "provenance" => {
                    n.provenance = true;
                    n.taint = true;
                    n.entities = true;
                    n.described = true;
                }
                "provenance.described_by_tool_results"
                | "provenance.described_spans"
                | "provenance.args_from_pointed_source"
                | "provenance.pointed_spans"
                | "provenance.action_requested" => n.described = true,
                "provenance.args_from_suspected_injection" => n.taint = true,
                "provenance.entities" | "provenance.entities_only_from_tool_results" => {
                    n.entities = true
                }
                _ if v.starts_with("provenance.") => n.provenance = true,
                _ if v == "context" || v.starts_with("context.") => n.taint = true,
                _ => {}
            }
            let top = top_of(v);
            match top {
                "schema" => n.schema = true,
                "detect" => n.detect = true,
                "command" => n.command = true,
                "output" => n.output = true,
                _ => {}
            }
        }
        n
    }
}

/// The deterministic signals of a call except `rate.*` (the engine sets those);
/// the costlier groups only when `needs` says so.
pub fn deterministic(
    call: &Call,
    ctx: &Context,
    policy: &PolicySet,
    spaces: &Namespaces,
    schemas: &SchemaCache,
    needs: Needs,
) -> Signals {
    let mut s = static_signals(&call.name, ctx, policy, spaces);
    let args: Value = if call.arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}))
    };
    if needs.schema {
        schema_signals(&mut s, call, ctx, policy, schemas, &args);
    }
    if needs.detect
        || needs.command
        || needs.provenance
        || needs.taint
        || needs.entities
        || needs.described
    {
        let mut strings = Vec::new();
        detect::strings(&args, String::new(), &mut strings);
        if needs.command {
            // Input that is not JSON with strings (a custom tool's free
            // text, arguments that did not parse) is read as it is.
            let raw = [(String::new(), call.arguments.as_str())];
            let scanned: &[(String, &str)] = if strings.is_empty() { &raw } else { &strings };
            s.set("command.dangerous", super::commands::dangerous(scanned));
        }
        if needs.detect {
            if let Value::Object(d) = detect::detect(&strings) {
                for (k, v) in d {
                    s.set(format!("detect.{k}"), v);
                }
            }
        }
        if needs.provenance {
            provenance::whole_values(&mut s, ctx, &strings);
            record::signals(&mut s, ctx, &args);
            record::described(&mut s, ctx, &args, &policy.words);
        }
        if needs.taint {
            provenance::taint(&mut s, ctx, &args, &policy.words);
        }
        if needs.entities {
            entities::signals(&mut s, ctx, &args);
        }
        if needs.described {
            let actions =
                actions::Actions::with(&call.name, &policy.tool_actions(&call.name), &policy.words);
            described::signals(&mut s, ctx, &actions, &args);
            pointed::signals(&mut s, ctx, &actions, &args);
        }
    }
    s.set("args", args);
    if needs.output {
        super::outgoing::signals(&mut s, policy, &call.name);
    }
    s
}

/// `schema.valid` and `schema.errors`: the declared schema and the catalog's.
fn schema_signals(
    s: &mut Signals,
    call: &Call,
    ctx: &Context,
    policy: &PolicySet,
    schemas: &SchemaCache,
    args: &Value,
) {
    let mut errors = Vec::new();
    if let Some(p) = ctx
        .declared
        .get(&call.name)
        .and_then(|d| d.parameters.as_ref())
    {
        match schemas.get(p) {
            Some(v) => errors.extend(schema::errors(&v, args)),
            None => {
                errors.push("/: the declared parameters are not a usable JSON Schema".to_string())
            }
        }
    }
    if let Some(v) = policy
        .tool_entry(&call.name)
        .and_then(|e| e.schema.as_ref())
    {
        errors.extend(schema::errors(v, args));
    }
    s.set("schema.valid", json!(errors.is_empty()));
    s.set("schema.errors", json!(errors));
}

#[cfg(test)]
mod tests;
