//! The fact registry: `{subject, predicate, value, source}` facts
//! from `[[fact]]` and `[[facts]] file` in policy files, and the check of an
//! outgoing text against them (stage 2), with the claim detectors (stage 1).
//!
//! A sentence that names a registered subject and its predicate (or a word of
//! it) but not the registered value contradicts the fact. Numeric values are
//! compared as numbers (`255,908`, `255908` and `255.9k` agree; other numbers
//! in the sentence, such as a year, do not matter as long as one agrees). A
//! predicate of `value` (the bridge's default) is named by the subject alone.

pub mod bridge;
pub mod claims;

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, MatchKind};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// One fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    pub subject: String,
    #[serde(default = "default_predicate")]
    pub predicate: String,
    pub value: String,
    #[serde(default)]
    pub source: String,
}

pub fn default_predicate() -> String {
    "value".to_string()
}

/// A fact file (JSON: `{"facts": [{subject, predicate, value, source}]}`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FactFile {
    #[serde(default)]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_at: Option<String>,
    pub facts: Vec<Fact>,
}

/// Lower-case ASCII, `-` and `_` as spaces; other characters unchanged, so
/// byte offsets carry over between a text and its normal form.
fn normalize(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '-' | '_' => ' ',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// A registered fact, prepared for matching.
#[derive(Debug, Clone)]
struct Prepared {
    fact: Fact,
    /// Words of the predicate (3+ characters); empty = named by the subject alone.
    words: Vec<String>,
    number: Option<f64>,
    value: String,
}

/// Every fact, indexed by subject.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    facts: Vec<Prepared>,
    /// Facts by subject index (the automaton's pattern id).
    by_subject: Vec<Vec<usize>>,
    subjects: Option<AhoCorasick>,
    /// Short hash of every fact (the output fact-checker's cache key).
    pub version: String,
}

/// One contradiction: the fact the sentence disagrees with (registry data only,
/// so it may be audited).
#[derive(Debug, Clone, PartialEq)]
pub struct Contradiction {
    pub subject: String,
    pub predicate: String,
    pub value: String,
    pub source: String,
}

/// What stage 2 found in a text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Findings {
    pub contradictions: Vec<Contradiction>,
    /// Facts whose subject the text names (what the LLM checker is shown).
    pub relevant: Vec<Fact>,
}

impl Registry {
    /// Indexes the facts; an error when the subject index cannot be built
    /// (a registry that cannot be checked must not pass every text).
    pub fn new(facts: Vec<Fact>) -> Result<Registry, String> {
        let version = {
            let mut h = Sha256::new();
            for f in &facts {
                for part in [&f.subject, &f.predicate, &f.value, &f.source] {
                    h.update(part.as_bytes());
                    h.update([0]);
                }
            }
            crate::digest::hex(&h.finalize()[..6])
        };
        let mut subjects: Vec<String> = Vec::new();
        let mut ids: HashMap<String, usize> = HashMap::new();
        let mut by_subject: Vec<Vec<usize>> = Vec::new();
        let mut prepared = Vec::with_capacity(facts.len());
        for (i, f) in facts.into_iter().enumerate() {
            let s = normalize(f.subject.trim());
            let id = *ids.entry(s.clone()).or_insert_with(|| {
                subjects.push(s);
                by_subject.push(Vec::new());
                by_subject.len() - 1
            });
            by_subject[id].push(i);
            let pred = normalize(&f.predicate);
            let words = if pred.trim() == "value" {
                Vec::new()
            } else {
                let w: Vec<String> = pred
                    .split(|c: char| !c.is_ascii_alphanumeric())
                    .filter(|w| w.len() >= 3)
                    .map(str::to_string)
                    .collect();
                if w.is_empty() {
                    vec![pred.trim().to_string()]
                } else {
                    w
                }
            };
            prepared.push(Prepared {
                number: claims::number(&f.value),
                value: normalize(f.value.trim()),
                words,
                fact: f,
            });
        }
        let subjects = if prepared.is_empty() {
            None
        } else {
            let ac = AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&subjects)
                .map_err(|e| format!("cannot index the fact subjects: {e}"))?;
            Some(ac)
        };
        Ok(Registry {
            facts: prepared,
            by_subject,
            subjects,
            version,
        })
    }

    pub fn len(&self) -> usize {
        self.facts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.facts.is_empty()
    }

    /// Checks a text sentence by sentence.
    pub fn check(&self, text: &str) -> Findings {
        let mut out = Findings::default();
        let Some(ac) = &self.subjects else {
            return out;
        };
        let norm = normalize(text);
        let bytes = norm.as_bytes();
        let mut seen_relevant: Vec<usize> = Vec::new();
        let mut seen_contra: Vec<usize> = Vec::new();
        for m in ac.find_iter(&norm) {
            let (s, e) = (m.start(), m.end());
            let before = s.checked_sub(1).map(|i| bytes[i]);
            let after = bytes.get(e).copied();
            if before.is_some_and(|b| b.is_ascii_alphanumeric())
                || after.is_some_and(|b| b.is_ascii_alphanumeric())
            {
                continue;
            }
            let sentence = sentence_around(&norm, s, e);
            let mut numbers: Option<Vec<(f64, f64)>> = None;
            for &fi in &self.by_subject[m.pattern().as_usize()] {
                if !seen_relevant.contains(&fi) {
                    seen_relevant.push(fi);
                    out.relevant.push(self.facts[fi].fact.clone());
                }
                let p = &self.facts[fi];
                if !p.words.is_empty() && !p.words.iter().any(|w| names_word(sentence, w)) {
                    continue;
                }
                let found = numbers.get_or_insert_with(|| claims::numbers(sentence));
                if disagrees(p, sentence, found) && !seen_contra.contains(&fi) {
                    seen_contra.push(fi);
                    out.contradictions.push(Contradiction {
                        subject: p.fact.subject.clone(),
                        predicate: p.fact.predicate.clone(),
                        value: p.fact.value.clone(),
                        source: p.fact.source.clone(),
                    });
                }
            }
        }
        out
    }
}

impl Contradiction {
    pub fn to_json(&self) -> Value {
        json!({"subject": self.subject, "predicate": self.predicate, "value": self.value, "source": self.source})
    }
}

/// Whether a word starts with `w` in `hay` (so `count` names `counts`).
fn names_word(hay: &str, w: &str) -> bool {
    let b = hay.as_bytes();
    hay.match_indices(w).any(|(i, _)| {
        !i.checked_sub(1)
            .is_some_and(|j| b[j].is_ascii_alphanumeric())
    })
}

/// Whether the sentence states a value for the fact other than the registered one.
fn disagrees(p: &Prepared, sentence: &str, found: &[(f64, f64)]) -> bool {
    match p.number {
        Some(want) => !found.is_empty() && !found.iter().any(|&(n, step)| agrees(n, step, want)),
        None => !sentence.contains(p.value.as_str()),
    }
}

/// A number written to `step` precision agrees with the fact when the fact
/// rounds to it: `255.9k` agrees with 255,908, `1,680` does not with 1,679.
fn agrees(n: f64, step: f64, want: f64) -> bool {
    (n - want).abs() <= step / 2.0 + want.abs() * 1e-12
}

/// The sentence containing `[s, e)`: from the previous sentence end to the next.
fn sentence_around(text: &str, s: usize, e: usize) -> &str {
    let b = text.as_bytes();
    let is_end = |i: usize| -> bool {
        match b[i] {
            b'\n' | b'!' | b'?' | b';' => true,
            // A full stop ends a sentence unless it sits inside a number (3.5).
            b'.' => {
                !(i > 0
                    && b[i - 1].is_ascii_digit()
                    && b.get(i + 1).is_some_and(u8::is_ascii_digit))
            }
            _ => false,
        }
    };
    let start = (0..s)
        .rev()
        .find(|&i| is_end(i))
        .map(|i| i + 1)
        .unwrap_or(0);
    let end = (e..b.len()).find(|&i| is_end(i)).unwrap_or(b.len());
    text.get(start..end).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(s: &str, p: &str, v: &str) -> Fact {
        Fact {
            subject: s.into(),
            predicate: p.into(),
            value: v.into(),
            source: "test".into(),
        }
    }

    fn reg() -> Registry {
        Registry::new(vec![
            fact("nats-events", "count", "255908"),
            fact("toolgate", "license", "apache-2.0"),
            fact("Acme Cloud", "uptime", "99.5%"),
            fact("release-train", "value", "12"),
        ])
        .unwrap()
    }

    #[test]
    fn a_sentence_with_subject_predicate_and_another_value_contradicts() {
        let r = reg();
        let f = r.check("Big news! Our NATS events count is now 300,000. Thanks all.");
        assert_eq!(f.contradictions.len(), 1);
        assert_eq!(f.contradictions[0].subject, "nats-events");
        assert!(r
            .check("In 2026 the nats-events count reached 255,908.")
            .contradictions
            .is_empty());
        assert!(r
            .check("The nats-events count is about 255.9k.")
            .contradictions
            .is_empty());
        // Subject without the predicate in the same sentence: no claim about it.
        assert!(r
            .check("nats-events are great. The count is 7.")
            .contradictions
            .is_empty());
        // A number in another sentence does not count.
        assert!(r
            .check("nats-events count is huge. We have 12 people.")
            .contradictions
            .is_empty());
    }

    #[test]
    fn text_values_percentages_and_the_value_predicate() {
        let r = reg();
        assert_eq!(
            r.check("toolgate's license is MIT.").contradictions.len(),
            1
        );
        assert!(r
            .check("toolgate's license is Apache-2.0.")
            .contradictions
            .is_empty());
        assert_eq!(
            r.check("Acme Cloud uptime was 99.99% this year.")
                .contradictions
                .len(),
            1
        );
        assert!(r
            .check("Acme Cloud uptime: 99.5% as promised")
            .contradictions
            .is_empty());
        assert_eq!(
            r.check("The release train ships 14 times a year")
                .contradictions
                .len(),
            1
        );
        // A subject inside a longer word is not named.
        assert!(r
            .check("mytoolgate license is MIT")
            .contradictions
            .is_empty());
    }

    #[test]
    fn relevant_facts_are_those_whose_subject_is_named() {
        let r = reg();
        let f = r.check("About toolgate: nothing else.");
        assert_eq!(f.relevant.len(), 1);
        assert_eq!(f.relevant[0].subject, "toolgate");
        assert!(Registry::default().check("toolgate").relevant.is_empty());
    }

    #[test]
    fn fact_files_use_section_8_3_format() {
        let f: FactFile = serde_json::from_str(r#"{"id": "trace-learned", "generatedAt": "2026-02-20T08:00:00Z",
            "facts": [{"subject": "nats-events", "predicate": "count", "value": "255908", "source": "trace-analyzer"}]}"#).unwrap();
        assert_eq!(f.facts[0].predicate, "count");
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["generatedAt"], "2026-02-20T08:00:00Z");
    }
}
