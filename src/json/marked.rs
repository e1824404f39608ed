//! A tree written out as compact JSON with the places of chosen nodes
//! noted, so each node's text is a slice of what was written rather than
//! the node written a second time (a request's declared schemas: an agent
//! declaring twenty tools sends tens of KiB of them every turn).

use std::cell::Cell;
use std::io;
use std::ops::Range;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

/// Where each mark was written: a range of the output, `None` for a mark
/// that was not.
pub type Places = Vec<Option<Range<usize>>>;

/// Nodes of a tree to find while it is written (by address), and the
/// members of its top object they may be inside.
pub struct Marks<'a> {
    pub nodes: Vec<&'a Value>,
    pub within: &'a [&'a str],
}

/// Writes `v` to `out` exactly as `serde_json::to_writer` does, and gives
/// where each of `marks.nodes` was written: the range of the output holding
/// its text, `None` for a node not found. Nodes are looked for in `v`
/// itself and, when `v` is an object, only inside its members named in
/// `marks.within` (the rest is written as it is, at serde_json's own pace).
pub fn to_writer_marking<W: io::Write>(
    out: W,
    v: &Value,
    marks: &Marks<'_>,
) -> Result<Places, serde_json::Error> {
    let within = marks.within;
    let marks = &marks.nodes;
    let mut order: Vec<(usize, usize)> = (marks.iter().enumerate())
        .map(|(i, m)| (address(m), i))
        .collect();
    order.sort_unstable();
    let found = vec![None; marks.len()];
    let at = Cell::new(0);
    let walk = Walk {
        order: &order,
        found: Cell::new(found),
        at: &at,
    };
    let mut ser = serde_json::Serializer::new(Counted { out, at: &at });
    Top {
        v,
        walk: &walk,
        within,
    }
    .serialize(&mut ser)?;
    Ok(walk.found.into_inner())
}

/// The top of the tree: only the members named `within` are walked.
struct Top<'a, 'w> {
    v: &'a Value,
    walk: &'a Walk<'w>,
    within: &'a [&'a str],
}

impl Serialize for Top<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Value::Object(members) = self.v else {
            let v = self.v;
            return Node { v, walk: self.walk }.serialize(s);
        };
        let mut map = s.serialize_map(Some(members.len()))?;
        for (k, v) in members {
            if self.within.contains(&k.as_str()) {
                map.serialize_entry(k, &Node { v, walk: self.walk })?;
            } else {
                map.serialize_entry(k, v)?;
            }
        }
        let done = map.end()?;
        if self.walk.marked(self.v) {
            self.walk.note(self.v, 0..self.walk.at.get());
        }
        Ok(done)
    }
}

fn address(v: &Value) -> usize {
    std::ptr::from_ref(v) as usize
}

/// Counts what goes through it: the serializer writes straight to its
/// writer, so the count is where the next value starts.
struct Counted<'a, W> {
    out: W,
    at: &'a Cell<usize>,
}

impl<W: io::Write> io::Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.at.set(self.at.get() + n);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// What a walk looks for and what it found.
struct Walk<'a> {
    /// The marks' addresses, sorted, each with its place in `marks`.
    order: &'a [(usize, usize)],
    found: Cell<Places>,
    at: &'a Cell<usize>,
}

impl Walk<'_> {
    fn note(&self, v: &Value, span: Range<usize>) {
        let a = address(v);
        let start = self.order.partition_point(|(m, _)| *m < a);
        let mut found = self.found.take();
        for (_, i) in self.order[start..].iter().take_while(|(m, _)| *m == a) {
            if let Some(slot) = found.get_mut(*i) {
                *slot = Some(span.clone());
            }
        }
        self.found.set(found);
    }

    fn marked(&self, v: &Value) -> bool {
        let a = address(v);
        !self.order.is_empty() && self.order.binary_search_by_key(&a, |(m, _)| *m).is_ok()
    }
}

/// One node written as `Value` writes it, its children through the walk.
struct Node<'a, 'w> {
    v: &'a Value,
    walk: &'a Walk<'w>,
}

impl Serialize for Node<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let marked = self.walk.marked(self.v);
        let start = self.walk.at.get();
        let done = match self.v {
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    seq.serialize_element(&Node { v, walk: self.walk })?;
                }
                seq.end()?
            }
            Value::Object(members) => {
                let mut map = s.serialize_map(Some(members.len()))?;
                for (k, v) in members {
                    map.serialize_entry(k, &Node { v, walk: self.walk })?;
                }
                map.end()?
            }
            leaf => leaf.serialize(s)?,
        };
        if marked {
            self.walk.note(self.v, start..self.walk.at.get());
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `v` written marking `marks`: what was written, as serde_json writes
    /// it, and the places.
    fn written(v: &Value, marks: &[&Value], within: &[&str]) -> (Vec<u8>, Places) {
        let mut out = Vec::new();
        let nodes = marks.to_vec();
        let found = to_writer_marking(&mut out, v, &Marks { nodes, within }).unwrap();
        assert_eq!(out, serde_json::to_vec(v).unwrap());
        (out, found)
    }

    fn text<'a>(out: &'a [u8], r: &Option<Range<usize>>) -> Option<&'a str> {
        r.clone().map(|r| std::str::from_utf8(&out[r]).unwrap())
    }

    #[test]
    fn writes_as_serde_json_does_and_finds_each_mark() {
        let v = json!({
            "model": "m",
            "tools": [
                {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"q": {"type": "string", "description": "é \"quoted\" \n"}}}}},
                {"type": "function", "function": {"name": "b", "parameters": {}}},
                {"type": "function", "function": {"name": "c", "parameters": [1, 2.5, -3, null, true]}}
            ],
            "messages": [{"role": "user", "content": "hi"}]
        });
        let params: Vec<&Value> = (0..3)
            .map(|i| &v["tools"][i]["function"]["parameters"])
            .collect();
        let outside = json!({"type": "object"});
        // Marks in any order, one twice, one not in the tree.
        let marks = [params[2], params[0], &outside, params[1], params[0]];
        let (out, found) = written(&v, &marks, &["tools"]);
        for (m, r) in marks.iter().zip(&found) {
            if std::ptr::eq(*m, &outside) {
                assert_eq!(r, &None);
            } else {
                assert_eq!(text(&out, r).unwrap(), serde_json::to_string(m).unwrap());
            }
        }
    }

    #[test]
    fn marks_the_whole_tree_and_leaves_within_and_nothing_outside() {
        let v = json!({"a": "x", "b": [true], "c": {"d": 1}});
        let marks = [&v, &v["a"], &v["b"][0], &v["c"]["d"]];
        let (out, found) = written(&v, &marks, &["a", "b"]);
        let texts: Vec<_> = found.iter().map(|r| text(&out, r)).collect();
        let all = r#"{"a":"x","b":[true],"c":{"d":1}}"#;
        assert_eq!(texts, [Some(all), Some(r#""x""#), Some("true"), None]);
        let scalar = json!(5);
        let (out, found) = written(&scalar, &[&scalar], &[]);
        assert_eq!(text(&out, &found[0]), Some("5"));
    }
}
