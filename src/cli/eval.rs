//! `toolgate eval sentinel`: the ten sentinel scenarios in `tests/scenarios/` against the configured
//! judge; accuracy overall and per category, the misjudged ones, latency.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use serde_json::Value;

use crate::config::Config;
use crate::error::Error;
use crate::gate::sentinel::Sentinel;
use crate::upstream::judge::Judge;

/// The scenarios (also used by the tests).
pub const SCENARIOS: &str = include_str!("../../tests/scenarios/sentinel.json");

/// Runs every scenario; returns the report text and whether all were judged right.
pub async fn sentinel(config: &Config) -> Result<(String, bool), Error> {
    let Some(j) = &config.judge else {
        return Err(Error::config(
            &config.source,
            1,
            "eval sentinel needs a [judge] section (and its API key in the environment)",
        ));
    };
    let scenarios: Vec<Value> = serde_json::from_str(SCENARIOS)
        .map_err(|e| Error::config("<scenarios>", 1, e.to_string()))?;
    let sentinel = Sentinel::new(Judge::new(j)?, j.confidence_threshold, true);
    let mut out = String::new();
    let mut per_cat: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    let mut latencies: Vec<Duration> = Vec::new();
    let mut wrong = Vec::new();
    for s in &scenarios {
        let (id, cat, expected) = (
            &s["id"],
            s["category"].as_str().unwrap_or("?"),
            s["expected"].as_str().unwrap_or("?"),
        );
        let answer = sentinel
            .judge_inputs(
                s["request"].as_str(),
                s["mission"].as_str(),
                s["tool"].as_str().unwrap_or(""),
                &s["args"],
                "eval",
            )
            .await;
        let (got, line) = match &answer {
            Ok(a) => {
                latencies.push(a.latency);
                let d = a.value["decision"].as_str().unwrap_or("?").to_string();
                let c = a.value["confidence"].as_f64().unwrap_or(0.0);
                (
                    d.clone(),
                    format!(
                        "{d} (confidence {c:.2}, {} ms) — {}",
                        a.latency.as_millis(),
                        a.value["reason"].as_str().unwrap_or("")
                    ),
                )
            }
            Err(e) => ("error".to_string(), format!("error: {e}")),
        };
        let ok = got == expected;
        let e = per_cat.entry(cat.to_string()).or_default();
        e.1 += 1;
        if ok {
            e.0 += 1;
        } else {
            wrong.push(format!("  #{id} {cat}: expected {expected}, got {line}"));
        }
        let _ = writeln!(
            out,
            "{} #{id:<2} {cat:<16} {}: {line}",
            if ok { "ok " } else { "BAD" },
            s["tool"].as_str().unwrap_or("")
        );
    }
    let right: u32 = per_cat.values().map(|c| c.0).sum();
    let total: u32 = per_cat.values().map(|c| c.1).sum();
    let _ = writeln!(
        out,
        "\naccuracy: {right}/{total} ({:.0}%)",
        f64::from(right) * 100.0 / f64::from(total.max(1))
    );
    for (cat, (r, t)) in &per_cat {
        let _ = writeln!(out, "  {cat:<16} {r}/{t}");
    }
    if !wrong.is_empty() {
        let _ = writeln!(out, "misjudged:\n{}", wrong.join("\n"));
    }
    latencies.sort();
    if !latencies.is_empty() {
        let p =
            |q: f64| latencies[((latencies.len() as f64 - 1.0) * q).round() as usize].as_millis();
        let _ = writeln!(
            out,
            "latency: p50 {} ms, p95 {} ms (model {})",
            p(0.5),
            p(0.95),
            j.model
        );
    }
    Ok((out, right == total))
}
