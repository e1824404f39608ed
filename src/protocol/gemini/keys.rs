//! The keys of Google's JSON, each read under its two spellings
//! (`functionCall`, `function_call`) as one; an object holding both, or a
//! key that only folds to one of them (`FunctionCall`), is refused.

use serde_json::{Map, Value};

/// A key: its camelCase and snake_case spellings (the same for one word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key(pub &'static str, pub &'static str);

pub const CANDIDATES: Key = Key("candidates", "candidates");
pub const CONTENT: Key = Key("content", "content");
pub const CONTENTS: Key = Key("contents", "contents");
pub const PARTS: Key = Key("parts", "parts");
pub const ROLE: Key = Key("role", "role");
pub const TEXT: Key = Key("text", "text");
pub const THOUGHT: Key = Key("thought", "thought");
pub const FUNCTION_CALL: Key = Key("functionCall", "function_call");
pub const FUNCTION_RESPONSE: Key = Key("functionResponse", "function_response");
pub const EXECUTABLE_CODE: Key = Key("executableCode", "executable_code");
pub const CODE_RESULT: Key = Key("codeExecutionResult", "code_execution_result");
pub const INLINE_DATA: Key = Key("inlineData", "inline_data");
pub const FILE_DATA: Key = Key("fileData", "file_data");
pub const THOUGHT_SIGNATURE: Key = Key("thoughtSignature", "thought_signature");
pub const PART_METADATA: Key = Key("partMetadata", "part_metadata");
pub const VIDEO_METADATA: Key = Key("videoMetadata", "video_metadata");
pub const MEDIA_RESOLUTION: Key = Key("mediaResolution", "media_resolution");
pub const NAME: Key = Key("name", "name");
pub const ARGS: Key = Key("args", "args");
pub const ID: Key = Key("id", "id");
pub const RESPONSE: Key = Key("response", "response");
pub const PARTIAL_ARGS: Key = Key("partialArgs", "partial_args");
pub const WILL_CONTINUE: Key = Key("willContinue", "will_continue");
pub const FINISH_REASON: Key = Key("finishReason", "finish_reason");
pub const INDEX: Key = Key("index", "index");
pub const USAGE: Key = Key("usageMetadata", "usage_metadata");
pub const MODEL_VERSION: Key = Key("modelVersion", "model_version");
pub const RESPONSE_ID: Key = Key("responseId", "response_id");
pub const PROMPT_FEEDBACK: Key = Key("promptFeedback", "prompt_feedback");
pub const ERROR: Key = Key("error", "error");
pub const SYSTEM: Key = Key("systemInstruction", "system_instruction");
pub const TOOLS: Key = Key("tools", "tools");
pub const TOOL_CONFIG: Key = Key("toolConfig", "tool_config");
pub const DECLARATIONS: Key = Key("functionDeclarations", "function_declarations");
pub const PARAMETERS: Key = Key("parameters", "parameters");
pub const JSON_SCHEMA: Key = Key("parametersJsonSchema", "parameters_json_schema");
pub const CALLING: Key = Key("functionCallingConfig", "function_calling_config");
pub const ALLOWED: Key = Key("allowedFunctionNames", "allowed_function_names");
pub const MODE: Key = Key("mode", "mode");
pub const GENERATION: Key = Key("generationConfig", "generation_config");
pub const MIME: Key = Key("responseMimeType", "response_mime_type");
pub const RESPONSE_SCHEMA: Key = Key("responseSchema", "response_schema");
pub const RESPONSE_JSON_SCHEMA: Key = Key("responseJsonSchema", "response_json_schema");
pub const CANDIDATE_COUNT: Key = Key("candidateCount", "candidate_count");

impl Key {
    /// Whether `k` is this key under either spelling.
    pub fn is(self, k: &str) -> bool {
        k == self.0 || k == self.1
    }

    /// The key's loose form: caseless, without underscores.
    fn loose(k: &str) -> String {
        crate::fold::fold(k).replace('_', "")
    }
}

/// Why an object cannot be read one way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ambiguous {
    /// Both spellings of a key.
    Both(&'static str),
    /// A spelling that only folds to a known key.
    Folded(&'static str),
}

/// `m[key]` under either spelling.
pub fn get(m: &Map<String, Value>, key: Key) -> Result<Option<&Value>, Ambiguous> {
    match (
        m.get(key.0),
        (key.0 != key.1).then(|| m.get(key.1)).flatten(),
    ) {
        (Some(_), Some(_)) => Err(Ambiguous::Both(key.0)),
        (a, b) => Ok(a.or(b)),
    }
}

/// `m[key]` for writing, under the spelling the object uses (camelCase
/// when it has neither).
pub fn get_mut(m: &mut Map<String, Value>, key: Key) -> Option<&mut Value> {
    let k = if m.contains_key(key.1) { key.1 } else { key.0 };
    m.get_mut(k)
}

/// The spelling of `key` the object uses (camelCase when it has neither).
pub fn spelled(m: &Map<String, Value>, key: Key) -> &'static str {
    if m.contains_key(key.1) {
        key.1
    } else {
        key.0
    }
}

/// Checks that no key of `m` is both spellings of one of `known`, or a
/// spelling of one that differs from both only by case or underscores.
pub fn guard(m: &Map<String, Value>, known: &[Key]) -> Result<(), Ambiguous> {
    for k in known {
        get(m, *k)?;
    }
    for key in m.keys() {
        if known.iter().any(|k| k.is(key)) {
            continue;
        }
        let loose = Key::loose(key);
        if let Some(k) = known.iter().find(|k| Key::loose(k.0) == loose) {
            return Err(Ambiguous::Folded(k.0));
        }
    }
    Ok(())
}

/// Whether `key` is a spelling of one of `known`.
pub fn known(key: &str, known: &[Key]) -> Option<Key> {
    known.iter().copied().find(|k| k.is(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn both_spellings_read_as_one_key_and_together_are_refused() {
        let camel = map(json!({"functionCall": {"name": "a"}}));
        let snake = map(json!({"function_call": {"name": "b"}}));
        assert_eq!(get(&camel, FUNCTION_CALL).unwrap().unwrap()["name"], "a");
        assert_eq!(get(&snake, FUNCTION_CALL).unwrap().unwrap()["name"], "b");
        let both = map(json!({"functionCall": {}, "function_call": {}}));
        assert_eq!(
            get(&both, FUNCTION_CALL),
            Err(Ambiguous::Both("functionCall"))
        );
        assert!(guard(&both, &[FUNCTION_CALL]).is_err());
    }

    #[test]
    fn a_spelling_that_only_folds_to_a_key_is_refused() {
        for k in [
            "FunctionCall",
            "functioncall",
            "FUNCTION_CALL",
            "function__call",
        ] {
            let m = map(json!({ k: {} }));
            assert_eq!(
                guard(&m, &[FUNCTION_CALL, TEXT]),
                Err(Ambiguous::Folded("functionCall")),
                "{k}"
            );
        }
        let fine = map(json!({"text": "x", "somethingElse": 1}));
        assert_eq!(guard(&fine, &[FUNCTION_CALL, TEXT]), Ok(()));
    }
}
