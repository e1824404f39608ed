//! Records listed side by side (the objects of a JSON list, the rows of a
//! table, the entries of a record keyed by id, `name (4.8)` entries written
//! in one text), each with the values it holds and what it measures: the
//! numbers and dates a request may pick one of them by ("the best rated
//! one", "my most recent reservation").

use serde_json::{Map, Value};

use super::{free_text, scalar};

/// One of several records listed side by side.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Its scalar values that are not free text.
    pub values: Vec<String>,
    /// Its numbers and dates, by key (`""` for the number of a `name (n)`
    /// entry): a date as its digits (`2024-05-13` is 20240513).
    pub measures: Vec<(String, f64)>,
    /// The keys of its measures that are dates.
    pub dates: Vec<String>,
}

/// A number, or a date, a value measures; `None` for anything else.
pub fn measure(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => number(s).or_else(|| date(s)),
        _ => None,
    }
}

/// A number written alone, a currency sign or code beside it allowed
/// (`4.8`, `$12.50`, `12.50 USD`).
fn number(s: &str) -> Option<f64> {
    let t = s
        .trim()
        .trim_start_matches(['$', '€', '£', '¥'])
        .trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == ' ');
    let t = t.replace(',', "");
    t.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// A date (`YYYY-MM-DD`, a time after it allowed) as a number that orders
/// as the dates do.
fn date(s: &str) -> Option<f64> {
    let b = s.trim().as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<f64> {
        let t = std::str::from_utf8(b.get(r)?).ok()?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let day = digits(0..4)? * 10_000.0 + digits(5..7)? * 100.0 + digits(8..10)?;
    // A time of day, when one follows, as a fraction of the day.
    let time = match (b.get(10), digits(11..13), digits(14..16)) {
        (Some(b'T' | b' '), Some(h), Some(m)) => (h * 60.0 + m) / 1440.0,
        _ => 0.0,
    };
    Some(day + time)
}

/// An object as a candidate.
fn of_object(m: &Map<String, Value>, key: Option<&str>) -> Candidate {
    let mut values: Vec<String> = key.map(str::to_string).into_iter().collect();
    let mut measures = Vec::new();
    let mut dates = Vec::new();
    for (k, v) in m {
        if let Some(s) = scalar(v).filter(|s| !free_text(s)) {
            values.push(s);
        }
        if let Some(n) = measure(v) {
            measures.push((k.clone(), n));
        }
        if v.as_str().and_then(date).is_some() {
            dates.push(k.clone());
        }
    }
    Candidate {
        values,
        measures,
        dates,
    }
}

/// The records `v` lists side by side: a list of two objects or more, or
/// an object whose keys are ids (two or more) over objects.
pub fn of_value(v: &Value) -> Option<Vec<Candidate>> {
    match v {
        Value::Array(a) if a.len() >= 2 && a.iter().all(Value::is_object) => Some(
            a.iter()
                .filter_map(Value::as_object)
                .map(|m| of_object(m, None))
                .collect(),
        ),
        Value::Object(m)
            if m.len() >= 2
                && m.iter()
                    .all(|(k, v)| v.is_object() && k.bytes().any(|b| b.is_ascii_digit())) =>
        {
            Some(
                m.iter()
                    .filter_map(|(k, v)| Some(of_object(v.as_object()?, Some(k))))
                    .collect(),
            )
        }
        _ => None,
    }
}

/// Entries written in one text, `name (number)` each, separated by commas,
/// semicolons or lines (two or more, and nothing else).
pub fn of_text(s: &str) -> Option<Vec<Candidate>> {
    // Most texts hold no entry: known before they are split.
    if !s.contains(')') {
        return None;
    }
    let entries: Vec<&str> = s
        .split([',', ';', '\n'])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    if entries.len() < 2 {
        return None;
    }
    entries
        .iter()
        .map(|e| {
            let (name, rest) = e.strip_suffix(')')?.rsplit_once('(')?;
            let name = name.trim();
            let n = number(rest)?;
            (!name.is_empty()).then(|| Candidate {
                values: vec![name.to_string()],
                measures: vec![(String::new(), n)],
                dates: Vec::new(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn listed_records_carry_their_values_and_measures() {
        let hotels = of_text("Cheap Inn 0 (3.1), Le Marais Boutique 0 (4.8), Budget Stay 0 (3.9)")
            .unwrap_or_default();
        assert_eq!(hotels.len(), 3);
        assert_eq!(hotels[1].values, ["Le Marais Boutique 0"]);
        assert_eq!(hotels[1].measures, [(String::new(), 4.8)]);
        assert!(of_text("rooms sell out in May (book early)").is_none());
        assert!(of_text("a (1), b").is_none());
        let trips = of_value(&json!([
            {"booking": "BK-1", "date": "2024-05-13", "price": "$120.50"},
            {"booking": "BK-2", "date": "2024-06-01T09:30", "price": 99}]))
        .unwrap_or_default();
        assert_eq!(trips.len(), 2);
        let m = |c: &Candidate, k: &str| c.measures.iter().find(|(x, _)| x == k).map(|x| x.1);
        assert_eq!(m(&trips[0], "price"), Some(120.5));
        assert!(m(&trips[1], "date") > m(&trips[0], "date"));
        assert_eq!(trips[0].dates, ["date"]);
        let keyed =
            of_value(&json!({"1001": {"size": "M"}, "1002": {"size": "L"}})).unwrap_or_default();
        assert_eq!(keyed[0].values, ["1001", "M"]);
        assert!(of_value(&json!([{"a": 1}])).is_none());
    }
}
