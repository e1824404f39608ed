//! The words the signals and the injection detectors read, as data: the
//! files in `policies/words/` (embedded), extended by a policy directory's
//! `words/*.toml`. Each entry says where it came from; `toolgate signals
//! --words` lists them. The code that reads them reads structure first
//! (see `context::shape`); these lists only name what structure cannot.

mod load;

use std::sync::{Arc, LazyLock};

use regex::{Regex, RegexSet};

use crate::error::{Diagnostic, Error};

pub use load::{ascii, load};

/// The embedded word files, in the order they are read.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "<embedded>/words/actions.toml",
        include_str!("../../../policies/words/actions.toml"),
    ),
    (
        "<embedded>/words/detectors.toml",
        include_str!("../../../policies/words/detectors.toml"),
    ),
    (
        "<embedded>/words/sources.toml",
        include_str!("../../../policies/words/sources.toml"),
    ),
];

/// A named word list: what reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    ActionObjects,
    WordEndings,
    RequestReading,
    RequestNouns,
    SourceStopwords,
    SourceReading,
    DetectorSlips,
    HiddenSecondPerson,
    HiddenAction,
    SelectingMost,
    SelectingLeast,
    SelectingTime,
}

/// Every list: its name in the files and what it is for.
pub const LISTS: &[(List, &str, &str)] = &[
    (List::ActionObjects, "action_objects", "words of tool names that name what is acted on (`file`, `email`), not the action"),
    (List::WordEndings, "word_endings", "endings an English action word takes and stays the same action (`sends`, `deleted`)"),
    (List::RequestReading, "request_reading", "words of a request that ask to read, look or be told, not to act"),
    (List::RequestNouns, "request_nouns", "action words a request uses as nouns (`my rent payment`): they do not ask for the action"),
    (List::SourceStopwords, "source_stopwords", "words of a request that name no source (delegated values)"),
    (List::SourceReading, "source_reading", "words of a reading tool's name that say how it reads, not what (`fetch`, `recent`)"),
    (List::DetectorSlips, "detector_slips", "detector words a one-letter slip of is read as (`igonre`): none an ordinary word is one slip from"),
    (List::HiddenSecondPerson, "hidden_second_person", "words that address the reader, in HTML comments and link titles"),
    (List::HiddenAction, "hidden_action", "actions an instruction hidden in a comment asks for"),
    (List::SelectingMost, "selecting_most", "words a request picks one of listed records by with the most of a property (`best`, `latest`)"),
    (List::SelectingLeast, "selecting_least", "words a request picks one of listed records by with the least of a property (`cheapest`, `earliest`)"),
    (List::SelectingTime, "selecting_time", "of those, the words that pick by a date (`latest`, `oldest`): the records' dates are the property"),
];

/// The detectors a `[[pattern]]` may belong to (the others read structure).
pub const DETECTORS: &[&str] = &[
    "ignore_instructions",
    "addressed_to_model",
    "addressed_to_reader",
    "role_marker",
];

/// Words of one kind of action (`paying`: `pay`, `wire`, `überweise`).
#[derive(Debug, Clone)]
pub struct Family {
    pub name: String,
    /// Read in any of their forms or one typing slip away.
    pub english: Vec<String>,
    /// Read as written.
    pub other: Vec<String>,
}

/// Compiled patterns of one reading: one set says which match, one regex
/// each says where.
#[derive(Debug)]
pub struct Patterns {
    pub set: RegexSet,
    /// `(regex, detector, name)`.
    pub each: Vec<(Regex, &'static str, Arc<str>)>,
}

/// Where an entry came from, for `toolgate signals --words`.
#[derive(Debug, Clone)]
pub struct Entry {
    /// `family`, `list` or `pattern`.
    pub kind: &'static str,
    pub name: String,
    pub origin: String,
    pub file: String,
    /// Words it adds (1 for a pattern).
    pub size: usize,
}

/// Every word list, family and pattern, compiled.
#[derive(Debug)]
pub struct Words {
    pub families: Vec<Family>,
    lists: Vec<Vec<String>>,
    /// Phrase patterns: read in both readings of a result.
    pub phrases: Patterns,
    /// Marker patterns: read where they stand.
    pub markers: Patterns,
    /// [`List::HiddenSecondPerson`] and [`List::HiddenAction`] as regexes.
    pub hidden_you: Regex,
    pub hidden_action: Regex,
    pub entries: Vec<Entry>,
    /// SHA-256 of every file read (names and bytes): caches of what the
    /// words found are keyed by it.
    pub digest: [u8; 32],
}

impl Words {
    /// The words of one list.
    pub fn list(&self, l: List) -> &[String] {
        // `LISTS` is in the order of `List` (a test holds it).
        self.lists.get(l as usize).map_or(&[], Vec::as_slice)
    }

    /// Whether list `l` holds `w`.
    pub fn has(&self, l: List, w: &str) -> bool {
        self.list(l).iter().any(|x| x == w)
    }

    /// Every entry as text (`toolgate signals --words`).
    pub fn text(&self) -> String {
        let mut out = String::from("Lists (what reads them):\n");
        for (l, name, about) in LISTS {
            out.push_str(&format!(
                "  {name:22} {:4} words  {about}\n",
                self.list(*l).len()
            ));
        }
        out.push_str("\nEntries (kind, name, size, origin, file):\n");
        for e in &self.entries {
            out.push_str(&format!(
                "  {:7} {:42} {:3}  {}  [{}]\n",
                e.kind,
                e.name,
                e.size,
                e.origin.replace('`', ""),
                e.file
            ));
        }
        out
    }
}

/// The embedded words alone, compiled once (a test checks they compile).
static BUILTIN_WORDS: LazyLock<Result<Arc<Words>, Vec<Diagnostic>>> =
    LazyLock::new(|| load::compile(&sources_of(BUILTIN)).map(Arc::new));

/// The embedded words.
pub fn builtin() -> Result<Arc<Words>, Error> {
    BUILTIN_WORDS.clone().map_err(Error::Config)
}

/// The embedded words, borrowed for the life of the process (tests).
#[cfg(test)]
pub fn test_words() -> &'static Words {
    match &*BUILTIN_WORDS {
        Ok(w) => w,
        Err(d) => panic!("embedded words: {d:?}"),
    }
}

fn sources_of(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect()
}

#[cfg(test)]
mod tests;
