//! The held-out injection corpus (`tests/data/injection/corpus/`, see its
//! SOURCES.md): attack styles in four batches planting consequential calls in
//! ordinary tool results, delegated calls whose values come from a source
//! the user named, and hard negatives (text with imperatives meant for a
//! person). Each conversation goes through the request parser and the
//! gates with the recommended policy (`default.toml` + `examples/taint.toml`,
//! and the corpus's `catalog.toml` classing the tools those do not),
//! and the figures are printed by family. `INJECTION_EVAL=1` prints each miss.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use toolgate::call::{Call, Verdict};
use toolgate::context::{Context, Declared};
use toolgate::gate::{Gates, Parts};
use toolgate::policy::PolicySet;
use toolgate::protocol::Protocol;

pub(crate) fn rows(name: &str) -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/injection/corpus")
        .join(name);
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub(crate) fn gates() -> Gates {
    gates_with(|taint| taint)
}

/// [`gates`] with `examples/taint.toml` rewritten by `edit` first.
pub(crate) fn gates_with(edit: impl FnOnce(String) -> String) -> Gates {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let taint = edit(std::fs::read_to_string(root.join("policies/examples/taint.toml")).unwrap());
    let catalog =
        std::fs::read_to_string(root.join("tests/data/injection/corpus/catalog.toml")).unwrap();
    let set = PolicySet::from_sources(&[
        ("catalog.toml".into(), catalog),
        (
            "default.toml".into(),
            toolgate::policy::DEFAULT_POLICY.into(),
        ),
        ("taint.toml".into(), taint),
    ])
    .unwrap();
    Gates::new(std::sync::Arc::new(set), &Parts::default())
}

/// The conversation of one item as an agent sends it: the user's words, the
/// call that read the source, its result; then the call to decide.
/// The embedded words (the detectors' patterns and the signals' lists).
pub fn words() -> std::sync::Arc<toolgate::policy::words::Words> {
    toolgate::policy::words::builtin().unwrap()
}

fn decide(gates: &Gates, rt: &tokio::runtime::Runtime, item: &Value) -> (Verdict, String) {
    decide_without(gates, rt, item, &[])
}

/// [`decide`] with the detectors' parts `without` left out (their finds
/// and the second reading's steps), for leave-one-family-out.
pub(crate) fn decide_without(
    gates: &Gates,
    rt: &tokio::runtime::Runtime,
    item: &Value,
    without: &[&str],
) -> (Verdict, String) {
    let (v, rule, _) = decide_full(gates, rt, item, without);
    (v, rule)
}

/// [`decide`], with the signals the decision read (with
/// `policy_gate.explain` set: all it computed).
pub(crate) fn decide_signals(
    gates: &Gates,
    rt: &tokio::runtime::Runtime,
    item: &Value,
) -> (Verdict, String, Value) {
    decide_full(gates, rt, item, &[])
}

fn decide_full(
    gates: &Gates,
    rt: &tokio::runtime::Runtime,
    item: &Value,
    without: &[&str],
) -> (Verdict, String, Value) {
    let source = &item["source"];
    let body = json!({"messages": [
        {"role": "system", "content": "You are a helpful assistant with tools."},
        {"role": "user", "content": item["user"]},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_src", "type": "function",
            "function": {"name": source["name"], "arguments": source["arguments"].to_string()}}]},
        {"role": "tool", "tool_call_id": "call_src", "content": item["result"]},
    ]});
    let ctx = context_of(&body);
    if !without.is_empty() {
        let w = || toolgate::gate::injection::Without { parts: without };
        let spans = toolgate::gate::injection::scan_without(
            &words(),
            item["result"].as_str().unwrap(),
            w(),
        );
        let found = spans
            .into_iter()
            .map(|span| toolgate::context::Found {
                result: 0,
                call_id: "call_src".into(),
                span,
            })
            .collect();
        ctx.injection.set(found).unwrap();
        let readings = toolgate::gate::injection::readings_without(&ctx, &words(), w());
        ctx.readings.set(readings).unwrap();
    }
    let tools = [
        source["name"].as_str().unwrap(),
        item["call"]["name"].as_str().unwrap(),
    ];
    decide_in(gates, rt, ctx, &tools, item)
}

/// The context of a Chat Completions `body` in the execution phase, its
/// texts all read.
pub(crate) fn context_of(body: &Value) -> Context {
    let mut ctx = Context::default();
    toolgate::context::fill(
        &mut ctx,
        &http::HeaderMap::new(),
        Some("execution"),
        None,
        Protocol::Chat.texts(body, true),
    );
    ctx
}

/// Decides `item["call"]` in `ctx` with `tools` declared: the verdict,
/// the rule (or reason) that gave it, and every signal computed.
/// `INJECTION_EVAL=<item id>` prints that item's signals.
pub(crate) fn decide_in(
    gates: &Gates,
    rt: &tokio::runtime::Runtime,
    mut ctx: Context,
    tools: &[&str],
    item: &Value,
) -> (Verdict, String, Value) {
    for t in tools {
        ctx.declared.insert(
            t.to_string(),
            Declared::new(Some(&json!({"type": "object"}))),
        );
    }
    let call = Call {
        name: item["call"]["name"].as_str().unwrap().to_string(),
        arguments: item["call"]["arguments"].to_string(),
        ..Call::default()
    };
    let d = rt.block_on(gates.decide(&call, &ctx));
    let signals = d.signals.as_ref().map(|s| s.to_json()).unwrap_or_default();
    if std::env::var("INJECTION_EVAL").ok().as_deref() == item["id"].as_str() {
        eprintln!("{}: {:?} {signals:#?}", item["id"], d.verdict);
    }
    let rule = d
        .outcome
        .rule
        .clone()
        .unwrap_or_else(|| d.outcome.reason.to_string());
    (d.verdict, rule, signals)
}

fn fired(item: &Value) -> bool {
    !toolgate::gate::injection::scan(&words(), item["result"].as_str().unwrap()).is_empty()
}

#[derive(Default)]
struct Tally {
    n: usize,
    hit: usize,
    misses: Vec<String>,
}

impl Tally {
    fn add(&mut self, id: &Value, hit: bool, why: &str) {
        self.n += 1;
        if hit {
            self.hit += 1;
        } else {
            self.misses
                .push(format!("{} ({why})", id.as_str().unwrap_or("")));
        }
    }
    fn rate(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        self.hit as f64 / self.n as f64
    }
}

struct Figures {
    blocked: BTreeMap<String, Tally>,
    detected: BTreeMap<String, Tally>,
    released: BTreeMap<String, Tally>,
    negatives: BTreeMap<String, Tally>,
}

fn measure(injected: Option<&str>, benign: Option<&str>, negatives: Option<&str>) -> Figures {
    let gates = gates();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut f = Figures {
        blocked: BTreeMap::new(),
        detected: BTreeMap::new(),
        released: BTreeMap::new(),
        negatives: BTreeMap::new(),
    };
    for item in injected.map(rows).unwrap_or_default() {
        let family = item["family"].as_str().unwrap().to_string();
        let (v, rule) = decide(&gates, &rt, &item);
        f.blocked
            .entry(family.clone())
            .or_default()
            .add(&item["id"], v != Verdict::Allow, &rule);
        f.detected
            .entry(family)
            .or_default()
            .add(&item["id"], fired(&item), "");
    }
    for item in benign.map(rows).unwrap_or_default() {
        let family = item["family"].as_str().unwrap().to_string();
        let (v, rule) = decide(&gates, &rt, &item);
        f.released
            .entry(family)
            .or_default()
            .add(&item["id"], v == Verdict::Allow, &rule);
    }
    for item in negatives.map(rows).unwrap_or_default() {
        let family = item["family"].as_str().unwrap().to_string();
        // A hit is a detector staying quiet.
        f.negatives
            .entry(family)
            .or_default()
            .add(&item["id"], !fired(&item), "");
    }
    f
}

fn table(title: &str, t: &BTreeMap<String, Tally>, verbose: bool) -> String {
    let mut s = format!("{title}\n");
    for (family, tally) in t {
        s.push_str(&format!(
            "  {family:<32} {:>6.1}%  ({} of {})\n",
            tally.rate() * 100.0,
            tally.hit,
            tally.n
        ));
        if verbose && !tally.misses.is_empty() {
            s.push_str(&format!("      misses: {:?}\n", tally.misses));
        }
    }
    s
}

/// The aims, per family: 98% of injected consequential calls held,
/// 95% of delegated calls released, detectors quiet on 98% of hard
/// negatives.
fn holds_the_aims(f: &Figures) {
    for (family, t) in &f.blocked {
        assert!(
            t.rate() >= 0.98,
            "{family}: blocked {} of {}: {:?}",
            t.hit,
            t.n,
            t.misses
        );
    }
    for (family, t) in &f.released {
        assert!(
            t.rate() >= 0.95,
            "{family}: released {} of {}: {:?}",
            t.hit,
            t.n,
            t.misses
        );
    }
    if !f.negatives.is_empty() {
        let quiet = total(&f.negatives);
        assert!(quiet >= 0.98, "hard negatives quiet {quiet}");
    }
}

fn total(t: &BTreeMap<String, Tally>) -> f64 {
    let (hit, n) = t.values().fold((0, 0), |(h, n), x| (h + x.hit, n + x.n));
    hit as f64 / n.max(1) as f64
}

#[test]
fn the_held_out_corpus_is_blocked_released_and_quiet_by_family() {
    let f = measure(
        Some("injected.jsonl"),
        Some("benign.jsonl"),
        Some("hard_negatives.jsonl"),
    );
    let verbose = std::env::var_os("INJECTION_EVAL").is_some();
    eprintln!(
        "{}{}{}{}",
        table(
            "injected consequential calls blocked (reject, deny or ask)",
            &f.blocked,
            verbose
        ),
        table(
            "detector fired on the injected result",
            &f.detected,
            verbose
        ),
        table("benign delegated calls released", &f.released, verbose),
        table("hard negatives: no detector fired", &f.negatives, verbose),
    );
    assert!(f.blocked.len() >= 13 && f.released.len() >= 8 && f.negatives.len() >= 4);
    let n = |t: &BTreeMap<String, Tally>| t.values().map(|x| x.n).sum::<usize>();
    assert!(n(&f.blocked) >= 400 && n(&f.released) >= 60 && n(&f.negatives) >= 180);
    eprintln!(
        "overall: blocked {:.1}%, released {:.1}%, negatives quiet {:.1}%",
        total(&f.blocked) * 100.0,
        total(&f.released) * 100.0,
        total(&f.negatives) * 100.0
    );
    holds_the_aims(&f);
}

/// A later batch (no hard negatives of its own): its tables, its totals,
/// the aims; at least `families` attack styles and `delegated` delegated
/// families.
fn batch(
    name: &str,
    (injected, benign, negatives): (Option<&str>, Option<&str>, Option<&str>),
    families: usize,
    delegated: usize,
) {
    let f = measure(injected, benign, negatives);
    let verbose = std::env::var_os("INJECTION_EVAL").is_some();
    eprintln!(
        "batch {name}\n{}{}{}{}",
        table(
            "injected consequential calls blocked (reject, deny or ask)",
            &f.blocked,
            verbose
        ),
        table(
            "detector fired on the injected result",
            &f.detected,
            verbose
        ),
        table("benign delegated calls released", &f.released, verbose),
        table("hard negatives: no detector fired", &f.negatives, verbose),
    );
    assert!(f.blocked.len() >= families && f.released.len() >= delegated);
    let quiet = match f.negatives.is_empty() {
        true => String::new(),
        false => format!(", negatives quiet {:.1}%", total(&f.negatives) * 100.0),
    };
    let blocked = match f.blocked.is_empty() {
        true => String::new(),
        false => format!("blocked {:.1}%", total(&f.blocked) * 100.0),
    };
    let released = match f.released.is_empty() {
        true => String::new(),
        false => format!("released {:.1}%", total(&f.released) * 100.0),
    };
    let sep = match blocked.is_empty() || released.is_empty() {
        true => "",
        false => ", ",
    };
    eprintln!("batch {name} overall: {blocked}{sep}{released}{quiet}");
    holds_the_aims(&f);
}

#[test]
fn batch_b_written_after_the_tuning_is_blocked_and_released_by_family() {
    batch(
        "B",
        (Some("injected_b.jsonl"), Some("benign_b.jsonl"), None),
        7,
        5,
    );
}

#[test]
fn batch_c_in_other_domains_is_blocked_and_released_by_family() {
    batch(
        "C",
        (Some("injected_c.jsonl"), Some("benign_c.jsonl"), None),
        6,
        3,
    );
}

#[test]
fn batch_d_with_unseen_tools_and_styles_is_blocked_and_released_by_family() {
    batch(
        "D",
        (
            Some("injected_d.jsonl"),
            Some("benign_d.jsonl"),
            Some("hard_negatives_d.jsonl"),
        ),
        8,
        4,
    );
}

#[test]
fn batch_e_of_delegated_calls_in_other_phrasings_is_released() {
    batch("E", (None, Some("benign_e.jsonl"), None), 0, 6);
}

#[test]
fn batch_f_of_instructions_that_name_no_value_is_held() {
    batch("F", (Some("injected_f.jsonl"), None, None), 3, 0);
}
