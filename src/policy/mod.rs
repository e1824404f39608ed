//! Policy files → a compiled [`PolicySet`]: rules with tool globs and verdicts.
//!
//! Files are `*.toml` in `[policy] dir`, loaded in name order; without a dir the
//! embedded `policies/default.toml` is used. Every file is checked completely and
//! all problems are reported as `file:line: message` before anything is served.

pub mod catalog;
pub mod check;
pub mod expr;
mod file;
pub use file::SENSORS;
mod glob;
pub mod limits;
pub mod vocabulary;
pub mod words;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::{Diagnostic, Error};
pub use catalog::{ExternalComm, ToolClass, ToolEntry};
use expr::Condition;
pub use glob::Glob;
use limits::Limit;

/// The embedded default policy (also shipped as `policies/default.toml`).
pub const DEFAULT_POLICY: &str = include_str!("../../policies/default.toml");

pub use crate::call::{RewriteMode, Verdict};

/// How a tool's results are fenced (spotlighting, Hines et al. 2024).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FenceMode {
    /// The markers around the neutralised content (the default).
    Delimit,
    /// The markers, and `▁` in place of every space inside.
    Datamark,
    /// The markers around the base64 of the content.
    Encode,
    /// No fence.
    Off,
}

/// A `[[fence]]` entry: the mode for tools matching its globs.
#[derive(Debug, Clone)]
pub struct FenceRule {
    pub globs: Vec<Glob>,
    pub mode: FenceMode,
}

/// What a failed LLM sensor means for a rule that requires it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailMode {
    /// The deterministic result stands.
    Open,
    /// The call is rejected.
    Closed,
}

/// One `[[rule]]`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    /// `None` = every tool.
    pub tools: Option<Vec<Glob>>,
    /// The CEL condition; `None` = always.
    pub when: Option<Condition>,
    pub verdict: Verdict,
    /// LLM sensors that must run before an `allow` of this rule stands.
    pub require: Vec<String>,
    pub fail: FailMode,
    /// What replaces a call this rule withholds; `None` = `[rewrite] mode`.
    pub rewrite: Option<RewriteMode>,
    /// `file:line` where the rule is written.
    pub origin: String,
}

impl Rule {
    /// Whether its condition reads the signal `name`, or all of its
    /// top-level variable.
    pub fn reads(&self, name: &str) -> bool {
        self.when.as_ref().is_some_and(|c| c.reads(name))
    }

    pub fn applies_to(&self, tool: &str) -> bool {
        match &self.tools {
            None => true,
            Some(globs) => globs.iter().any(|g| g.matches(tool)),
        }
    }
}

/// All policy files, compiled.
#[derive(Debug, Clone)]
pub struct PolicySet {
    pub rules: Vec<Rule>,
    index: RuleIndex,
    pub tools: Vec<ToolEntry>,
    pub limits: Vec<Limit>,
    pub fences: Vec<FenceRule>,
    pub default_verdict: Verdict,
    /// Short hash of every loaded file's name and bytes; audited with each decision.
    pub version: String,
    /// Every file read (policies, schema and fact files), for change detection.
    pub files: Vec<PathBuf>,
    /// `[[fact]]` and `[[facts]] file` of every policy file.
    pub facts: std::sync::Arc<crate::facts::Registry>,
    /// The words the signals and detectors read: the embedded ones and the
    /// policy directory's `words/*.toml`.
    pub words: std::sync::Arc<words::Words>,
    /// What of a request the rules read, found once at load.
    pub reading: Reading,
}

/// What of a request the rules read: the request path asks these once per
/// request, so they are found when the policy loads, not scanned each time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reading {
    /// The conversation's texts (provenance, context, the injection sensor).
    pub texts: bool,
    /// `provenance.args_from_pointed_source`.
    pub pointed: bool,
    /// `tool.definition_changed`.
    pub definitions: bool,
}

/// Rules indexed by their `tools` globs, so a call only looks at rules that
/// can apply to it.
#[derive(Debug, Clone, Default)]
struct RuleIndex {
    /// Rules whose every glob is a literal name.
    literal: HashMap<String, Vec<usize>>,
    /// Rules with a wildcard glob or no `tools` at all.
    other: Vec<usize>,
}

impl RuleIndex {
    fn build(rules: &[Rule]) -> RuleIndex {
        let mut ix = RuleIndex::default();
        for (i, r) in rules.iter().enumerate() {
            match &r.tools {
                Some(globs) if globs.iter().all(Glob::is_literal) => {
                    for g in globs {
                        ix.literal
                            .entry(g.as_str().to_string())
                            .or_default()
                            .push(i);
                    }
                }
                _ => ix.other.push(i),
            }
        }
        ix
    }
}

impl PolicySet {
    /// The `rewrite` of the rule named `name`, if it sets one.
    pub fn rewrite_of(&self, name: &str) -> Option<RewriteMode> {
        self.rules.iter().find(|r| r.name == name)?.rewrite
    }

    /// The rules that apply to `tool` (compared caseless), in file order.
    pub fn rules_for<'a>(&'a self, tool: &str) -> Vec<&'a Rule> {
        self.rule_ids_for(tool)
            .into_iter()
            .filter_map(|i| self.rules.get(i))
            .collect()
    }

    /// The positions in `rules` of the rules [`PolicySet::rules_for`] gives,
    /// in order.
    pub fn rule_ids_for(&self, tool: &str) -> Vec<usize> {
        let folded = crate::fold::fold(tool);
        let tool = folded.as_ref();
        let mut ids: Vec<usize> = self.index.literal.get(tool).cloned().unwrap_or_default();
        ids.extend(
            self.index
                .other
                .iter()
                .copied()
                .filter(|&i| self.rules[i].applies_to(tool)),
        );
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Every rule condition and catalog `external_comm.when`.
    fn conditions(&self) -> impl Iterator<Item = &Condition> {
        let rules = self.rules.iter().filter_map(|r| r.when.as_ref());
        let catalog = self
            .tools
            .iter()
            .filter_map(|t| t.external.as_ref()?.when.as_ref());
        rules.chain(catalog)
    }

    /// True when any rule condition or catalog `external_comm.when` reads the
    /// top-level variable `var` (`provenance`, `args`, …).
    pub fn reads(&self, var: &str) -> bool {
        self.conditions()
            .any(|c| c.variables.iter().any(|v| v == var))
    }

    /// Whether a rule or catalog condition reads the signal `name`, or all
    /// of its top-level variable (`provenance` for `provenance.x`).
    pub fn reads_signal(&self, name: &str) -> bool {
        self.conditions().any(|c| c.reads(name))
    }

    /// Whether a rule requires this sensor.
    pub fn requires(&self, sensor: &str) -> bool {
        self.rules
            .iter()
            .any(|r| r.require.iter().any(|s| s == sensor))
    }

    /// The `actions` words of every catalog entry matching `tool`.
    pub fn tool_actions(&self, tool: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let matching = self.tools.iter().filter(|t| t.matches(tool));
        for w in matching.flat_map(|t| &t.actions) {
            if !out.contains(w) {
                out.push(w.clone());
            }
        }
        out
    }

    /// The first catalog entry matching `tool`.
    pub fn tool_entry(&self, tool: &str) -> Option<&ToolEntry> {
        self.tools.iter().find(|t| t.matches(tool))
    }

    /// The metrics label of a tool, bounded by the catalog: its name when
    /// an entry names it, the glob that matched it, else `other`.
    pub fn tool_label(&self, tool: &str) -> String {
        let Some(entry) = self.tool_entry(tool) else {
            return "other".into();
        };
        let glob = entry
            .globs
            .iter()
            .find(|g| g.is_literal() && g.as_str() == tool)
            .or_else(|| entry.globs.iter().find(|g| g.matches(tool)));
        glob.map_or_else(|| "other".into(), |g| g.as_str().to_string())
    }

    /// The fence mode for results of `tool` (first matching `[[fence]]`; default `delimit`).
    pub fn fence_mode(&self, tool: &str) -> FenceMode {
        self.fences
            .iter()
            .find(|f| f.globs.iter().any(|g| g.matches(tool)))
            .map(|f| f.mode)
            .unwrap_or(FenceMode::Delimit)
    }

    /// Every fence mode a tool's results may get, so the notice that
    /// explains them is the same on every turn (a stable prompt prefix).
    pub fn fence_modes(&self) -> Vec<FenceMode> {
        let mut modes = vec![FenceMode::Delimit];
        for f in &self.fences {
            if f.mode != FenceMode::Off && !modes.contains(&f.mode) {
                modes.push(f.mode);
            }
        }
        modes
    }

    /// The embedded default policy.
    pub fn embedded() -> Result<PolicySet, Error> {
        PolicySet::from_sources(&[(
            "<embedded>/default.toml".to_string(),
            DEFAULT_POLICY.to_string(),
        )])
    }

    /// Loads `dir/*.toml` in name order, or the embedded default when `dir` is `None`.
    pub fn load(dir: Option<&Path>) -> Result<PolicySet, Error> {
        let Some(dir) = dir else {
            return PolicySet::embedded();
        };
        let paths = toml_files(dir)?;
        if paths.is_empty() {
            return Err(Error::config(
                dir.display().to_string(),
                1,
                "no *.toml policy files in the policy dir",
            ));
        }
        let mut sources = Vec::with_capacity(paths.len());
        for p in paths {
            let text = std::fs::read_to_string(&p).map_err(|e| {
                Error::config(p.display().to_string(), 1, format!("cannot read: {e}"))
            })?;
            sources.push((p.display().to_string(), text));
        }
        let (words, word_files) = words::load(Some(dir))?;
        PolicySet::with_words(&sources, std::sync::Arc::new(words), word_files)
    }

    /// Compiles policy sources given as `(file name, text)` pairs, in
    /// order, with the embedded words.
    pub fn from_sources(sources: &[(String, String)]) -> Result<PolicySet, Error> {
        PolicySet::with_words(sources, words::builtin()?, Vec::new())
    }

    /// [`PolicySet::from_sources`] with `words` (read from `word_files`).
    fn with_words(
        sources: &[(String, String)],
        words: std::sync::Arc<words::Words>,
        word_files: Vec<PathBuf>,
    ) -> Result<PolicySet, Error> {
        let mut diags: Vec<Diagnostic> = Vec::new();
        let mut out = file::Compiled::default();
        let mut default: Option<(Verdict, String)> = None;
        let mut hasher = Sha256::new();
        for (name, text) in sources {
            hasher.update(name.as_bytes());
            hasher.update([0]);
            hasher.update(text.as_bytes());
            hasher.update([0]);
            file::compile(name, text, &mut out, &mut default, &mut diags);
        }
        for f in &out.watched_files {
            if let Ok(bytes) = std::fs::read(f) {
                hasher.update(&bytes);
            }
        }
        let rules = out.rules;
        let mut seen = std::collections::HashMap::new();
        for r in &rules {
            if let Some(first) = seen.insert(r.name.clone(), r.origin.clone()) {
                let (file, line) = split_origin(&r.origin);
                diags.push(Diagnostic {
                    file,
                    line,
                    col: None,
                    message: format!("rule name `{}` is already used at {first}", r.name),
                });
            }
        }
        if !diags.is_empty() {
            return Err(Error::Config(diags));
        }
        hasher.update(words.digest);
        let digest = hasher.finalize();
        let facts = crate::facts::Registry::new(out.facts).map_err(|m| {
            Error::config(
                sources.first().map(|f| f.0.as_str()).unwrap_or("<policy>"),
                1,
                m,
            )
        })?;
        let facts = std::sync::Arc::new(facts);
        let mut files: Vec<PathBuf> = sources.iter().map(|(n, _)| PathBuf::from(n)).collect();
        files.extend(out.watched_files);
        files.extend(word_files);
        let mut set = PolicySet {
            index: RuleIndex::build(&rules),
            rules,
            tools: out.tools,
            limits: out.limits,
            fences: out.fences,
            default_verdict: default.map(|d| d.0).unwrap_or(Verdict::Deny),
            version: crate::digest::hex(&digest[..6]),
            files,
            facts,
            words,
            reading: Reading::default(),
        };
        set.reading = Reading {
            texts: set.reads("provenance") || set.reads("context") || set.requires("injection"),
            pointed: set.reads_signal("provenance.args_from_pointed_source"),
            definitions: set.reads_signal("tool.definition_changed"),
        };
        Ok(set)
    }
}

/// The `*.toml` files of `dir`, in name order.
pub(crate) fn toml_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Error::config(dir.display().to_string(), 1, format!("cannot read: {e}")))?;
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    Ok(paths)
}

fn split_origin(origin: &str) -> (String, usize) {
    match origin.rsplit_once(':') {
        Some((f, l)) => (f.to_string(), l.parse().unwrap_or(1)),
        None => (origin.to_string(), 1),
    }
}

#[cfg(test)]
mod tests;
