//! One policy file: raw TOML (`deny_unknown_fields`) checked into rules, catalog
//! entries and limits, with `file:line` diagnostics for every problem.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use super::catalog::{ExternalComm, ToolClass, ToolEntry};
use super::expr::Condition;
use super::limits::{Limit, LimitKey};
use super::{FailMode, FenceMode, FenceRule, Glob, RewriteMode, Rule, Verdict};
use crate::config::{line_of, toml_diagnostic, OneOrMany};
use crate::error::Diagnostic;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    defaults: Option<Spanned<RawDefaults>>,
    #[serde(default)]
    rule: Vec<Spanned<RawRule>>,
    #[serde(default)]
    tool: Vec<Spanned<RawTool>>,
    #[serde(default)]
    limit: Vec<Spanned<RawLimit>>,
    #[serde(default)]
    fence: Vec<Spanned<RawFence>>,
    #[serde(default)]
    fact: Vec<Spanned<crate::facts::Fact>>,
    #[serde(default)]
    facts: Vec<Spanned<RawFacts>>,
}

/// `[[facts]] file = "…"`: a fact file (see `facts`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFacts {
    file: Spanned<String>,
}

/// `external_comm = { when, text }` on a `[[tool]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExternal {
    when: Option<Spanned<String>>,
    text: Option<Spanned<OneOrMany>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFence {
    #[serde(rename = "match")]
    globs: Spanned<OneOrMany>,
    mode: FenceMode,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    verdict: Verdict,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: Spanned<String>,
    tools: Option<Spanned<OneOrMany>>,
    when: Option<Spanned<String>>,
    verdict: Verdict,
    #[serde(default)]
    require: Vec<String>,
    #[serde(default)]
    fail: Option<FailMode>,
    #[serde(default)]
    rewrite: Option<RewriteMode>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    #[serde(rename = "match")]
    globs: Spanned<OneOrMany>,
    class: ToolClass,
    schema: Option<Spanned<toml::Value>>,
    schema_file: Option<Spanned<String>>,
    external_comm: Option<Spanned<RawExternal>>,
    actions: Option<Spanned<Vec<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimit {
    #[serde(rename = "match")]
    globs: Spanned<OneOrMany>,
    key: LimitKey,
    rate: Spanned<String>,
    burst: Option<u32>,
}

/// What one file contributes.
#[derive(Default)]
pub(super) struct Compiled {
    pub rules: Vec<Rule>,
    pub tools: Vec<ToolEntry>,
    pub limits: Vec<Limit>,
    pub fences: Vec<FenceRule>,
    /// Schema and fact files read (watched for changes).
    pub watched_files: Vec<std::path::PathBuf>,
    pub facts: Vec<crate::facts::Fact>,
}

/// Sensors a rule may require.
pub const SENSORS: [&str; 3] = ["sentinel", "output", "injection"];

struct Ctx<'a> {
    file: &'a str,
    src: &'a str,
    diags: &'a mut Vec<Diagnostic>,
}

impl Ctx<'_> {
    fn err(&mut self, offset: usize, message: String) {
        self.diags.push(Diagnostic {
            file: self.file.to_string(),
            line: line_of(self.src, offset),
            col: None,
            message,
        });
    }

    /// Reports what the checker finds in a compiled `when` (at the line and
    /// column inside the TOML string); true when it is sound.
    fn checked(&mut self, c: &Condition, span: std::ops::Range<usize>, what: &str) -> bool {
        let problems = c.problems();
        for (at, message) in &problems {
            let offset = toml_offset(self.src, span.clone(), *at);
            let line_start = self.src[..offset].rfind('\n').map_or(0, |i| i + 1);
            self.diags.push(Diagnostic {
                file: self.file.to_string(),
                line: line_of(self.src, offset),
                col: Some(self.src[line_start..offset].chars().count() + 1),
                message: format!("{what}: `when`: {message}"),
            });
        }
        problems.is_empty()
    }

    fn globs(&mut self, raw: Spanned<OneOrMany>, what: &str) -> Option<Vec<Glob>> {
        let at = raw.span().start;
        let list = raw.into_inner().into_vec();
        if list.is_empty() || list.iter().any(|s| s.is_empty()) {
            self.err(at, format!("`{what}` needs at least one non-empty glob"));
            return None;
        }
        match list.iter().map(|s| Glob::new(s)).collect() {
            Ok(globs) => Some(globs),
            Err(e) => {
                self.err(at, e);
                None
            }
        }
    }
}

/// Compiles one file; problems go to `diags`.
pub(super) fn compile(
    file: &str,
    src: &str,
    out: &mut Compiled,
    default: &mut Option<(Verdict, String)>,
    diags: &mut Vec<Diagnostic>,
) {
    let raw: RawFile = match toml::from_str(src) {
        Ok(r) => r,
        Err(e) => {
            diags.push(toml_diagnostic(file, src, &e));
            return;
        }
    };
    if toml::from_str::<toml::Table>(src).is_ok_and(|t| t.is_empty()) {
        // An empty file is far more often a file caught mid-write (or
        // truncated by mistake) than a wish for no rules: loading it could
        // release every call its old rules stopped.
        diags.push(Diagnostic {
            file: file.to_string(),
            line: 1,
            col: None,
            message:
                "policy file has no rules or settings; write `rule = []` if it is meant to be empty"
                    .into(),
        });
        return;
    }
    let mut cx = Ctx { file, src, diags };
    if let Some(d) = raw.defaults {
        let here = format!("{file}:{}", line_of(src, d.span().start));
        match default {
            Some((_, first)) => cx.err(
                d.span().start,
                format!("[defaults] is already set in {first}; set it in one file only"),
            ),
            None => *default = Some((d.get_ref().verdict, here)),
        }
    }
    for r in raw.rule {
        let at = r.span().start;
        let r = r.into_inner();
        if r.name.get_ref().trim().is_empty() {
            cx.err(r.name.span().start, "rule name must not be empty".into());
            continue;
        }
        let tools = match r.tools {
            None => None,
            Some(t) => match cx.globs(t, "tools") {
                Some(g) => Some(g),
                None => continue,
            },
        };
        let when = match r.when {
            None => None,
            Some(w) => match Condition::compile(w.get_ref()) {
                Ok(c) => {
                    let what = format!("rule `{}`", r.name.get_ref());
                    if !cx.checked(&c, w.span(), &what) {
                        continue;
                    }
                    Some(c)
                }
                Err(e) => {
                    cx.err(
                        w.span().start,
                        format!("rule `{}`: bad CEL in `when`: {e}", r.name.get_ref()),
                    );
                    continue;
                }
            },
        };
        if let Some(s) = r.require.iter().find(|s| !SENSORS.contains(&s.as_str())) {
            cx.err(
                at,
                format!(
                    "rule `{}`: unknown sensor `{s}` in `require` (known: {})",
                    r.name.get_ref(),
                    SENSORS.join(", ")
                ),
            );
            continue;
        }
        out.rules.push(Rule {
            name: r.name.into_inner(),
            tools,
            when,
            verdict: r.verdict,
            require: r.require,
            fail: r.fail.unwrap_or(FailMode::Closed),
            rewrite: r.rewrite,
            origin: format!("{file}:{}", line_of(src, at)),
        });
    }
    let dir = Path::new(file).parent().unwrap_or(Path::new("."));
    for t in raw.tool {
        let at = t.span().start;
        let t = t.into_inner();
        let Some(globs) = cx.globs(t.globs, "match") else {
            continue;
        };
        let schema = match (t.schema, t.schema_file) {
            (Some(_), Some(f)) => {
                cx.err(
                    f.span().start,
                    "set `schema` or `schema_file`, not both".into(),
                );
                continue;
            }
            (Some(s), None) => {
                let at = s.span().start;
                match serde_json::to_value(s.into_inner()) {
                    Ok(v) => Some((v, at)),
                    Err(e) => {
                        cx.err(at, format!("schema: {e}"));
                        continue;
                    }
                }
            }
            (None, Some(f)) => {
                let path = dir.join(f.get_ref());
                out.watched_files.push(path.clone());
                let read = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read schema_file {}: {e}", path.display()))
                    .and_then(|s| {
                        serde_json::from_str(&s)
                            .map_err(|e| format!("schema_file {} is not JSON: {e}", path.display()))
                    });
                match read {
                    Ok(v) => Some((v, f.span().start)),
                    Err(m) => {
                        cx.err(f.span().start, m);
                        continue;
                    }
                }
            }
            (None, None) => None,
        };
        let schema = match schema {
            None => None,
            Some((v, at)) => match jsonschema::validator_for(&v) {
                Ok(val) => Some(Arc::new(val)),
                Err(e) => {
                    cx.err(at, format!("invalid JSON Schema: {e}"));
                    continue;
                }
            },
        };
        let external = match t.external_comm {
            None => None,
            Some(x) => match external(&mut cx, x) {
                Some(x) => Some(x),
                None => continue,
            },
        };
        let actions = match t.actions {
            None => Vec::new(),
            Some(a) => match action_words(a.get_ref()) {
                Ok(words) => words,
                Err(bad) => {
                    cx.err(
                        a.span().start,
                        format!("`actions` entries are single words (\"wire\"), not `{bad}`"),
                    );
                    continue;
                }
            },
        };
        out.tools.push(ToolEntry {
            globs,
            class: t.class,
            schema,
            external,
            actions,
            origin: format!("{file}:{}", line_of(src, at)),
        });
    }
    for f in raw.fact {
        let at = f.span().start;
        let mut f = f.into_inner();
        if f.source.is_empty() {
            f.source = format!("{file}:{}", line_of(src, at));
        }
        if f.subject.trim().is_empty() || f.value.trim().is_empty() {
            cx.err(at, "[[fact]] needs a non-empty subject and value".into());
            continue;
        }
        out.facts.push(f);
    }
    for f in raw.facts {
        let at = f.span().start;
        let path = dir.join(f.into_inner().file.get_ref());
        out.watched_files.push(path.clone());
        let read = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read fact file {}: {e}", path.display()))
            .and_then(|t| {
                serde_json::from_str::<crate::facts::FactFile>(&t).map_err(|e| {
                    format!(
                        "fact file {} is not a fact file ({{\"facts\": [{{subject, predicate, value, source}}]}}): line {}: {e}",
                        path.display(),
                        e.line()
                    )
                })
            });
        match read {
            Ok(ff) => out.facts.extend(ff.facts),
            Err(m) => cx.err(at, m),
        }
    }
    for f in raw.fence {
        let f = f.into_inner();
        if let Some(globs) = cx.globs(f.globs, "match") {
            out.fences.push(FenceRule {
                globs,
                mode: f.mode,
            });
        }
    }
    for l in raw.limit {
        let at = l.span().start;
        let l = l.into_inner();
        let Some(globs) = cx.globs(l.globs, "match") else {
            continue;
        };
        match Limit::new(
            globs,
            l.key,
            l.rate.get_ref(),
            l.burst,
            format!("{file}:{}", line_of(src, at)),
        ) {
            Ok(limit) => out.limits.push(limit),
            Err(m) => cx.err(l.rate.span().start, m),
        }
    }
}

/// The words of a `[[tool]]`'s `actions`, caseless; the first entry that
/// is no single word is the error.
fn action_words(raw: &[String]) -> Result<Vec<String>, String> {
    raw.iter()
        .map(|w| {
            let t = w.trim();
            match !t.is_empty() && t.chars().all(char::is_alphabetic) {
                true => Ok(crate::fold::fold(t).into_owned()),
                false => Err(w.clone()),
            }
        })
        .collect()
}

/// Compiles `external_comm`: its CEL condition and its text pointers.
fn external(cx: &mut Ctx<'_>, x: Spanned<RawExternal>) -> Option<ExternalComm> {
    let at = x.span().start;
    let x = x.into_inner();
    let when = match x.when {
        None => None,
        Some(w) => match Condition::compile(w.get_ref()) {
            Ok(c) if cx.checked(&c, w.span(), "`external_comm`") => Some(c),
            Ok(_) => return None,
            Err(e) => {
                cx.err(
                    w.span().start,
                    format!("bad CEL in `external_comm.when`: {e}"),
                );
                return None;
            }
        },
    };
    let text = x
        .text
        .map(|t| t.into_inner().into_vec())
        .unwrap_or_default();
    if let Some(bad) = text.iter().find(|p| !p.is_empty() && !p.starts_with('/')) {
        cx.err(
            at,
            format!("`external_comm.text` entries are JSON pointers (\"/body\"), not `{bad}`"),
        );
        return None;
    }
    Some(ExternalComm { when, text })
}

/// The byte offset in `src` of the character `at` of the TOML string whose
/// token spans `span` (quotes included; escapes are one character).
fn toml_offset(src: &str, span: std::ops::Range<usize>, at: usize) -> usize {
    let Some(raw) = src.get(span.clone()) else {
        return span.start;
    };
    let (open, literal) = match raw.as_bytes() {
        [b'"', b'"', b'"', ..] => (3, false),
        [b'\'', b'\'', b'\'', ..] => (3, true),
        [b'\'', ..] => (1, true),
        _ => (1, false),
    };
    let mut body = &raw[open.min(raw.len())..];
    let mut start = span.start + open;
    // A newline right after `"""` is not part of the string.
    if open == 3 {
        for nl in ["\r\n", "\n"] {
            if let Some(rest) = body.strip_prefix(nl) {
                body = rest;
                start += nl.len();
                break;
            }
        }
    }
    let mut chars = body.char_indices();
    let mut seen = 0;
    while let Some((i, c)) = chars.next() {
        if seen == at {
            return start + i;
        }
        if c == '\\' && !literal {
            match chars.next() {
                Some((_, 'u')) => {
                    let _ = chars.nth(3);
                }
                Some((_, 'U')) => {
                    let _ = chars.nth(7);
                }
                _ => {}
            }
        }
        seen += 1;
    }
    start
}
