//! A chunk that carries tool-call deltas and nothing else, read typed and
//! borrowed: the bulk of a streamed call, without building a tree.
//!
//! The shape is narrow on purpose. Every key at every level must be one named
//! here, exactly, at most once (a repeated key is an error of the reader);
//! the finish, usage, text and role must be null or absent. Whatever falls
//! outside (another key, a key that only folds to a known one, text beside a
//! call, a finish) is left to the whole-tree parse, which decides as before.
//! For a chunk that fits, the whole-tree path would hold its calls and send
//! nothing; this reader leads to the same.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::assemble::Delta;
use crate::json::{from_object, Braced};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeltaChunk<'a> {
    #[serde(borrow, default, deserialize_with = "raw")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    object: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    created: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    model: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    system_fingerprint: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    service_tier: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    provider: Option<&'a RawValue>,
    #[serde(borrow)]
    choices: Vec<Braced<DeltaChoice<'a>>>,
    #[serde(default, rename = "usage")]
    _usage: Option<Null>,
    /// OpenAI's padding against length side channels; dropped with the
    /// chunk. Raw, so its place in the chunk is known ([`super::repeat`]).
    #[serde(borrow, default, deserialize_with = "raw")]
    obfuscation: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeltaChoice<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow)]
    delta: Braced<Calls<'a>>,
    #[serde(default, rename = "finish_reason")]
    _finish_reason: Option<Null>,
    #[serde(default, rename = "native_finish_reason")]
    _native_finish_reason: Option<Null>,
    #[serde(default, rename = "logprobs")]
    _logprobs: Option<Null>,
    /// Azure's, empty beside a call fragment (the whole-tree path reads
    /// nothing of it, and a chunk stripped of its calls is not sent).
    #[serde(default, rename = "content_filter_results")]
    _filter: Option<Braced<Nothing>>,
}

/// `{}` only.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Nothing {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Calls<'a> {
    #[serde(borrow)]
    tool_calls: Vec<Braced<Entry<'a>>>,
    #[serde(default, rename = "content")]
    _content: Option<Null>,
    /// A role the agent was already sent for the choice ([`read`]).
    #[serde(borrow, default)]
    role: Option<Text<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    id: Option<Text<'a>>,
    #[serde(borrow, default, rename = "type")]
    kind: Option<Text<'a>>,
    #[serde(borrow, default)]
    function: Option<Braced<Function<'a>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Function<'a> {
    #[serde(borrow, default)]
    name: Option<Text<'a>>,
    /// Raw, so its place in the chunk is known ([`super::repeat`]).
    #[serde(borrow, default, deserialize_with = "raw")]
    arguments: Option<&'a RawValue>,
}

/// JSON `null` only (an `Option<Null>` is absent, null, or an error).
pub(super) struct Null;

impl<'de> Deserialize<'de> for Null {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Null, D::Error> {
        <()>::deserialize(d).map(|()| Null)
    }
}

/// A string, borrowed unless it had escapes.
pub(super) struct Text<'a>(pub(super) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text<'a>, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(s.to_string())))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// The value of `quoted` when it is exactly one JSON string, borrowed unless
/// it had escapes.
pub fn string(quoted: &str) -> Option<Cow<'_, str>> {
    crate::json::string_literal(quoted)
}

/// A present value's raw text, `null` included.
pub(super) fn raw<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// A raw value that is not an object or an array: one whose text holds no
/// key the reader has not checked (the whole-tree parse refuses repeated
/// keys at any depth).
pub(super) fn scalar(r: &RawValue) -> bool {
    !r.get().starts_with(['{', '['])
}

/// Such a chunk, read: its template fields, and each choice's index (if
/// given) and entries.
pub struct Read<'a> {
    /// The template fields present, in [`super::template::FIELDS`] order.
    pub template: [Option<&'a RawValue>; 7],
    pub choices: Vec<(Option<u32>, Vec<Delta<'a>>)>,
    /// For one choice with one entry whose `arguments` is a string: where
    /// the string's content (quotes excluded) is in the chunk.
    pub span: Option<(usize, usize)>,
    /// Where the `obfuscation` string's content (quotes excluded) is in
    /// the chunk, when there is one.
    pub obfuscation: Option<(usize, usize)>,
}

/// Reads `data` when it is such a chunk, with at least one choice, each
/// naming no role but one `sent(choice index, role)` accepts (the role the
/// agent was already sent, which the whole-tree path leaves out too).
pub fn read(data: &[u8], sent: impl Fn(u32, &str) -> bool) -> Option<Read<'_>> {
    // Checked once as a whole (fast on ASCII), not string by string.
    let text = std::str::from_utf8(data).ok()?;
    let chunk: DeltaChunk = from_object(text)?;
    if chunk.choices.is_empty() {
        return None;
    }
    // A string, null or nothing.
    let obfuscation = match chunk.obfuscation {
        None => None,
        Some(r) if r.get() == "null" => None,
        Some(r) => {
            string(r.get())?;
            let at = r.get().as_ptr() as usize - text.as_ptr() as usize;
            Some((at + 1, at + r.get().len() - 1))
        }
    };
    let template = [
        chunk.id,
        chunk.object,
        chunk.created,
        chunk.model,
        chunk.system_fingerprint,
        chunk.service_tier,
        chunk.provider,
    ];
    if !template.iter().flatten().all(|r| scalar(r)) {
        return None;
    }
    let mut span = None;
    let one = chunk.choices.len() == 1;
    let mut choices = Vec::with_capacity(chunk.choices.len());
    for (pos, Braced(ch)) in chunk.choices.into_iter().enumerate() {
        if let Some(role) = &ch.delta.0.role {
            let at = ch.index.or(u32::try_from(pos).ok())?;
            if !sent(at, &role.0) {
                return None;
            }
        }
        let calls = ch.delta.0.tool_calls;
        let one = one && calls.len() == 1;
        let mut entries = Vec::with_capacity(calls.len());
        for Braced(e) in calls {
            let (name, raw_args) = match e.function {
                Some(Braced(f)) => (f.name, f.arguments),
                None => (None, None),
            };
            let arguments = match raw_args {
                None => Cow::Borrowed(""),
                Some(r) if r.get() == "null" => Cow::Borrowed(""),
                // Not a string: the whole-tree path decides.
                Some(r) if !r.get().starts_with('"') => return None,
                Some(r) => {
                    if one {
                        let at = r.get().as_ptr() as usize - text.as_ptr() as usize;
                        span = Some((at + 1, at + r.get().len() - 1));
                    }
                    string(r.get())?
                }
            };
            entries.push(Delta {
                index: e.index,
                id: e.id.map(|t| t.0),
                kind: e.kind.map(|t| t.0),
                name: name.map(|t| t.0),
                arguments,
                extra: serde_json::Map::new(),
            });
        }
        choices.push((ch.index, entries));
    }
    Some(Read {
        template,
        choices,
        span,
        obfuscation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_fragment_is_read_and_borrowed() {
        let d = br#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":null,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a"}}]},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"xy"}"#;
        let r = read(d, |_, _| false).unwrap();
        assert_eq!(r.template[0].unwrap().get(), "\"c1\"");
        assert_eq!(r.template[4].unwrap().get(), "null");
        assert!(r.template[6].is_none());
        let (index, e) = &r.choices[0];
        assert_eq!(*index, Some(0));
        assert_eq!(e[0].index, Some(0));
        assert_eq!(e[0].arguments, "{\"a");
        let (s, end) = r.span.unwrap();
        assert_eq!(&d[s..end], br#"{\"a"#);
        let (s, end) = r.obfuscation.unwrap();
        assert_eq!(&d[s..end], b"xy");
        let d = br#"{"choices":[{"content_filter_results":{},"delta":{"tool_calls":[{"id":"x","type":"function","function":{"name":"get","arguments":"ab"}}]}}]}"#;
        let r = read(d, |_, _| false).unwrap();
        let e = &r.choices[0].1;
        assert!(matches!(e[0].name, Some(Cow::Borrowed("get"))));
        assert!(matches!(e[0].arguments, Cow::Borrowed("ab")));
        let d = br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}},{"index":1,"function":{"arguments":null}}]}}]}"#;
        let r = read(d, |_, _| false).unwrap();
        assert!(r.span.is_none(), "two entries: no single span");
        assert_eq!(r.choices[0].1[1].arguments, "");
    }

    #[test]
    fn a_role_is_read_only_when_it_was_sent_before() {
        let d = br#"{"choices":[{"index":1,"delta":{"content":null,"role":"assistant","tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}]}"#;
        assert!(
            read(d, |_, _| false).is_none(),
            "not sent yet: the tree writes it"
        );
        assert!(read(d, |i, r| i == 1 && r == "assistant").is_some());
        assert!(
            read(d, |i, r| i == 0 && r == "assistant").is_none(),
            "another choice's"
        );
        assert!(read(d, |_, r| r == "tool").is_none(), "another role");
    }

    #[test]
    fn anything_outside_the_shape_is_left_to_the_full_parse() {
        for d in [
            // a repeated key, at each level
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"a","arguments":"b"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"index":1}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[],"tool_calls":[]}}]}"#,
            r#"{"choices":[{"index":0,"index":0,"delta":{"tool_calls":[]}}]}"#,
            r#"{"model":"a","model":"b","choices":[{"delta":{"tool_calls":[]}}]}"#,
            // keys not named here, or folding to one
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"a","Arguments":"b"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[]},"Finish_Reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"extra_content":{}}]}}]}"#,
            r#"{"x_groq":{},"choices":[{"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[],"function_call":{}}}]}"#,
            // Azure's filter results, when they say something
            r#"{"choices":[{"content_filter_results":{"hate":{"filtered":false}},"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"content_filter_results":[],"delta":{"tool_calls":[]}}]}"#,
            // something to send or to decide
            r#"{"choices":[{"delta":{"tool_calls":[]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[],"content":"hi"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[],"content":""}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[],"role":"assistant"}}]}"#,
            r#"{"usage":{"total_tokens":1},"choices":[{"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"delta":{"content":null}}]}"#,
            r#"{"choices":[]}"#,
            // values of another type
            r#"{"choices":[{"delta":{"tool_calls":[]}}],"obfuscation":["a"]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{"a":1}}}]}}]}"#,
            r#"{"choices":[{"index":1.0,"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[]}}]} x"#,
            // an object written as an array of its fields
            r#"[null,null,null,null,null,null,null,[{"delta":{"tool_calls":[]}}]]"#,
            r#"{"choices":[[0,{"tool_calls":[]}]]}"#,
            r#"{"choices":[{"delta":[[]]}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[[0,"x","function",{"name":"a"}]]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":["a","{}"]}]}}]}"#,
            // an envelope field that is not a scalar
            r#"{"model":{"a":1,"a":2},"choices":[{"delta":{"tool_calls":[]}}]}"#,
            r#"{"provider":["x"],"choices":[{"delta":{"tool_calls":[]}}]}"#,
        ] {
            assert!(read(d.as_bytes(), |_, _| false).is_none(), "{d}");
        }
    }
}
