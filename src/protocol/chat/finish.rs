//! A chunk that finishes one choice and says nothing else, read typed and
//! borrowed: the last chunk of every turn, without building a tree.
//!
//! As narrow as [`super::delta`]: every key at every level is one named
//! here, exactly, at most once; the envelope's fields are scalars; the
//! delta holds at most a role and a text (a string or null); there is one
//! choice, and its `finish_reason` is a string. Anything else (usage,
//! logprobs, a refusal, reasoning, a key that only folds to a known one)
//! goes the whole-tree way. No key can name a call here, so the prefilter's
//! flag (a finish of `"tool_calls"` sets it) does not keep a chunk from this
//! reader. The rewriter lets such a chunk go on as it came unless its
//! finish must change (see [`super::stream`]).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::delta::{raw, scalar, Null, Text};
use crate::json::{from_object, Braced};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FinishChunk<'a> {
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
    choices: [Braced<FinishChoice<'a>>; 1],
    #[serde(default, rename = "usage")]
    _usage: Option<Null>,
    #[serde(borrow, default, rename = "obfuscation")]
    _obfuscation: Option<Text<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FinishChoice<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default)]
    delta: Option<Braced<Quiet<'a>>>,
    #[serde(borrow)]
    finish_reason: Text<'a>,
    #[serde(borrow, default, rename = "native_finish_reason")]
    _native_finish_reason: Option<Text<'a>>,
    #[serde(default, rename = "logprobs")]
    _logprobs: Option<Null>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Quiet<'a> {
    #[serde(borrow, default)]
    content: Option<Text<'a>>,
    #[serde(borrow, default)]
    role: Option<Text<'a>>,
}

/// Such a chunk, read.
pub struct Finish<'a> {
    /// The template fields present, in [`super::template::FIELDS`] order.
    pub template: [Option<&'a RawValue>; 7],
    /// The choice's `index`, if given.
    pub index: Option<u32>,
    pub reason: Cow<'a, str>,
    /// Its delta carries text.
    pub text: bool,
    /// The role its delta names.
    pub role: Option<Cow<'a, str>>,
}

/// Reads `data` when it is such a chunk.
pub fn read(data: &[u8]) -> Option<Finish<'_>> {
    let text = std::str::from_utf8(data).ok()?;
    let chunk: FinishChunk = from_object(text)?;
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
    let [Braced(choice)] = chunk.choices;
    let (content, role) = match choice.delta {
        Some(Braced(d)) => (d.content, d.role),
        None => (None, None),
    };
    Some(Finish {
        template,
        index: choice.index,
        reason: choice.finish_reason.0,
        text: content.is_some_and(|t| !t.0.is_empty()),
        role: role.map(|r| r.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_finish_is_read() {
        let d = br#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null,"obfuscation":"ab"}"#;
        let f = read(d).unwrap();
        assert_eq!(f.template[0].unwrap().get(), "\"c1\"");
        assert!(f.template[6].is_none());
        assert_eq!(f.index, Some(0));
        assert_eq!(f.reason, "tool_calls");
        assert!(!f.text);
        let f = read(br#"{"choices":[{"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop","native_finish_reason":"STOP"}]}"#).unwrap();
        assert_eq!(f.index, None);
        assert!(f.text);
        assert_eq!(f.role.as_deref(), Some("assistant"));
        let f =
            read(br#"{"choices":[{"finish_reason":"length","delta":{"content":null}}]}"#).unwrap();
        assert!(!f.text);
    }

    #[test]
    fn anything_outside_the_shape_is_left_to_the_full_parse() {
        for d in [
            // a repeated key, at each level
            r#"{"choices":[{"delta":{},"finish_reason":"stop","finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[{"delta":{"content":"a","content":"b"},"finish_reason":"stop"}]}"#,
            r#"{"model":"a","model":"b","choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            // keys not named here, or folding to one
            r#"{"choices":[{"delta":{},"finish_reason":"stop","Finish_Reason":"x"}]}"#,
            r#"{"Choices":[],"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"x_groq":{},"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"error":null,"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"message":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{"refusal":"no"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{"reasoning_details":[]},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":null},"finish_reason":"stop"}]}"#,
            // something else to send or to decide
            r#"{"usage":{"total_tokens":1},"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop","logprobs":{"content":[]}}]}"#,
            r#"{"choices":[{"delta":{"content":[{"type":"text","text":"a"}]},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{}}]}"#,
            r#"{"choices":[]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"},{"delta":{},"finish_reason":"stop"}]}"#,
            // an object written as an array of its fields
            r#"[null,null,null,null,null,null,null,[{"delta":{},"finish_reason":"stop"}]]"#,
            r#"{"choices":[[0,{},"stop"]]}"#,
            // values of another type
            r#"{"model":{"a":1,"a":2},"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"id":["c"],"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":[],"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"index":-1,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":1}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]} x"#,
        ] {
            assert!(read(d.as_bytes()).is_none(), "{d}");
        }
    }
}
