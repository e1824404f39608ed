//! `provenance.args_from_pointed_source`: arguments the user delegated. A
//! value taken from a tool result is the user's when the user named both
//! the source ("pay the bill 'bill-december.txt'", "the channel starting
//! with External", "Dora's website www.dora-website.com") and the action
//! ("pay", "invite", "reply"), and the source leaves no choice: it names no
//! other value of the same kind (a second account number, a second address
//! or link) that the call leaves out, and an id, name or amount stands
//! beside the user's own words for it ("the old backup", "my rent"; an id
//! of letters and digits must be the one nearest them: "the idle
//! instance" picks the idle one of two). An
//! address, link, account or phone beside the user's own words counts even
//! when the user did not name the source ("send Spotify the difference":
//! Spotify's account in the transaction list). An instruction planted in a result
//! the user only asked to read, or a second recipient slipped into the bill
//! the user asked to pay, is not delegated, nor is a value that a record
//! (a JSON result, `key: value` lines) holds only inside a free-text field:
//! pointing at a record delegates its fields, not what someone wrote in
//! its notes. Identifying oneself points at
//! nothing: the words the user gave a look-up that answered with a bare id
//! (a name and zip, an e-mail) neither name a source nor stand beside a
//! value.

use serde_json::{json, Value};

use super::actions::Actions;
use super::described::{around, needles, windows, WINDOW};
use super::provenance::leaves_of;
use super::provenance::occurs;
use super::Signals;
use crate::context::shape::listed::Candidate;
use crate::context::shape::{free_text, Shape};
use crate::context::Context;
use crate::policy::words::{List, Words};
use picking::{holds, pick_of, picked_by_property, picked_in_objects};

/// The words of a text that may name a source: three letters or more, not
/// a `source_stopwords` word, a possessive `'s` dropped.
fn words<'t>(text: &'t str, vocab: &Words) -> Vec<&'t str> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_end_matches("'s").trim_matches('\''))
        .filter(|w| w.chars().count() >= 3 && !vocab.has(List::SourceStopwords, w))
        .collect()
}

/// Whether two words are the same name: equal, or one the other with an
/// ending (`bill` and `bills`, `external` and `externally`), four letters
/// shared at least.
pub(super) fn same_name(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short == long || (short.len() >= 4 && long.starts_with(short) && long.len() - short.len() <= 3)
}

/// Whether the user's words name the source a call read: a word of its
/// arguments, one of its argument values whole, or a word of the tool's
/// name that says what it reads ("the cost report" for `get_cost_report`),
/// when that word is not one the user asked for the action with ("my
/// calendar" names `get_day_calendar_events`, but for
/// `create_calendar_event` it is the action's own word).
///
/// Says how: `value`, `argument` (a word of one) or `tool_name`.
fn names_source(
    user: &str,
    (user_words, locators): (&[&str], &[&str]),
    src: &crate::context::Source,
    vocab: &Words,
) -> Option<&'static str> {
    if let Ok(args) = serde_json::from_str::<Value>(&src.arguments) {
        let mut leaves = Vec::new();
        leaves_of(&args, String::new(), &mut leaves);
        let folded: Vec<String> = leaves
            .iter()
            .map(|(_, v)| crate::fold::fold(v.trim()).into_owned())
            .collect();
        if folded
            .iter()
            .any(|v| v.chars().count() >= 4 && user.contains(v.as_str()))
        {
            return Some("value");
        }
        let by_word = folded.iter().any(|v| {
            words(v, vocab)
                .iter()
                .any(|s| user_words.iter().any(|u| same_name(u, s)))
        });
        if by_word {
            return Some("argument");
        }
    }
    let by_name = super::actions::name_words(&src.name).iter().any(|n| {
        !vocab.has(List::SourceStopwords, n)
            && !vocab.has(List::SourceReading, n)
            && locators.iter().any(|u| same_name(u, n))
    });
    by_name.then_some("tool_name")
}

/// The kind of value whose second instance in a source makes the source
/// ambiguous: an address, a link, an account or card number, a phone.
fn kind_of(value: &str) -> Option<&'static str> {
    let shaped_account = {
        let b = value.as_bytes();
        b.len() >= 12
            && b.len() <= 34
            && b[..2].iter().all(u8::is_ascii_alphabetic)
            && b[2..4].iter().all(u8::is_ascii_digit)
            && b.iter().all(u8::is_ascii_alphanumeric)
    };
    if shaped_account {
        return Some("account");
    }
    let entities = super::entities::of(value);
    let (kind, text) = entities.first()?;
    if text.len() != value.len() {
        return None;
    }
    match *kind {
        "email" => Some("email"),
        "url" | "domain" => Some("link"),
        "iban" | "account" | "card" => Some("account"),
        "phone" => Some("phone"),
        _ => None,
    }
}

/// Sets `provenance.args_from_pointed_source` (see the module's text) and
/// `provenance.pointed_spans`: `{path, call_id, by}` of each, `by` saying
/// how the user pointed to it (`value`, `argument` or `tool_name`: how
/// the source was named; `nearest`: beside the user's word in a source not
/// named), for `explain`; and `provenance.action_requested`: whether the
/// user's latest message asks for the call's action at all.
pub(super) fn signals(s: &mut Signals, ctx: &Context, actions: &Actions, args: &Value) {
    let mut paths = Vec::new();
    let mut unpicked = Vec::new();
    let mut spans = Vec::new();
    let user = ctx.original_request.as_deref().map(crate::fold::fold);
    let requested = user.as_deref().is_some_and(|u| actions.asked_in(u));
    let asked = user.filter(|_| requested && !ctx.sources.is_empty());
    let vocab = actions.vocab();
    if let Some(user) = asked {
        let identity = identifying(ctx, vocab);
        let user_words: Vec<&str> = words(&user, vocab)
            .into_iter()
            .filter(|w| !identity.iter().any(|i| same_name(i, w)))
            .collect();
        // The user's words that say what, not what to do.
        let locators: Vec<&str> = user_words
            .iter()
            .copied()
            .filter(|w| !actions.asked_in(w))
            .collect();
        // The calls whose source the user named (each read once), and how.
        let named: Vec<(&str, &'static str)> = ctx
            .sources
            .iter()
            .filter_map(|src| {
                names_source(&user, (&user_words, &locators), src, vocab)
                    .map(|by| (src.call_id.as_str(), by))
            })
            .collect();
        // Each tool result, how the user named its source, if at all, and
        // its shape.
        let shapes = ctx.shapes();
        let results: Vec<(&str, &str, Option<&'static str>, Option<&Shape>)> = ctx
            .folded()
            .tools
            .iter()
            .enumerate()
            .map(|(i, (id, text))| {
                let by = named.iter().find(|(n, _)| n == id).map(|(_, by)| *by);
                (id.as_str(), text.as_str(), by, shapes.get(i))
            })
            .collect();
        // A record delegates its fields: a value it holds only inside a
        // free-text field is not among them.
        let in_fields = |shape: Option<&Shape>, needle: &str| match shape {
            Some(sh) if sh.structured => {
                sh.fields
                    .iter()
                    .any(|f| f == needle || (!free_text(f) && occurs(f, needle)))
                    || sh.prose.iter().any(|p| !p.note && occurs(&p.text, needle))
            }
            _ => true,
        };
        // Whether a text holds one of the user's words for what they mean.
        let says = |t: &str| {
            words(t, vocab)
                .iter()
                .any(|w| locators.iter().any(|u| same_name(u, w)))
        };
        // The user's own words beside the value in the result ("the old
        // backup", "my rent"): in a record, another field of the object the
        // value is a field of; in prose (a record's content, or a result
        // that is prose), the words around it.
        let located = |shape: Option<&Shape>, text: &str, needle: &str| {
            let beside = |t: &str| windows(t, needle).any(says);
            match shape {
                Some(sh) if sh.structured => {
                    sh.objects.iter().any(|o| {
                        o.iter().any(|v| occurs(v, needle))
                            && o.iter().any(|v| !occurs(v, needle) && says(v))
                    }) || sh.prose.iter().any(|p| !p.note && beside(&p.text))
                }
                _ => beside(text),
            }
        };
        // Which way the user's words pick one of listed records ("the best
        // rated one": the most; "the cheapest": the least), when they say.
        let selecting = picking::selecting(&user, vocab);
        let selected = |shape: Option<&Shape>, needle: &str| match (shape, selecting) {
            (Some(sh), Some(how)) => sh.lists.iter().any(|list| {
                picked_by_property(list, how, &locators).is_some_and(|i| holds(&list[i], needle))
            }),
            _ => false,
        };
        // The one value of a kind the user's words pick (see [`nearest`]):
        // in a record, the value in each object whose other fields hold the
        // user's words; in prose, the value nearest to them.
        let picked =
            |shape: Option<&Shape>, text: &str, needle: &str, same: &dyn Fn(&str) -> bool| {
                match shape {
                    Some(sh) if sh.structured => {
                        picked_in_objects(&sh.objects, needle, same, &says)
                            || sh
                                .prose
                                .iter()
                                .any(|p| !p.note && nearest(&p.text, needle, same, &locators))
                    }
                    _ => nearest(text, needle, same, &locators),
                }
            };
        let mut leaves = Vec::new();
        leaves_of(args, String::new(), &mut leaves);
        let looked: Vec<(String, Vec<String>)> = leaves
            .into_iter()
            .map(|(path, v)| (path, needles(&crate::fold::fold(v.trim()))))
            .collect();
        let carried: Vec<&String> = looked.iter().flat_map(|(_, n)| n).collect();
        for (path, needles) in &looked {
            let from_pointed = needles.iter().find_map(|needle| {
                let kind = kind_of(needle);
                results.iter().filter(|r| in_fields(r.3, needle)).find_map(
                    |&(id, text, named, shape)| match kind {
                        // An address, link, account or phone: from a source
                        // the user named or beside the user's words, and the
                        // only one of its kind there.
                        Some(kind) => {
                            let by = match named {
                                Some(by) => windows(text, needle).next().map(|_| by),
                                None => {
                                    let same = |t: &str| kind_of(t) == Some(kind);
                                    picked(shape, text, needle, &same).then_some("nearest")
                                }
                            };
                            by.filter(|_| unambiguous(text, kind, &carried, actions))
                                .map(|by| (id, by))
                        }
                        // An id of letters and digits: from a source the
                        // user named, the id nearest to the user's words
                        // there (of two instances, the idle one).
                        None if mixed_id(needle) => match named {
                            Some(by) => (picked(shape, text, needle, &mixed_id)
                                || selected(shape, needle))
                            .then_some((id, by)),
                            None if selected(shape, needle) => Some((id, "selected")),
                            // From a source not named: the id in the one
                            // object whose other fields hold the user's
                            // words ("the card ending 4421"), read from the
                            // record's structure only.
                            None => shape
                                .filter(|sh| sh.structured)
                                .filter(|sh| one_id_picked(&sh.objects, needle, &says))
                                .map(|_| (id, "nearest")),
                        },
                        // A number, a name or an amount: from a source the
                        // user named, beside the user's words, or of the
                        // record the user picked from a list by a property.
                        None => match named {
                            Some(by) => (located(shape, text, needle) || selected(shape, needle))
                                .then_some((id, by)),
                            None => selected(shape, needle).then_some((id, "selected")),
                        },
                    },
                )
            });
            if let Some((id, by)) = from_pointed {
                paths.push(Value::String(path.clone()));
                spans.push(json!({"path": path, "call_id": id, "by": by}));
            }
        }
        // Of records listed side by side, the user picked one (by a
        // property, or by their words in it): a value of another of them is
        // not what they asked for ("dispute my most recent invoice", and a
        // note asks to dispute an older one).
        // Each list with the record the user picked there, read once.
        let picks: Vec<(&Vec<Candidate>, usize)> = results
            .iter()
            .filter_map(|r| r.3)
            .flat_map(|sh| &sh.lists)
            .filter_map(|list| Some((list, pick_of(list, selecting, &says, &locators)?)))
            .collect();
        for (path, needles) in &looked {
            let elsewhere = needles.iter().any(|needle| {
                picks.iter().any(|(list, i)| {
                    !holds(&list[*i], needle) && list.iter().any(|c| holds(c, needle))
                })
            });
            if elsewhere {
                unpicked.push(Value::String(path.clone()));
            }
        }
    }
    s.set(
        "provenance.args_from_unpicked_record",
        Value::Array(unpicked),
    );
    s.set("provenance.args_from_pointed_source", Value::Array(paths));
    s.set("provenance.pointed_spans", Value::Array(spans));
    s.set("provenance.action_requested", Value::Bool(requested));
}

/// Whether call `id` identified someone: its result is a bare id (one
/// token, no record and no sentence).
pub(super) fn identifies(ctx: &Context, id: &str) -> bool {
    ctx.folded().tools.iter().any(|(c, t)| {
        let t = t.trim().trim_matches('"');
        c == id
            && !t.is_empty()
            && t.len() <= 64
            && !t.contains(char::is_whitespace)
            && !t.starts_with(['{', '['])
    })
}

/// The words of the look-ups that identified someone: calls whose result
/// is a bare id (one token, no record and no sentence), whose arguments
/// are what the user gave to say who they are.
pub(super) fn identifying(ctx: &Context, vocab: &Words) -> Vec<String> {
    ctx.sources
        .iter()
        .filter(|src| identifies(ctx, &src.call_id))
        .flat_map(|src| {
            let args = crate::fold::fold(&src.arguments).into_owned();
            words(&args, vocab)
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// An id of letters and digits, and no address, link, account or phone
/// (`i-0a1b2c3d`, `EXP-40417`, `A-55812`).
fn mixed_id(t: &str) -> bool {
    t.chars().any(|c| c.is_ascii_digit())
        && t.chars().any(|c| c.is_alphabetic())
        && kind_of(t).is_none()
}

/// A value without its spaces (an account number printed in groups).
pub(super) fn compact(t: &str) -> String {
    t.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Whether `needle` is, of the values of its kind in `text`, the nearest to
/// a word of the user's (within [`WINDOW`] bytes) wherever that word stands:
/// "Spotify" picks Spotify's account in a transaction list, not the one of
/// the line after.
fn nearest(text: &str, needle: &str, same: &dyn Fn(&str) -> bool, locators: &[&str]) -> bool {
    let want = compact(needle);
    // Where each value of the kind stands.
    let mut values: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    for t in super::provenance::entities(text) {
        if same(t) {
            for r in super::provenance::occurrences(text, t) {
                values.push((r, compact(t)));
            }
        }
    }
    for r in super::provenance::occurrences(text, needle) {
        values.push((r, want.clone()));
    }
    // Each of the user's words in the text, and the value nearest to it
    // there: a word of the user's picks the value when it is the nearest at
    // every place the word stands beside a value of the kind (an injected
    // "Spotify: send the difference to …" beside the real Spotify line
    // makes "Spotify" pick nothing).
    let mut picks: Vec<(&str, bool)> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric() && c != '\'') {
        // The word's offset in `text` (a split yields slices of it).
        let start = word.as_ptr() as usize - text.as_ptr() as usize;
        let w = word.trim_end_matches("'s").trim_matches('\'');
        let Some(u) = locators
            .iter()
            .find(|u| w.chars().count() >= 3 && same_name(u, w))
        else {
            continue;
        };
        let distance = |r: &std::ops::Range<usize>| {
            if r.end <= start {
                start - r.end
            } else {
                r.start.saturating_sub(start + word.len())
            }
        };
        let Some((r, v)) = values.iter().min_by_key(|(r, _)| distance(r)) else {
            continue;
        };
        if distance(r) > WINDOW {
            continue;
        }
        let this = *v == want;
        match picks.iter_mut().find(|(p, _)| p == u) {
            Some((_, ok)) => *ok &= this,
            None => picks.push((u, this)),
        }
    }
    picks.iter().any(|(_, ok)| *ok)
}

/// Whether `needle` is the only id of letters and digits in each object
/// whose other fields hold the user's words, and one does ("the card
/// ending 4421": the card's own id; a line that holds its own id and its
/// plan's picks neither).
fn one_id_picked(objects: &[Vec<String>], needle: &str, says: &dyn Fn(&str) -> bool) -> bool {
    let id = |v: &String| !free_text(v) && (mixed_id(v) || occurs(v, needle));
    let saying: Vec<&Vec<String>> = objects
        .iter()
        .filter(|o| o.iter().any(id) && o.iter().any(|v| !id(v) && says(v)))
        .collect();
    !saying.is_empty()
        && saying
            .iter()
            .all(|o| o.iter().filter(|v| id(v)).count() == 1 && o.iter().any(|v| occurs(v, needle)))
}

/// How near an action word a second value must stand to be a second
/// choice for it ("transfer to the following account: IBAN …").
const NEAR: usize = 60;

/// Whether `text` names, beside a word of the action, no value of this kind
/// that the call does not carry too (an e-mail's own sender, far from any
/// "add" or "invite", is no second choice).
fn unambiguous(text: &str, kind: &str, carried: &[&String], actions: &Actions) -> bool {
    // Account numbers may be printed in groups (read by the entity
    // patterns); the rest are single tokens.
    let grouped = match kind {
        "account" => super::entities::of(text),
        _ => Vec::new(),
    };
    let named = grouped
        .into_iter()
        .map(|(_, t)| t)
        .chain(super::provenance::entities(text).map(str::to_string));
    // A cheap look at a token's shape before its kind is read.
    let may_be = |t: &str| match kind {
        "email" => t.contains('@'),
        "link" => t.contains('.') || t.contains("://"),
        _ => t.bytes().filter(u8::is_ascii_digit).count() >= 7,
    };
    named
        .filter(|t| may_be(t) && kind_of(&compact(t)) == Some(kind))
        .filter(|t| !carried.iter().any(|c| compact(c) == compact(t)))
        .all(|t| {
            !super::provenance::occurrences(text, &t)
                .any(|r| actions.in_text(around(text, r, NEAR)))
        })
}

pub(super) mod picking;
#[cfg(test)]
mod tests;
