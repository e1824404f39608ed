//! Which of several records the user's words pick: listed records picked
//! by a property ("the most recent invoice", "the cheapest plan") or by
//! the user's words in one of them, and the one value of a kind in the
//! objects whose other fields hold the user's words.

use super::{compact, occurs, same_name};
use crate::context::shape::free_text;
use crate::context::shape::listed::Candidate;
use crate::policy::words::{List, Words};

/// How a request picks one of listed records by a property, from its
/// words (`selecting_most`, `selecting_least`, `selecting_time`); `None`
/// when it says neither end, or both.
pub(in crate::gate::signals) fn selecting(user: &str, vocab: &Words) -> Option<Selecting> {
    let said = |l: List| {
        user.split(|c: char| !c.is_alphanumeric())
            .any(|w| vocab.has(l, w))
    };
    let way = match (said(List::SelectingMost), said(List::SelectingLeast)) {
        (true, false) => Extreme::Most,
        (false, true) => Extreme::Least,
        _ => return None,
    };
    Some(Selecting {
        way,
        by_date: said(List::SelectingTime),
    })
}

/// Whether the objects of a record whose other fields hold the user's words
/// (`says`) and a value of the kind (`same`) all hold `needle`, and one
/// does: "Spotify" picks the account of Spotify's row, "idle" the id of
/// the idle instance's.
pub(in crate::gate::signals) fn picked_in_objects(
    objects: &[Vec<String>],
    needle: &str,
    same: &dyn Fn(&str) -> bool,
    says: &dyn Fn(&str) -> bool,
) -> bool {
    let want = compact(needle);
    let holds = |o: &[String]| o.iter().any(|v| compact(v) == want || occurs(v, needle));
    let mut picking = objects.iter().filter(|o| {
        // A value of the kind is one token, or one printed in groups (an
        // account number); a text that mentions one is not.
        let of_kind =
            |v: &String| occurs(v, needle) || (!free_text(v) && (same(v) || same(&compact(v))));
        o.iter().any(of_kind) && o.iter().any(|v| !of_kind(v) && says(v))
    });
    let mut any = false;
    picking.all(|o| {
        any = true;
        holds(o)
    }) && any
}

/// Which end of a property a request picks a listed record by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::gate::signals) enum Extreme {
    Most,
    Least,
}

/// How a request picks one of listed records by a property: which end,
/// and whether by a date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::gate::signals) struct Selecting {
    pub way: Extreme,
    pub by_date: bool,
}

/// The record of `list` a request picks by a property: the one with the
/// most (or least) of a property the records all measure, no other
/// record as much. The property is the one the user's words name ("rated"
/// a record's `rating`), else the only one they all measure (of their
/// dates, when the words pick by time: "my most recent invoice").
pub(in crate::gate::signals) fn picked_by_property(
    list: &[Candidate],
    how: Selecting,
    locators: &[&str],
) -> Option<usize> {
    let first = list.first()?;
    let mut keys: Vec<&str> = first.measures.iter().map(|(k, _)| k.as_str()).collect();
    keys.retain(|k| list.iter().all(|c| c.measures.iter().any(|(x, _)| x == k)));
    if how.by_date {
        keys.retain(|k| list.iter().all(|c| c.dates.iter().any(|d| d == k)));
    }
    let named: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| {
            crate::gate::signals::actions::name_words(k)
                .iter()
                .any(|w| locators.iter().any(|u| same_stem(u, w)))
        })
        .collect();
    let key = match (&named[..], &keys[..]) {
        ([one], _) | ([], [one]) => *one,
        _ => return None,
    };
    let of = |c: &Candidate| c.measures.iter().find(|(x, _)| x == key).map(|x| x.1);
    let values: Vec<f64> = list.iter().filter_map(of).collect();
    let best = match how.way {
        Extreme::Most => values.iter().copied().fold(f64::MIN, f64::max),
        Extreme::Least => values.iter().copied().fold(f64::MAX, f64::min),
    };
    let mut at = list.iter().enumerate().filter(|(_, c)| of(c) == Some(best));
    match (at.next(), at.next()) {
        (Some((i, _)), None) => Some(i),
        _ => None,
    }
}

/// The record of `list` the user's words pick: by a property
/// ([`picked_by_property`]), else the one record whose name or phrase
/// holds a word of the user's ("the International calling add-on", "my
/// daughter's line").
pub(in crate::gate::signals) fn pick_of(
    list: &[Candidate],
    how: Option<Selecting>,
    says: &dyn Fn(&str) -> bool,
    locators: &[&str],
) -> Option<usize> {
    if let Some(i) = how.and_then(|h| picked_by_property(list, h, locators)) {
        return Some(i);
    }
    // A word in a name or a phrase ("Lina (daughter)", "International
    // calling"), not in a code or a type (`credit_card`), which records of
    // other kinds share.
    let mut saying = list
        .iter()
        .enumerate()
        .filter(|(_, c)| c.values.iter().any(|v| v.contains(' ') && says(v)));
    match (saying.next(), saying.next()) {
        (Some((i, _)), None) => Some(i),
        _ => None,
    }
}

/// Whether `c` holds `needle` as a value.
pub(in crate::gate::signals) fn holds(c: &Candidate, needle: &str) -> bool {
    c.values.iter().any(|v| v == needle || occurs(v, needle))
}

/// Whether two words are one word's forms: [`same_name`], or four letters
/// shared at the start and at most three after (`rated`, `rating`).
pub(in crate::gate::signals) fn same_stem(a: &str, b: &str) -> bool {
    let shared = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    same_name(a, b)
        || (shared >= 4 && a.chars().count() - shared <= 3 && b.chars().count() - shared <= 3)
}
