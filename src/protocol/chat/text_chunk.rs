//! A chunk of text only, read typed and borrowed: what the prefilter cannot
//! pass unparsed (text with a non-ASCII byte or a `\u` escape: any answer
//! with an accent, a curly quote or a dash) no longer builds a tree.
//!
//! The shape is narrow on purpose. Every key at every level must be one
//! named here, exactly, at most once; the delta holds text (`content`,
//! `refusal`, `reasoning_content`, `reasoning`) and a role only, its calls
//! null or absent, and the finish and usage are null or absent. Values
//! toolgate does not read (`logprobs`, Azure's filter results) are checked
//! strict (no repeated key at any depth), since they go on as they came.
//! Whatever falls outside goes to the whole-tree parse, which decides as
//! before. For a chunk that fits, the whole-tree path changes nothing and
//! sends it as it came, noting its roles and whether it held text; this
//! reader leads to the same.

use serde::Deserialize;

use super::delta::{Null, Text};
use crate::json::{from_object, AnyStr, Braced, Checked};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextChunk<'a> {
    #[serde(default, rename = "id")]
    _id: Option<Checked>,
    #[serde(default, rename = "object")]
    _object: Option<Checked>,
    #[serde(default, rename = "created")]
    _created: Option<Checked>,
    #[serde(default, rename = "model")]
    _model: Option<Checked>,
    #[serde(default, rename = "system_fingerprint")]
    _system_fingerprint: Option<Checked>,
    #[serde(default, rename = "service_tier")]
    _service_tier: Option<Checked>,
    #[serde(default, rename = "provider")]
    _provider: Option<Checked>,
    #[serde(default, rename = "obfuscation")]
    _obfuscation: Option<Checked>,
    #[serde(default, rename = "usage")]
    _usage: Option<Null>,
    #[serde(borrow)]
    choices: Vec<Braced<TextChoice<'a>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextChoice<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow)]
    delta: Braced<TextDelta<'a>>,
    #[serde(default, rename = "finish_reason")]
    _finish_reason: Option<Null>,
    #[serde(default, rename = "native_finish_reason")]
    _native_finish_reason: Option<Null>,
    #[serde(default, rename = "logprobs")]
    _logprobs: Option<Checked>,
    #[serde(default, rename = "content_filter_results")]
    _filter: Option<Checked>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextDelta<'a> {
    #[serde(default)]
    content: Option<AnyStr>,
    #[serde(borrow, default)]
    role: Option<Text<'a>>,
    #[serde(default, rename = "refusal")]
    _refusal: Option<AnyStr>,
    #[serde(default, rename = "reasoning_content")]
    _reasoning_content: Option<AnyStr>,
    #[serde(default, rename = "reasoning")]
    _reasoning: Option<AnyStr>,
    #[serde(default, rename = "tool_calls")]
    _tool_calls: Option<Null>,
    #[serde(default, rename = "function_call")]
    _function_call: Option<Null>,
}

/// Such a chunk, read: the roles it names by choice, and whether any choice
/// has text in `content`.
pub struct Read<'a> {
    pub roles: Vec<(u32, std::borrow::Cow<'a, str>)>,
    pub text: bool,
}

/// Reads `data` when it is such a chunk.
pub fn read(data: &[u8]) -> Option<Read<'_>> {
    let text = std::str::from_utf8(data).ok()?;
    let chunk: TextChunk = from_object(text)?;
    let mut r = Read {
        roles: Vec::new(),
        text: false,
    };
    for (pos, Braced(ch)) in chunk.choices.into_iter().enumerate() {
        let d = ch.delta.0;
        r.text |= d.content.is_some_and(|c| !c.is_empty());
        if let Some(role) = d.role {
            let at = ch.index.or(u32::try_from(pos).ok())?;
            r.roles.push((at, role.0));
        }
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_chunks_of_every_provider_shape_are_read() {
        let cases = [
            // OpenAI, with accents and padding.
            (
                r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","service_tier":"default","system_fingerprint":"fp","usage":null,"choices":[{"index":0,"delta":{"content":"réponse — “quoted”"},"logprobs":null,"finish_reason":null}],"obfuscation":"ab"}"#,
                true,
            ),
            // Escaped, as Python servers write it.
            (
                r#"{"id":"c","choices":[{"index":0,"delta":{"content":"\u4f60\u597d"},"finish_reason":null}]}"#,
                true,
            ),
            // OpenRouter: provider, the role again, native finish, reasoning.
            (
                r#"{"id":"g","provider":"OpenAI","model":"m","object":"chat.completion.chunk","created":1,"choices":[{"index":0,"delta":{"role":"assistant","content":"é","reasoning":null},"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}"#,
                true,
            ),
            // DeepSeek's reasoning; Azure's filter results; logprobs.
            (
                r#"{"id":"d","choices":[{"index":0,"delta":{"content":"","reasoning_content":"pensée"},"finish_reason":null}]}"#,
                false,
            ),
            (
                r#"{"id":"a","choices":[{"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}},"delta":{"content":"ü"},"finish_reason":null,"index":0}]}"#,
                true,
            ),
            (
                r#"{"id":"l","choices":[{"index":0,"delta":{"content":"ü"},"logprobs":{"content":[{"token":"ü","logprob":-0.1}]},"finish_reason":null}]}"#,
                true,
            ),
            (
                r#"{"choices":[{"delta":{"content":null,"tool_calls":null,"refusal":"non"}}]}"#,
                false,
            ),
        ];
        for (data, text) in cases {
            let r = read(data.as_bytes());
            assert!(r.as_ref().is_some_and(|r| r.text == text), "{data}");
        }
        let r = read(
            r#"{"choices":[{"index":2,"delta":{"role":"assistant"}},{"delta":{"role":"tool"}}]}"#
                .as_bytes(),
        );
        let roles: Vec<(u32, String)> = r
            .map(|r| {
                r.roles
                    .into_iter()
                    .map(|(c, s)| (c, s.into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            roles,
            [(2, "assistant".to_string()), (1, "tool".to_string())]
        );
    }

    #[test]
    fn anything_else_is_left_to_the_tree() {
        for data in [
            // Calls, spelled or escaped; a finish; usage; an error.
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"é"}}]}}]}"#,
            r#"{"choices":[{"delta":{"content":"é","tool\u005fcalls":[]}}]}"#,
            r#"{"choices":[{"delta":{"content":"é","function_call":{"name":"x"}}}]}"#,
            r#"{"choices":[{"delta":{"content":"é","TOOL_CALLS":[]}}]}"#,
            r#"{"choices":[{"delta":{"content":"é","tool_callſ":[]}}]}"#,
            r#"{"choices":[{"delta":{"content":"é"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"total_tokens":1}}"#,
            r#"{"error":{"message":"é"},"choices":[]}"#,
            // Repeated keys, at any depth; other members; other shapes.
            r#"{"choices":[{"delta":{"content":"é","content":"x"}}]}"#,
            r#"{"choices":[{"delta":{"content":"é"},"logprobs":{"a":1,"a":2}}]}"#,
            r#"{"model":{"a":1,"a":2},"choices":[{"delta":{"content":"é"}}]}"#,
            r#"{"choices":[{"delta":{"content":"é","reasoning_details":[{"id":"t","type":"reasoning.encrypted"}]}}]}"#,
            r#"{"choices":[{"delta":{"content":"é","audio":{}}}]}"#,
            r#"{"choices":[{"delta":{"content":["é"]}}]}"#,
            r#"{"choices":[{"delta":{"role":5}}]}"#,
            r#"{"choices":[{"index":-1,"delta":{"content":"é"}}]}"#,
            r#"{"choices":[["é"]]}"#,
            r#"{"choices":{}}"#,
            "[1]",
            "not json é",
        ] {
            assert!(read(data.as_bytes()).is_none(), "{data}");
        }
    }
}
