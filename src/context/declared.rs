//! A tool the request declares, with its schema's text; the request's own
//! declarations take that text from the body written upstream.

use std::collections::HashMap;
use std::ops::Range;

use serde_json::Value;

/// A tool the request declares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declared {
    /// The declared JSON Schema of its arguments, if any, as compact JSON
    /// text: a request's context lives as long as its response, a call
    /// waiting for a person included, and a schema's tree takes several
    /// times the room of its text.
    pub parameters: Option<Box<str>>,
}

impl Declared {
    pub fn new(parameters: Option<&Value>) -> Declared {
        // Written straight into bytes: `to_string` goes through `fmt`, which
        // cost twice as much. Compact JSON is UTF-8.
        let text = |p: &Value| {
            let bytes = serde_json::to_vec(p).unwrap_or_default();
            String::from_utf8(bytes).unwrap_or_else(|_| p.to_string())
        };
        Declared {
            parameters: parameters.map(|p| text(p).into_boxed_str()),
        }
    }

    /// A declared schema whose text is taken later from the body written
    /// upstream ([`crate::protocol::Protocol::write_request`]) rather than
    /// written on its own. Until then its text is empty, which is no usable
    /// schema: a call checked against it fails the check.
    pub fn unwritten(parameters: Option<&Value>) -> Declared {
        Declared {
            parameters: parameters.map(|_| Box::from("")),
        }
    }
}

/// Gives each declaration of `declared` still [`Declared::unwritten`] its
/// schema's text: `found` is every declaration of the request in body
/// order with where its schema is in `body` (of a name declared twice the
/// last counts, as when the request was read).
pub fn take_schemas<'a>(
    declared: &mut HashMap<String, Declared>,
    found: impl IntoIterator<Item = (&'a str, Option<Range<usize>>)>,
    body: &[u8],
) {
    let last: HashMap<&str, Option<Range<usize>>> = found.into_iter().collect();
    for (name, d) in declared.iter_mut() {
        if d.parameters.as_deref() != Some("") {
            continue;
        }
        let text = (last.get(name.as_str()).cloned().flatten())
            .and_then(|r| body.get(r))
            .and_then(|b| std::str::from_utf8(b).ok());
        if let Some(t) = text {
            d.parameters = Some(t.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_declared_schema_is_kept_as_its_compact_text() {
        let p = json!({"type": "object", "properties": {"q\u{e9}\"": {"type": "string", "enum": ["a\nb", 1.5, null]}}});
        let d = Declared::new(Some(&p));
        assert_eq!(d.parameters.as_deref(), Some(p.to_string().as_str()));
        assert_eq!(Declared::new(None).parameters, None);
    }

    #[test]
    fn unwritten_schemas_take_their_text_the_last_of_a_name_and_only_theirs() {
        let body = br#"{"a":{"type":"object"},"b":{"x":1},"c":{"y":2}}"#;
        let mut declared: HashMap<String, Declared> = HashMap::new();
        let p = json!({});
        for name in ["a", "b", "gone"] {
            declared.insert(name.into(), Declared::unwritten(Some(&p)));
        }
        declared.insert("none".into(), Declared::unwritten(None));
        declared.insert("kept".into(), Declared::new(Some(&json!({"k": 1}))));
        let found = [
            ("a", Some(5..22)),
            ("b", Some(39..46)),
            ("b", Some(27..34)),
            ("kept", Some(5..22)),
            ("none", None),
        ];
        take_schemas(&mut declared, found, body);
        let text = |n: &str| declared[n].parameters.as_deref().map(str::to_string);
        assert_eq!(text("a").as_deref(), Some(r#"{"type":"object"}"#));
        assert_eq!(
            text("b").as_deref(),
            Some(r#"{"x":1}"#),
            "the last of a name"
        );
        assert_eq!(
            text("kept").as_deref(),
            Some(r#"{"k":1}"#),
            "a written one stays"
        );
        assert_eq!(text("none"), None);
        // Not in the body: still no usable schema (a call fails its check).
        assert_eq!(text("gone").as_deref(), Some(""));
    }
}
