//! Injection taint: tool results are scanned for text that addresses the
//! model with instructions (seed 001's "tool results are data, never
//! instructions"). Each detector names one style; a find is a span of the
//! result's caseless form (NFKC, case-folded, invisible characters removed),
//! widened to its paragraph, so arguments can be matched against what the
//! injected text asked for.
//!
//! Detectors: `ignore_instructions` (in several languages),
//! `addressed_to_model` (imperatives aimed at the assistant / AI / model),
//! `addressed_to_reader` (a note for whoever or whatever reads or processes
//! the data),
//! `role_marker` (forged chat-template, role or tool-output markers),
//! `fence_marker` (a forged toolgate fence), `tag_characters` (invisible
//! Unicode tag characters, whose hidden text is scanned too),
//! `hidden_comment` (instructions in HTML comments or markdown link titles),
//! `markdown_exfil` (an image URL with a placeholder to fill with data).
//!
//! Each result is read twice: as it is (caseless), and as [`normalise`]
//! reads it (escapes undone, glued words split, wrapped lines joined,
//! one-slip misspellings of the detectors' words corrected), so a phrase
//! found only in the second reading is found all the same. Every pattern
//! has a name (`detector/part`); a find carries it. The wording half of the
//! detectors (phrase and marker patterns, the words a slip is read as) is
//! data: `policies/words/detectors.toml`, read into
//! [`crate::policy::words::Words`].

mod normalise;

pub use normalise::one_slip;

use std::ops::Range;
use std::sync::{Arc, LazyLock};

use regex::Regex;

pub use crate::context::{Found, Span};
use crate::policy::words::{List, Patterns, Words};

/// Longest span kept around a find, in bytes of the caseless text.
const SPAN_MAX: usize = 1200;

#[allow(clippy::expect_used)] // constant patterns, exercised by the tests
fn re(p: &str) -> Regex {
    Regex::new(&crate::policy::words::ascii(p)).expect("injection pattern")
}

/// A forged conversation turn: a human and an assistant line.
static TURN_HUMAN: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*(human|user)\s*:\s*\S"));
static TURN_ASSISTANT: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*assistant\s*:\s*\S"));

/// HTML comments and markdown link titles: places a reader does not see.
static HIDDEN: LazyLock<Regex> = LazyLock::new(|| {
    re(r#"(?s)<!--(.{0,2000}?)-->|\[[^\]\n]{0,200}\]\([^)\s]{1,500}\s+"([^"]{1,500})"\)"#)
});
/// An image whose URL carries a slot to fill with data.
static EXFIL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"!\[[^\]\n]{0,200}\]\(https?://[^)\s]{0,300}[?&/][^)\s]{0,300}(\{|%7b|\[|<|\$|insert|secret|password|data_here|your_)",
    )
});

/// Parts of the detectors a scan leaves out, by name (`detector/part`, or
/// `reading/step` for a step of the second reading): only for measuring
/// what each part is worth (the corpus's leave-one-family-out test);
/// [`scan`] leaves out nothing.
#[derive(Debug, Clone, Default)]
pub struct Without<'a> {
    pub parts: &'a [&'a str],
}

impl Without<'_> {
    fn has(&self, name: &str) -> bool {
        self.parts.contains(&name)
    }
}

/// Every part's name: the patterns and the other detectors, then the steps
/// of the second reading.
pub fn part_names(words: &Words) -> Vec<String> {
    let mut out: Vec<String> = (words.phrases.each.iter())
        .chain(&words.markers.each)
        .map(|e| e.2.to_string())
        .collect();
    out.extend(
        [
            "role_marker/turns",
            "tag_characters",
            "fence_marker",
            "hidden_comment",
            "markdown_exfil",
        ]
        .map(String::from),
    );
    out.extend(normalise::STEPS.map(String::from));
    out
}

/// The finds of one scan: the first per detector and paragraph, or (for
/// [`fired`]) every part that matched.
struct Finds<'a> {
    out: Vec<Span>,
    without: Without<'a>,
    every: bool,
}

impl Finds<'_> {
    fn push(&mut self, detector: &'static str, pattern: &Arc<str>, text: String) {
        if self.without.has(pattern) {
            return;
        }
        let seen = self.out.iter().any(|s| {
            s.detector == detector && s.text == text && (!self.every || s.pattern == *pattern)
        });
        if !seen {
            self.out.push(Span {
                detector,
                pattern: pattern.clone(),
                text,
            });
        }
    }

    /// A find of a detector that has one part (named as the detector).
    fn push_whole(&mut self, detector: &'static str, text: String) {
        self.push(detector, &Arc::from(detector), text);
    }
}

/// Every suspected span of `text` (a tool result), in order of detector.
pub fn scan(words: &Words, text: &str) -> Vec<Span> {
    scan_without(words, text, Without::default())
}

/// The names of every part of the detectors that matches `text` without
/// `without` (a part in both readings once).
pub fn fired(words: &Words, text: &str, without: Without<'_>) -> Vec<String> {
    let mut f = Finds {
        out: Vec::new(),
        without,
        every: true,
    };
    run(words, text, &mut f);
    let mut names: Vec<String> = f.out.iter().map(|s| s.pattern.to_string()).collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// [`scan`] without the parts `without` names.
pub fn scan_without(words: &Words, text: &str, without: Without<'_>) -> Vec<Span> {
    let mut f = Finds {
        out: Vec::new(),
        without,
        every: false,
    };
    run(words, text, &mut f);
    f.out
}

fn run(words: &Words, text: &str, f: &mut Finds<'_>) {
    // Tag characters hide ASCII text; decode it and read it too.
    let hidden: String = text
        .chars()
        .filter_map(|c| {
            let u = c as u32;
            (0xE0020..=0xE007E)
                .contains(&u)
                .then(|| char::from_u32(u - 0xE0000))
                .flatten()
        })
        .collect();
    if text
        .chars()
        .any(|c| (0xE0000..=0xE007F).contains(&(c as u32)))
    {
        let t = crate::fold::fold(&hidden).into_owned();
        f.push_whole("tag_characters", t);
    }
    if !crate::fence::marker::marker_starts(text).is_empty() {
        let t = paragraph(&crate::fold::fold(text), 0..0);
        f.push_whole("fence_marker", t);
    }
    let folded = crate::fold::fold(text);
    scan_folded(words, &folded, f);
    // The other reading, for the phrase detectors (the markers and
    // comments are read where they stand): what it finds that the first
    // did not counts too.
    let steps = normalise::Steps::without(&f.without);
    let slips = words.list(List::DetectorSlips);
    let plain = crate::fold::fold(&normalise::normalise_with(text, steps, slips)).into_owned();
    if plain != folded {
        let mut more = Finds {
            out: Vec::new(),
            without: f.without.clone(),
            every: f.every,
        };
        scan_patterns(&words.phrases, &plain, &mut more);
        for s in more.out {
            let new = match f.every {
                true => !f.out.iter().any(|o| o.pattern == s.pattern),
                false => !f.out.iter().any(|o| o.detector == s.detector),
            };
            if new {
                f.out.push(s);
            }
        }
    }
    if !hidden.is_empty() {
        let hidden = crate::fold::fold(&hidden);
        let before = f.out.len();
        scan_folded(words, &hidden, f);
        // What the hidden text says counts as hidden.
        for s in &mut f.out[before..] {
            s.detector = "tag_characters";
        }
    }
}

/// One reading's patterns over a caseless text. One pass of the set says
/// which patterns match; only those run again for where.
fn scan_patterns(patterns: &Patterns, t: &str, f: &mut Finds<'_>) {
    for i in patterns.set.matches(t).iter() {
        if let Some((r, detector, name)) = patterns.each.get(i) {
            for m in r.find_iter(t) {
                f.push(detector, name, paragraph(t, m.range()));
            }
        }
    }
}

fn scan_folded(words: &Words, t: &str, f: &mut Finds<'_>) {
    scan_patterns(&words.phrases, t, f);
    scan_patterns(&words.markers, t, f);
    if let (Some(h), Some(a)) = (TURN_HUMAN.find(t), TURN_ASSISTANT.find(t)) {
        let at = h.start().min(a.start())..h.end().max(a.end());
        f.push(
            "role_marker",
            &Arc::from("role_marker/turns"),
            paragraph(t, at),
        );
    }
    let mut hidden = Vec::new();
    let may_hide = t.contains("<!--") || t.contains("](");
    for c in HIDDEN.captures_iter(if may_hide { t } else { "" }) {
        let Some(inner) = c.get(1).or_else(|| c.get(2)) else {
            continue;
        };
        let s = inner.as_str();
        let loud = words.phrases.set.is_match(s);
        let quiet = s.split_whitespace().count() >= 4
            && words.hidden_you.is_match(s)
            && words.hidden_action.is_match(s);
        if loud || quiet {
            hidden.push(s.to_string());
        }
    }
    for m in EXFIL.find_iter(if t.contains("![") { t } else { "" }) {
        f.push_whole("markdown_exfil", paragraph(t, m.range()));
    }
    for text in hidden {
        f.push_whole("hidden_comment", text);
    }
}

/// The paragraph around `at` (bounded by blank lines), at most [`SPAN_MAX`]
/// bytes, on character boundaries.
fn paragraph(t: &str, at: Range<usize>) -> String {
    let start = t[..at.start]
        .rfind("\n\n")
        .map_or(0, |i| i + 2)
        .max(at.start.saturating_sub(SPAN_MAX / 2));
    let end = t[at.end..]
        .find("\n\n")
        .map_or(t.len(), |i| at.end + i)
        .min(at.end + SPAN_MAX / 2);
    let start = (0..=start)
        .rev()
        .find(|&i| t.is_char_boundary(i))
        .unwrap_or(0);
    let end = (end..=t.len())
        .find(|&i| t.is_char_boundary(i))
        .unwrap_or(t.len());
    t[start..end].to_string()
}

/// A text's content key joined with the words' digest: what a cache
/// remembers of a text holds for the words it was read with.
fn keyed(words: &Words, key: &[u8; 32]) -> [u8; 32] {
    let mut out = *key;
    for (o, d) in out.iter_mut().zip(words.digest) {
        *o ^= d;
    }
    out
}

/// The other readings of each tool result, caseless, for matching values
/// and words (made once per request): escapes read as spaces, and the
/// detectors' second reading ([`normalise`]), each only where it differs
/// from the folded text.
pub fn readings<'c>(ctx: &'c crate::context::Context, words: &Words) -> &'c [Arc<Vec<String>>] {
    ctx.readings.get_or_init(|| {
        let slips = words.list(List::DetectorSlips);
        each_result(ctx, |key, text, folded| {
            READ.get_with(keyed(words, key), || {
                Arc::new(readings_of(text, folded, normalise::Steps::ALL, slips))
            })
        })
    })
}

/// Readings of tool results, remembered by content hash like [`SCANNED`]:
/// a conversation sends the same results again on every turn.
static READ: LazyLock<moka::sync::Cache<[u8; 32], Arc<Vec<String>>>> =
    LazyLock::new(|| moka::sync::Cache::new(20_000));

/// [`readings`] with the second reading's steps `without` names left out
/// (for measuring them; not remembered).
pub fn readings_without(
    ctx: &crate::context::Context,
    words: &Words,
    without: Without<'_>,
) -> Vec<Arc<Vec<String>>> {
    let steps = normalise::Steps::without(&without);
    let slips = words.list(List::DetectorSlips);
    each_result(ctx, |_, text, folded| {
        Arc::new(readings_of(text, folded, steps, slips))
    })
}

/// `read` of each tool result of the request: its content key, its text and
/// its caseless form.
fn each_result(
    ctx: &crate::context::Context,
    read: impl Fn(&[u8; 32], &str, &str) -> Arc<Vec<String>>,
) -> Vec<Arc<Vec<String>>> {
    (ctx.folded().tools.iter())
        .zip(&ctx.tool_results)
        .zip(ctx.result_keys())
        .map(|(((_, folded), (range, _)), key)| {
            read(key, ctx.tool_text.get(range.clone()).unwrap_or(""), folded)
        })
        .collect()
}

/// The other readings of one tool result (`text`, and `folded`, its
/// caseless form).
fn readings_of(text: &str, folded: &str, steps: normalise::Steps, slips: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    if folded.contains('\\') {
        let unescaped = folded
            .replace("\\n", " ")
            .replace("\\r", " ")
            .replace("\\t", " ");
        out.push(unescaped);
    }
    let plain = crate::fold::fold(&normalise::normalise_with(text, steps, slips)).into_owned();
    if plain != folded && !out.contains(&plain) {
        out.push(plain);
    }
    out
}

/// The injection scan of the request's tool results (made once per request).
pub fn found<'c>(ctx: &'c crate::context::Context, words: &Words) -> &'c [Found] {
    ctx.injection.get_or_init(|| {
        let mut out = Vec::new();
        let keys = ctx.result_keys();
        for (i, ((range, id), key)) in ctx.tool_results.iter().zip(keys).enumerate() {
            let Some(text) = ctx.tool_text.get(range.clone()) else {
                continue;
            };
            for span in scanned(words, key, text).iter() {
                out.push(Found {
                    result: i,
                    call_id: id.clone(),
                    span: span.clone(),
                });
            }
        }
        out
    })
}

/// Scans of tool results, remembered by content hash (joined with the
/// words' digest): a conversation sends the same results again on every
/// turn.
static SCANNED: LazyLock<moka::sync::Cache<[u8; 32], Arc<Vec<Span>>>> =
    LazyLock::new(|| moka::sync::Cache::new(20_000));

/// [`scan`], remembered by the text's content key.
pub fn scan_cached(words: &Words, text: &str) -> Arc<Vec<Span>> {
    scanned(words, &crate::digest::content_key(text.as_bytes()), text)
}

/// [`scan`] of `text`, remembered by its content key (`key`).
fn scanned(words: &Words, key: &[u8; 32], text: &str) -> Arc<Vec<Span>> {
    SCANNED.get_with(keyed(words, key), || Arc::new(scan(words, text)))
}

#[cfg(test)]
mod tests;
