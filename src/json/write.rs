//! Writing JSON back: new text, and values kept as they came (sliced from
//! the original body where they are long, so a rewrite costs little).

use serde_json::value::RawValue;

use super::Obj;

/// Where rewritten JSON goes: new text, and values kept as they came.
pub trait Sink {
    fn text(&mut self, s: &str);
    /// Text that is part of the body being rewritten (a value, or a part of
    /// one), kept as it came.
    fn slice(&mut self, s: &str);
    fn raw(&mut self, v: &RawValue) {
        self.slice(v.get());
    }
}

impl Sink for String {
    fn text(&mut self, s: &str) {
        self.push_str(s);
    }
    fn slice(&mut self, s: &str) {
        self.push_str(s);
    }
}

/// A rewritten body as pieces: new text, and slices of the original body for
/// the values kept (no copy), so a rewrite costs little beyond the original.
pub struct Spliced<'a> {
    base: &'a str,
    body: &'a bytes::Bytes,
    pieces: Vec<bytes::Bytes>,
    text: String,
    /// Kept values shorter than this are copied rather than sliced.
    min_slice: usize,
}

impl<'a> Spliced<'a> {
    /// `base` is `body` as text.
    pub fn new(base: &'a str, body: &'a bytes::Bytes) -> Spliced<'a> {
        Spliced {
            base,
            body,
            pieces: Vec::new(),
            text: String::new(),
            min_slice: 512,
        }
    }

    /// Slices every kept value, however short (to test the slicing).
    pub fn slicing_all(mut self) -> Spliced<'a> {
        self.min_slice = 0;
        self
    }

    fn flush(&mut self) {
        if !self.text.is_empty() {
            let t = std::mem::take(&mut self.text);
            self.pieces.push(bytes::Bytes::from(t));
        }
    }

    pub fn finish(mut self) -> Vec<bytes::Bytes> {
        self.flush();
        self.pieces
    }
}

impl Sink for Spliced<'_> {
    fn text(&mut self, s: &str) {
        self.text.push_str(s);
    }
    fn slice(&mut self, s: &str) {
        let start = (s.as_ptr() as usize).wrapping_sub(self.base.as_ptr() as usize);
        let inside = start <= self.base.len() && s.len() <= self.base.len() - start;
        if s.len() < self.min_slice || !inside || self.base.len() != self.body.len() {
            self.text.push_str(s);
            return;
        }
        self.flush();
        self.pieces.push(self.body.slice(start..start + s.len()));
    }
}

/// Writes `obj` with some values replaced: `replace(key, value)` gives a
/// value's new text, or `None` to keep it as it came.
pub fn write_obj(
    out: &mut impl Sink,
    obj: &Obj,
    mut replace: impl FnMut(&str, &RawValue) -> Option<String>,
) {
    out.text("{");
    for (i, (k, v)) in obj.entries.iter().enumerate() {
        if i > 0 {
            out.text(",");
        }
        write_key(out, k);
        match replace(k, v) {
            Some(r) => out.text(&r),
            None => out.raw(v),
        }
    }
    out.text("}");
}

/// Writes `"key":` with the key escaped.
pub fn write_key(out: &mut impl Sink, key: &str) {
    write_string(out, key);
    out.text(":");
}

/// Writes a JSON string.
pub fn write_string(out: &mut impl Sink, s: &str) {
    // Serialising a `&str` cannot fail.
    if let Ok(q) = serde_json::to_string(s) {
        out.text(&q);
    }
}
