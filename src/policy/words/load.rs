//! Word files read and compiled: `[[list]]`, `[[family]]`, `[[pattern]]`
//! and `[define]`, unknown keys refused, every pattern compiled at load so a
//! bad one is a load error with its file and line.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use regex::{Regex, RegexSet};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use toml::Spanned;

use super::{Entry, Family, Patterns, Words, BUILTIN, DETECTORS, LISTS};
use crate::config::{line_of, toml_diagnostic};
use crate::error::{Diagnostic, Error};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    define: BTreeMap<String, String>,
    #[serde(default)]
    list: Vec<Spanned<RawList>>,
    #[serde(default)]
    family: Vec<Spanned<RawFamily>>,
    #[serde(default)]
    pattern: Vec<Spanned<RawPattern>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawList {
    name: String,
    origin: String,
    words: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFamily {
    name: String,
    origin: String,
    #[serde(default)]
    english: Vec<String>,
    #[serde(default)]
    other: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPattern {
    name: String,
    reading: Reading,
    origin: String,
    re: String,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Reading {
    Both,
    First,
}

/// The embedded words and, when `policy_dir` has a `words/` folder, its
/// `*.toml` files in name order: one named like an embedded file
/// (`detectors.toml`) takes that file's place, any other is read after
/// them. Returns the words and the
/// files read (watched for changes).
pub fn load(policy_dir: Option<&Path>) -> Result<(Words, Vec<std::path::PathBuf>), Error> {
    let mut sources = super::sources_of(BUILTIN);
    let mut files = Vec::new();
    if let Some(dir) = policy_dir.map(|d| d.join("words")).filter(|d| d.is_dir()) {
        for p in crate::policy::toml_files(&dir)? {
            let text = std::fs::read_to_string(&p).map_err(|e| {
                Error::config(p.display().to_string(), 1, format!("cannot read: {e}"))
            })?;
            // A file named like an embedded one takes its place (a copy of
            // the shipped folder is the shipped words, and an edited copy
            // may drop entries); any other adds to them.
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let shipped = BUILTIN
                .iter()
                .position(|(n, _)| n.rsplit('/').next() == Some(name));
            match shipped {
                Some(i) => sources[i] = (p.display().to_string(), text),
                None => sources.push((p.display().to_string(), text)),
            }
            files.push(p);
        }
    }
    compile(&sources).map(|w| (w, files)).map_err(Error::Config)
}

/// Word files given as `(file name, text)`, compiled in order.
pub(super) fn compile(sources: &[(String, String)]) -> Result<Words, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mut lists: Vec<Vec<String>> = vec![Vec::new(); LISTS.len()];
    let mut families: Vec<Family> = Vec::new();
    let mut patterns: Vec<(Reading, &'static str, String, String)> = Vec::new();
    let mut entries = Vec::new();
    let mut hasher = Sha256::new();
    for (file, src) in sources {
        hasher.update(file.as_bytes());
        hasher.update([0]);
        hasher.update(src.as_bytes());
        hasher.update([0]);
        let raw: RawFile = match toml::from_str(src) {
            Ok(r) => r,
            Err(e) => {
                diags.push(toml_diagnostic(file, src, &e));
                continue;
            }
        };
        // A file with no entries is far more often one caught mid-write
        // than a wish for none: named like a shipped file, it would drop
        // every detector pattern or action word that file holds.
        if raw.list.is_empty() && raw.family.is_empty() && raw.pattern.is_empty() {
            diags.push(Diagnostic {
                file: file.clone(),
                line: 1,
                col: None,
                message: "word file has no [[list]], [[family]] or [[pattern]] entries".into(),
            });
            continue;
        }
        let mut err = |at: usize, message: String| {
            diags.push(Diagnostic {
                file: file.clone(),
                line: line_of(src, at),
                col: None,
                message,
            })
        };
        let mut entry = |kind, name: &str, origin: &str, size| {
            entries.push(Entry {
                kind,
                name: name.to_string(),
                origin: origin.to_string(),
                file: file.clone(),
                size,
            })
        };
        for l in raw.list {
            let at = l.span().start;
            let l = l.into_inner();
            let Some(i) = LISTS.iter().position(|(_, n, _)| *n == l.name) else {
                let known: Vec<&str> = LISTS.iter().map(|(_, n, _)| *n).collect();
                err(
                    at,
                    format!("unknown list `{}` (known: {})", l.name, known.join(", ")),
                );
                continue;
            };
            if l.origin.trim().is_empty() {
                err(at, format!("list `{}` needs an `origin`", l.name));
                continue;
            }
            entry("list", &l.name, &l.origin, l.words.len());
            for w in l.words {
                let w = w.to_lowercase();
                if !lists[i].contains(&w) {
                    lists[i].push(w);
                }
            }
        }
        for f in raw.family {
            let at = f.span().start;
            let f = f.into_inner();
            let bad =
                f.english.iter().chain(&f.other).any(|w| {
                    w.is_empty() || w.chars().any(|c| !c.is_alphabetic() || c.is_uppercase())
                });
            if f.name.is_empty() || f.origin.trim().is_empty() || bad {
                err(
                    at,
                    format!(
                        "family `{}` needs a name, an `origin` and words of lower-case letters",
                        f.name
                    ),
                );
                continue;
            }
            entry(
                "family",
                &f.name,
                &f.origin,
                f.english.len() + f.other.len(),
            );
            let at_family = families.iter().position(|g| g.name == f.name);
            let family = match at_family {
                Some(i) => &mut families[i],
                None => {
                    families.push(Family {
                        name: f.name.clone(),
                        english: Vec::new(),
                        other: Vec::new(),
                    });
                    let last = families.len() - 1;
                    &mut families[last]
                }
            };
            for (into, words) in [
                (&mut family.english, f.english),
                (&mut family.other, f.other),
            ] {
                for w in words {
                    if !into.contains(&w) {
                        into.push(w);
                    }
                }
            }
        }
        for p in raw.pattern {
            let at = p.span().start;
            let p = p.into_inner();
            let detector = p.name.split('/').next().unwrap_or("");
            let Some(detector) = DETECTORS.iter().copied().find(|d| *d == detector) else {
                err(
                    at,
                    format!(
                        "pattern `{}`: its name is `detector/part`, detector one of {}",
                        p.name,
                        DETECTORS.join(", ")
                    ),
                );
                continue;
            };
            if p.origin.trim().is_empty() {
                err(at, format!("pattern `{}` needs an `origin`", p.name));
                continue;
            }
            if patterns.iter().any(|q| q.2 == p.name) {
                err(at, format!("pattern `{}` is already defined", p.name));
                continue;
            }
            let re = expand(&p.re, &raw.define);
            if let Err(e) = Regex::new(&ascii(&re)) {
                err(at, format!("pattern `{}`: {e}", p.name));
                continue;
            }
            entry("pattern", &p.name, &p.origin, 1);
            patterns.push((p.reading, detector, p.name, re));
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let of = |reading: Reading| patterns.iter().filter(move |p| p.0 == reading);
    let to_regex = |l: super::List| {
        let words: Vec<String> = lists[LISTS.iter().position(|x| x.0 == l).unwrap_or(0)]
            .iter()
            .map(|w| regex::escape(w))
            .collect();
        match words.is_empty() {
            true => Regex::new("[^\\s\\S]"),
            false => Regex::new(&ascii(&format!(r"\b({})\b", words.join("|")))),
        }
    };
    let fail = |e: regex::Error| {
        vec![Diagnostic {
            file: "<words>".into(),
            line: 1,
            col: None,
            message: e.to_string(),
        }]
    };
    Ok(Words {
        phrases: compiled(of(Reading::Both)).map_err(fail)?,
        markers: compiled(of(Reading::First)).map_err(fail)?,
        hidden_you: to_regex(super::List::HiddenSecondPerson).map_err(fail)?,
        hidden_action: to_regex(super::List::HiddenAction).map_err(fail)?,
        families,
        lists,
        entries,
        digest: hasher.finalize().into(),
    })
}

fn compiled<'a>(
    list: impl Iterator<Item = &'a (Reading, &'static str, String, String)>,
) -> Result<Patterns, regex::Error> {
    let list: Vec<_> = list.collect();
    Ok(Patterns {
        set: RegexSet::new(list.iter().map(|p| ascii(&p.3)))?,
        each: list
            .iter()
            .map(|p| Ok((Regex::new(&ascii(&p.3))?, p.1, Arc::from(p.2.as_str()))))
            .collect::<Result<_, regex::Error>>()?,
    })
}

/// `${name}` replaced by the file's `[define]` entry of that name.
fn expand(re: &str, define: &BTreeMap<String, String>) -> String {
    let mut out = re.to_string();
    for (k, v) in define {
        out = out.replace(&format!("${{{k}}}"), v);
    }
    out
}

/// Word boundaries are ASCII ones: the text is already caseless, and an
/// ASCII boundary keeps the whole search in the fast DFA.
pub fn ascii(p: &str) -> String {
    p.replace(r"\b", r"(?-u:\b)")
}
