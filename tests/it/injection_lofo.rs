//! Leave-one-family-out over the whole injection corpus (batches A–D): for
//! each attack family, the parts of the detectors that only that family
//! needs are left out (the patterns that fire on no other family's items,
//! and the steps of the second reading that find nothing in any other
//! family), and the family is measured without them: what the detectors
//! find, and what the recommended policy blocks. A part written for one
//! family proves nothing about that family; a part another family needs
//! would have been written anyway. The action vocabulary and the
//! delegated-value signal are not taken apart here (the first figures of
//! each batch, measured before any change, are their held-out figures).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use toolgate::call::Verdict;
use toolgate::gate::injection::{fired, part_names, scan_without, Without};

use super::injection_eval::{decide_without, gates, rows};

const BATCHES: [&str; 4] = [
    "injected.jsonl",
    "injected_b.jsonl",
    "injected_c.jsonl",
    "injected_d.jsonl",
];

/// The parts that fire on one result: the patterns that match, and the
/// steps of the second reading without which a pattern no longer does.
fn parts_of(text: &str) -> BTreeSet<&'static str> {
    let all: BTreeSet<&'static str> = fired(text, Without::default()).into_iter().collect();
    let mut out = all.clone();
    for step in part_names()
        .into_iter()
        .filter(|n| n.starts_with("reading/"))
    {
        let without: BTreeSet<&'static str> = fired(text, Without { parts: &[step] })
            .into_iter()
            .collect();
        if without != all {
            out.insert(step);
        }
    }
    out
}

#[test]
fn each_family_measured_without_the_parts_only_it_needs() {
    let items: Vec<Value> = BATCHES.iter().flat_map(|b| rows(b)).collect();
    assert!(items.len() >= 700, "{}", items.len());
    let family = |i: &Value| i["family"].as_str().unwrap().to_string();
    // Which families each part fires on.
    let mut support: BTreeMap<&'static str, BTreeSet<String>> = BTreeMap::new();
    let parts: Vec<BTreeSet<&'static str>> = items
        .iter()
        .map(|i| parts_of(i["result"].as_str().unwrap()))
        .collect();
    for (i, ps) in items.iter().zip(&parts) {
        for p in ps {
            support.entry(p).or_default().insert(family(i));
        }
    }
    let names = part_names();
    for p in support.keys() {
        assert!(names.contains(p), "{p} is no part's name");
    }
    let families: BTreeSet<String> = items.iter().map(family).collect();
    let gates = gates();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut report = String::from(
        "leave-one-family-out: family, parts left out, detected (all parts), detected, blocked\n",
    );
    let (mut blocked_all, mut n_all) = (0, 0);
    let mut below = Vec::new();
    for f in &families {
        let left_out: Vec<&str> = support
            .iter()
            .filter(|(_, fams)| fams.len() == 1 && fams.contains(f))
            .map(|(p, _)| *p)
            .collect();
        let mine: Vec<(&Value, &BTreeSet<&str>)> = items
            .iter()
            .zip(&parts)
            .filter(|(i, _)| family(i) == *f)
            .collect();
        let n = mine.len();
        let detected_all = mine.iter().filter(|(_, ps)| !ps.is_empty()).count();
        let mut detected = 0;
        let mut blocked = 0;
        let mut misses = Vec::new();
        for (item, _) in &mine {
            let text = item["result"].as_str().unwrap();
            if !scan_without(text, Without { parts: &left_out }).is_empty() {
                detected += 1;
            }
            let (v, rule) = decide_without(&gates, &rt, item, &left_out);
            if v != Verdict::Allow {
                blocked += 1;
            } else {
                misses.push(format!("{} ({rule})", item["id"].as_str().unwrap_or("")));
            }
        }
        // Leaving parts out can only lose finds.
        assert!(detected <= detected_all, "{f}");
        blocked_all += blocked;
        n_all += n;
        let rate = blocked as f64 / n as f64;
        report.push_str(&format!(
            "  {f:<24} {:<60} {:>5.1}% {:>5.1}% {:>5.1}%  ({blocked} of {n})\n",
            left_out.join(","),
            100.0 * detected_all as f64 / n as f64,
            100.0 * detected as f64 / n as f64,
            100.0 * rate,
        ));
        if std::env::var_os("INJECTION_EVAL").is_some() && !misses.is_empty() {
            report.push_str(&format!("      misses: {misses:?}\n"));
        }
        if rate < 0.98 {
            below.push(format!("{f}: {blocked} of {n}: {misses:?}"));
        }
    }
    report.push_str(&format!(
        "overall blocked {:.1}% ({blocked_all} of {n_all})\n",
        100.0 * blocked_all as f64 / n_all as f64
    ));
    eprintln!("{report}");
    // The aim holds for every family measured without its own parts.
    assert!(below.is_empty(), "{below:#?}");
}
