//! One policy file: raw TOML (`deny_unknown_fields`) checked into [`Rule`]s.

use serde::Deserialize;
use toml::Spanned;

use super::{Glob, Rule, Verdict};
use crate::config::{line_of, toml_diagnostic};
use crate::error::Diagnostic;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    defaults: Option<Spanned<RawDefaults>>,
    #[serde(default)]
    rule: Vec<Spanned<RawRule>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    verdict: Verdict,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Tools {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: Spanned<String>,
    tools: Option<Spanned<Tools>>,
    verdict: Verdict,
}

/// Compiles one file's rules into `rules`; problems go to `diags`.
pub(super) fn compile(
    file: &str,
    src: &str,
    rules: &mut Vec<Rule>,
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
    let mut diag = |offset: usize, message: String| {
        diags.push(Diagnostic {
            file: file.to_string(),
            line: line_of(src, offset),
            message,
        });
    };
    if let Some(d) = raw.defaults {
        let here = format!("{file}:{}", line_of(src, d.span().start));
        match default {
            Some((_, first)) => diag(
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
            diag(r.name.span().start, "rule name must not be empty".into());
            continue;
        }
        let tools = match r.tools {
            None => None,
            Some(t) => {
                let span = t.span();
                let list = match t.into_inner() {
                    Tools::One(s) => vec![s],
                    Tools::Many(v) => v,
                };
                if list.is_empty() || list.iter().any(|s| s.is_empty()) {
                    diag(
                        span.start,
                        "`tools` needs at least one non-empty glob (omit it to match every tool)"
                            .into(),
                    );
                    continue;
                }
                Some(list.iter().map(|s| Glob::new(s)).collect())
            }
        };
        rules.push(Rule {
            name: r.name.into_inner(),
            tools,
            verdict: r.verdict,
            origin: format!("{file}:{}", line_of(src, at)),
        });
    }
}
