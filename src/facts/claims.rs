//! Stage 1 detectors over outgoing text: numeric claims (numbers with
//! units, percentages, currency amounts, counts) and exaggerated-capability
//! phrases. Also the number reading shared with the fact check.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{json, Value};

struct Patterns {
    percentage: Regex,
    currency: Regex,
    quantity: Regex,
    count: Regex,
    exaggeration: Regex,
    number: Regex,
}

const UNITS: &str = "ms|milliseconds?|s|secs?|seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?|\
kb|mb|gb|tb|pb|kib|mib|gib|tib|bytes?|x|times|fold|km|m|cm|mm|kg|g|mph|rps|qps|tps|req/s|requests?/s";

const EXAGGERATIONS: &str = "world'?s (?:best|first|fastest|leading)|best in (?:the world|class)|world[- ]class|\
industry[- ]leading|market[- ]leading|unmatched|unparalleled|unrivall?ed|revolutionary|game[- ]chang(?:er|ing)|\
guaranteed|100 ?% (?:secure|safe|accurate|reliable|uptime|guaranteed)|never (?:fails?|goes down|breaks)|\
zero (?:bugs|downtime|errors|risk)|no bugs|bug[- ]free|always works|fully autonomous|completely (?:secure|safe|autonomous)|\
the only (?:tool|product|solution|platform|company)|first[- ]ever|infinitely|instantly|bullet[- ]?proof|\
military[- ]grade|unbreakable|unhackable|flawless|perfect(?:ly)? (?:accuracy|accurate|secure|safe)|limitless|\
no (?:one|other [a-z]+) (?:can|comes close)|10x|100x|1000x";

#[allow(clippy::expect_used)] // the patterns are constants, checked by the tests below
static P: LazyLock<Patterns> = LazyLock::new(|| {
    // ASCII classes and word boundaries (`(?-u)`) keep the automata small and fast;
    // the claims they look for are written in ASCII digits and words.
    let r = |s: &str| Regex::new(s).expect("claim pattern");
    let num = r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?";
    let sp = r"[ \t]";
    Patterns {
        percentage: r(&format!(r"(?i-u)(?:{num}){sp}?(?:%|percent\b|per cent\b)")),
        currency: r(&format!(
            r"(?i)(?:[$€£¥]{sp}?(?:{num})(?:{sp}?(?:k|m|bn|million|billion|thousand)(?-u:\b))?|(?:{num}){sp}?(?:usd|eur|gbp|dollars?|euros?|pounds?)(?-u:\b))"
        )),
        quantity: r(&format!(r"(?i-u)\b(?:{num}){sp}?(?:{UNITS})(?:\b|$)")),
        count: r(&format!(
            r"(?i-u)\b(?:{num})(?:{sp}?(?:k|m|million|billion|thousand))?\+?{sp}+(?:[a-z][a-z\-]*s)\b"
        )),
        exaggeration: r(&format!(r"(?i-u)\b(?:{EXAGGERATIONS})")),
        number: r(&format!(
            r"(?i-u)(?:{num})(?:{sp}?(?:k|m|bn|b|thousand|million|billion)\b)?"
        )),
    }
});

/// The number a fact value states (`255908`, `255,908`, `99.5%`, `$1.2M`), if any.
pub fn number(value: &str) -> Option<f64> {
    let v = value.trim();
    let mut matches = P.number.find_iter(v);
    let (Some(m), None) = (matches.next(), matches.next()) else {
        return None;
    };
    // Only a value that is one number, with at most a currency sign or `%`, is numeric.
    let rest = format!("{}{}", &v[..m.start()], &v[m.end()..]);
    if rest.chars().all(|c| "$€£¥%+~ ".contains(c)) {
        numbers(m.as_str()).first().map(|n| n.0)
    } else {
        None
    }
}

/// Every number in a text with its precision (the value of one step in its
/// last written digit), `k`/`M`/`million` and the like applied: `255.9k` is
/// `(255900, 100)`, `1,680` is `(1680, 1)`.
pub fn numbers(text: &str) -> Vec<(f64, f64)> {
    P.number
        .find_iter(text)
        .filter_map(|m| {
            let whole = m.as_str();
            let digits: String = whole
                .chars()
                .take_while(|ch| ch.is_ascii_digit() || *ch == ',' || *ch == '.')
                .filter(|ch| *ch != ',')
                .collect();
            let digits = digits.trim_end_matches('.');
            let n: f64 = digits.parse().ok()?;
            let decimals = digits.split_once('.').map(|(_, d)| d.len()).unwrap_or(0);
            // What follows the digits is the scale word, if the pattern took one.
            let suffix = whole
                .trim_start_matches(|c: char| c.is_ascii_digit() || c == ',' || c == '.')
                .trim()
                .to_ascii_lowercase();
            let scale = match suffix.as_str() {
                "k" | "thousand" => 1e3,
                "m" | "million" => 1e6,
                "b" | "bn" | "billion" => 1e9,
                _ => 1.0,
            };
            Some((n * scale, scale / 10f64.powi(decimals as i32)))
        })
        .collect()
}

/// The claims in a text: `[{kind, text}]`, kinds `percentage`, `currency`,
/// `quantity`, `count`, `exaggeration`; each span once, the first kind wins.
pub fn claims(text: &str) -> Vec<Value> {
    let p = &*P;
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut out = Vec::new();
    for (kind, re) in [
        ("exaggeration", &p.exaggeration),
        ("percentage", &p.percentage),
        ("currency", &p.currency),
        ("quantity", &p.quantity),
        ("count", &p.count),
    ] {
        for m in re.find_iter(text) {
            if spans.iter().any(|&(s, e)| m.start() < e && s < m.end()) {
                continue;
            }
            spans.push((m.start(), m.end()));
            out.push(json!({"kind": kind, "text": m.as_str()}));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(String, String)> {
        claims(text)
            .into_iter()
            .map(|c| {
                (
                    c["kind"].as_str().unwrap().to_string(),
                    c["text"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn finds_numeric_claims_of_every_kind() {
        let k = kinds("We cut latency by 40% to 12 ms, saved $1.2 million, and now serve 255,908 users. It is 3x faster.");
        assert!(k.contains(&("percentage".into(), "40%".into())), "{k:?}");
        assert!(k.contains(&("quantity".into(), "12 ms".into())), "{k:?}");
        assert!(
            k.contains(&("currency".into(), "$1.2 million".into())),
            "{k:?}"
        );
        assert!(
            k.contains(&("count".into(), "255,908 users".into())),
            "{k:?}"
        );
        assert!(k.contains(&("quantity".into(), "3x".into())), "{k:?}");
    }

    #[test]
    fn finds_exaggerated_capability_phrases() {
        let k = kinds("Our world-class, bug-free agent is 100% secure and never fails.");
        let ex: Vec<&str> = k
            .iter()
            .filter(|(k, _)| k == "exaggeration")
            .map(|(_, t)| t.as_str())
            .collect();
        assert_eq!(
            ex,
            ["world-class", "bug-free", "100% secure", "never fails"],
            "{k:?}"
        );
        assert!(kinds("See you at the meeting tomorrow.").is_empty());
    }

    #[test]
    fn reads_numbers_with_separators_and_scales() {
        assert_eq!(
            numbers("255,908 and 255.9k and 3 million and 99.5"),
            vec![(255908.0, 1.0), (255900.0, 100.0), (3e6, 1e6), (99.5, 0.1)]
        );
        assert_eq!(number("99.5%"), Some(99.5));
        assert_eq!(number("$1.2M"), Some(1.2e6));
        assert_eq!(number("apache-2.0"), None);
        assert_eq!(number("v1 to v2"), None);
    }
}
