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

/// The chunk fields copied into the template of the chunks toolgate writes.
pub const TEMPLATE: [&str; 7] = [
    "id",
    "object",
    "created",
    "model",
    "system_fingerprint",
    "service_tier",
    "provider",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeltaChunk<'a> {
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
    pub choices: Vec<DeltaChoice<'a>>,
    #[serde(default, rename = "usage")]
    _usage: Option<Null>,
    /// OpenAI's padding against length side channels; dropped with the chunk.
    #[serde(borrow, default, rename = "obfuscation")]
    _obfuscation: Option<Text<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeltaChoice<'a> {
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(borrow)]
    delta: Calls<'a>,
    #[serde(default, rename = "finish_reason")]
    _finish_reason: Option<Null>,
    #[serde(default, rename = "native_finish_reason")]
    _native_finish_reason: Option<Null>,
    #[serde(default, rename = "logprobs")]
    _logprobs: Option<Null>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Calls<'a> {
    #[serde(borrow)]
    tool_calls: Vec<Entry<'a>>,
    #[serde(default, rename = "content")]
    _content: Option<Null>,
    #[serde(default, rename = "role")]
    _role: Option<Null>,
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
    function: Option<Function<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Function<'a> {
    #[serde(borrow, default)]
    name: Option<Text<'a>>,
    #[serde(borrow, default)]
    arguments: Option<Text<'a>>,
}

/// JSON `null` only (an `Option<Null>` is absent, null, or an error).
struct Null;

impl<'de> Deserialize<'de> for Null {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Null, D::Error> {
        <()>::deserialize(d).map(|()| Null)
    }
}

/// A string, borrowed unless it had escapes.
struct Text<'a>(Cow<'a, str>);

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

/// A present value's raw text, `null` included.
fn raw<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Reads `data` when it is such a chunk, with at least one choice.
pub fn read(data: &[u8]) -> Option<DeltaChunk<'_>> {
    // Checked once as a whole (fast on ASCII), not string by string.
    let text = std::str::from_utf8(data).ok()?;
    let chunk: DeltaChunk = serde_json::from_str(text).ok()?;
    (!chunk.choices.is_empty()).then_some(chunk)
}

impl<'a> DeltaChunk<'a> {
    /// The template fields present, in [`TEMPLATE`] order.
    pub fn template(&self) -> [Option<&'a RawValue>; 7] {
        [
            self.id,
            self.object,
            self.created,
            self.model,
            self.system_fingerprint,
            self.service_tier,
            self.provider,
        ]
    }
}

impl<'a> DeltaChoice<'a> {
    /// The choice's entries, as the assembler takes them.
    pub fn entries(self) -> impl Iterator<Item = Delta<'a>> {
        self.delta.tool_calls.into_iter().map(|e| {
            let (name, arguments) = match e.function {
                Some(f) => (f.name, f.arguments),
                None => (None, None),
            };
            Delta {
                index: e.index,
                id: e.id.map(|t| t.0),
                kind: e.kind.map(|t| t.0),
                name: name.map(|t| t.0),
                arguments: arguments.map(|t| t.0).unwrap_or_default(),
                extra: serde_json::Map::new(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_fragment_is_read_and_borrowed() {
        let d = br#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":null,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a"}}]},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"xy"}"#;
        let c = read(d).unwrap();
        assert_eq!(c.template()[0].unwrap().get(), "\"c1\"");
        assert_eq!(c.template()[4].unwrap().get(), "null");
        assert!(c.template()[6].is_none());
        let mut choices = c.choices;
        let ch = choices.remove(0);
        assert_eq!(ch.index, Some(0));
        let e: Vec<Delta> = ch.entries().collect();
        assert_eq!(e[0].index, Some(0));
        assert_eq!(e[0].arguments, "{\"a");
        let d = br#"{"choices":[{"delta":{"tool_calls":[{"id":"x","type":"function","function":{"name":"get","arguments":"ab"}}]}}]}"#;
        let e: Vec<Delta> = read(d).unwrap().choices.remove(0).entries().collect();
        assert!(matches!(e[0].name, Some(Cow::Borrowed("get"))));
        assert!(matches!(e[0].arguments, Cow::Borrowed("ab")));
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
            // something to send or to decide
            r#"{"choices":[{"delta":{"tool_calls":[]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[],"content":"hi"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[],"content":""}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[],"role":"assistant"}}]}"#,
            r#"{"usage":{"total_tokens":1},"choices":[{"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"delta":{"content":null}}]}"#,
            r#"{"choices":[]}"#,
            // values of another type
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{"a":1}}}]}}]}"#,
            r#"{"choices":[{"index":1.0,"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[]}}]} x"#,
        ] {
            assert!(read(d.as_bytes()).is_none(), "{d}");
        }
    }
}
