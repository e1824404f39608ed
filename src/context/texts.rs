//! What a request's messages say, by role ([`Texts`]), and one turn of a
//! conversation continued by reference ([`Turn`]): what provenance reads,
//! continued from the earlier turns toolgate remembered.

use serde_json::Value;

use super::{text_len, Source};

/// One turn of a conversation continued by reference: the texts its own
/// request carried (with the calls decided in its answer), and the answer
/// it continued from. A stored response's conversation is its chain of
/// turns: each is kept once, however long the conversation grows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    pub prev: Option<String>,
    pub texts: Texts,
    /// The conversation (the Conversations API) this turn goes on, whose
    /// last turn it becomes once its answer is remembered; not shared, as
    /// the conversation's own record says the same.
    pub conversation: Option<String>,
}

impl Turn {
    pub fn to_json(&self) -> Value {
        serde_json::json!({"prev": self.prev, "texts": self.texts.to_json()})
    }

    pub fn from_json(v: &Value) -> Option<Turn> {
        let prev = match v.get("prev")? {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            _ => return None,
        };
        Some(Turn {
            prev,
            texts: Texts::from_json(v.get("texts")?)?,
            conversation: None,
        })
    }

    /// The bytes it holds, about.
    pub fn weight(&self) -> usize {
        self.texts.weight() + self.prev.as_ref().map_or(0, String::len)
    }
}

/// What the request's messages say, by role (each protocol reads its own).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Texts {
    pub system: String,
    pub first_user: Option<String>,
    pub last_user: Option<String>,
    pub user: String,
    pub tool: String,
    /// Where each tool result lies in `tool`, with its call id.
    pub tool_results: Vec<(std::ops::Range<usize>, String)>,
    /// The calls of the assistant turns (when all texts are read).
    pub sources: Vec<Source>,
    /// The model also read, in this turn or an earlier one, what toolgate
    /// never read: what the provider stored and the request names (a
    /// Responses `item_reference`, a Gemini context cache) or what it
    /// fetched for the answer (a web search, grounding): the texts are not
    /// the whole history.
    pub unseen: bool,
    /// A tool result, in this turn or an earlier one, holds what toolgate
    /// does not read as text (an image, a document, a file, audio).
    pub unread_results: bool,
}

impl Texts {
    /// Adds one user message's text (read only when a rule reads the texts).
    pub fn push_user(&mut self, text: &str) {
        // Room for the newline too: pushed after a full buffer, it alone
        // would double the buffer (a copy of every message so far, at once).
        self.user.reserve(text.len() + 1);
        self.user.push_str(text);
        self.user.push('\n');
    }

    /// Adds one call of an assistant turn.
    pub fn push_call(&mut self, call_id: &str, name: &str, arguments: &str) {
        self.sources.push(Source {
            call_id: call_id.to_string(),
            name: name.to_string(),
            arguments: arguments.to_string(),
        });
    }

    /// Makes room at once for the text of the tool results `results` (their
    /// content values, however the protocol reads them), so it is not grown,
    /// and copied again, a doubling at a time.
    pub fn reserve_tools<'a>(&mut self, results: impl IntoIterator<Item = &'a Value>) {
        self.tool.reserve(results.into_iter().map(text_len).sum());
    }

    /// These texts as the continuation of `earlier` (a conversation sent by
    /// reference: the earlier turns toolgate remembered, then this
    /// request's own), read as though the conversation had come whole.
    pub fn after(self, earlier: &Texts) -> Texts {
        let shift = earlier.tool.len();
        let mut tool = String::with_capacity(shift + self.tool.len());
        tool.push_str(&earlier.tool);
        tool.push_str(&self.tool);
        let tool_results = earlier
            .tool_results
            .iter()
            .cloned()
            .chain(
                self.tool_results
                    .into_iter()
                    .map(|(r, id)| (r.start + shift..r.end + shift, id)),
            )
            .collect();
        Texts {
            system: if self.system.is_empty() {
                earlier.system.clone()
            } else {
                self.system
            },
            first_user: earlier.first_user.clone().or(self.first_user),
            last_user: self.last_user.or_else(|| earlier.last_user.clone()),
            user: earlier.user.clone() + &self.user,
            tool,
            tool_results,
            sources: earlier
                .sources
                .iter()
                .cloned()
                .chain(self.sources)
                .collect(),
            unseen: earlier.unseen || self.unseen,
            unread_results: earlier.unread_results || self.unread_results,
        }
    }

    /// These texts with `calls` (the calls decided in their answer) as
    /// sources: what a follow-up by reference continues from.
    pub fn answered_with(mut self, calls: &[Source]) -> Texts {
        self.sources.extend_from_slice(calls);
        self
    }

    /// The texts as JSON, for replicas that share them (sealed: they hold
    /// prompts and tool results).
    pub fn to_json(&self) -> Value {
        let results: Vec<Value> = self
            .tool_results
            .iter()
            .map(|(r, id)| serde_json::json!([r.start, r.end, id]))
            .collect();
        let sources: Vec<Value> = self
            .sources
            .iter()
            .map(|s| serde_json::json!([s.call_id, s.name, s.arguments]))
            .collect();
        serde_json::json!({"system": self.system, "first_user": self.first_user,
            "last_user": self.last_user, "user": self.user, "tool": self.tool,
            "results": results, "sources": sources, "unseen": self.unseen,
            "unread_results": self.unread_results})
    }

    /// Texts another replica wrote with [`Texts::to_json`]; `None` for
    /// anything else (a range outside the tool text included).
    pub fn from_json(v: &Value) -> Option<Texts> {
        let text = |k: &str| v.get(k)?.as_str().map(str::to_string);
        let opt = |k: &str| match v.get(k)? {
            Value::Null => Some(None),
            Value::String(s) => Some(Some(s.clone())),
            _ => None,
        };
        let tool = text("tool")?;
        let tool_results = v
            .get("results")?
            .as_array()?
            .iter()
            .map(|r| {
                let (start, end) = (r.get(0)?.as_u64()?, r.get(1)?.as_u64()?);
                let (start, end) = (usize::try_from(start).ok()?, usize::try_from(end).ok()?);
                tool.get(start..end)?;
                Some((start..end, r.get(2)?.as_str()?.to_string()))
            })
            .collect::<Option<Vec<_>>>()?;
        let sources = v
            .get("sources")?
            .as_array()?
            .iter()
            .map(|s| {
                Some(Source {
                    call_id: s.get(0)?.as_str()?.to_string(),
                    name: s.get(1)?.as_str()?.to_string(),
                    arguments: s.get(2)?.as_str()?.to_string(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Texts {
            system: text("system")?,
            first_user: opt("first_user")?,
            last_user: opt("last_user")?,
            user: text("user")?,
            tool,
            tool_results,
            sources,
            // Written by a replica from before the field: it did not know.
            unseen: v.get("unseen").and_then(Value::as_bool).unwrap_or(false),
            unread_results: (v.get("unread_results").and_then(Value::as_bool)).unwrap_or(false),
        })
    }

    /// The bytes the texts hold, about.
    pub fn weight(&self) -> usize {
        let sources: usize = self
            .sources
            .iter()
            .map(|s| s.call_id.len() + s.name.len() + s.arguments.len() + 48)
            .sum();
        self.system.len()
            + self.user.len()
            + self.tool.len()
            + self.tool_results.len() * 48
            + self.first_user.as_ref().map_or(0, String::len)
            + self.last_user.as_ref().map_or(0, String::len)
            + sources
            + 128
    }

    /// Adds one tool result's text.
    pub fn push_tool(&mut self, call_id: &str, text: &str) {
        let start = self.tool.len();
        // With its newline (see `push_user`).
        self.tool.reserve(text.len() + 1);
        self.tool.push_str(text);
        self.tool_results
            .push((start..self.tool.len(), call_id.to_string()));
        self.tool.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::tests::body;
    use crate::protocol::Protocol;
    use serde_json::json;

    #[test]
    fn a_conversation_read_back_turn_by_turn_is_the_conversation_whole() {
        let whole = Protocol::Chat.texts(&body(), true);
        let first = Protocol::Chat.texts(
            &json!({"messages": [{"role": "system", "content": "You are a mail assistant."},
                {"role": "user", "content": [{"type": "text", "text": "Email Bob"}]}]}),
            true,
        );
        let second = Protocol::Chat.texts(
            &json!({"messages": [{"role": "tool", "tool_call_id": "c", "content": "bob@example.com"},
                {"role": "user", "content": "now"}]}),
            true,
        );
        let read = second.after(&first.after(&Texts::default()));
        assert_eq!(read.user, whole.user);
        assert_eq!(read.tool, whole.tool);
        assert_eq!(read.tool_results, whole.tool_results);
        assert_eq!(read.system, whole.system);
        assert_eq!(
            (read.first_user.clone(), read.last_user.clone()),
            (whole.first_user, whole.last_user)
        );
        let turn = Turn {
            prev: Some("resp_1".into()),
            texts: read,
            conversation: None,
        };
        assert_eq!(Turn::from_json(&turn.to_json()), Some(turn));
    }

    #[test]
    fn texts_read_back_from_their_json_as_they_were() {
        let mut t = Protocol::Chat.texts(&body(), true);
        t.push_call("c", "send", "{\"to\":\"bob\"}");
        assert_eq!(Texts::from_json(&t.to_json()).as_ref(), Some(&t));
        let mut bad = t.to_json();
        bad["results"] = json!([[0, 100000, "c"]]);
        assert_eq!(Texts::from_json(&bad), None, "a range outside the text");
    }

    #[test]
    fn tool_results_toolgate_cannot_read_as_text_are_found_in_every_format() {
        let png = "iVBORw0KGgo=";
        let cases = [
            (
                Protocol::Chat,
                json!({"messages": [{"role": "tool", "tool_call_id": "c",
                    "content": [{"type": "image_url", "image_url": {"url": png}}]}]}),
            ),
            (
                Protocol::Responses,
                json!({"input": [{"type": "computer_call_output", "call_id": "c",
                    "output": {"type": "computer_screenshot", "image_url": png}}]}),
            ),
            (
                Protocol::Responses,
                json!({"input": [{"type": "function_call_output", "call_id": "c",
                    "output": [{"type": "input_file", "file_id": "file-1"}]}]}),
            ),
            (
                Protocol::Messages,
                json!({"messages": [{"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": "t", "content": [{"type": "document",
                        "source": {"type": "url", "url": "https://x.example/a.pdf"}}]}]}]}),
            ),
            (
                Protocol::Gemini,
                json!({"contents": [{"role": "user", "parts": [{"functionResponse": {
                    "name": "shot", "response": {}, "parts": [{"inlineData":
                        {"mimeType": "image/png", "data": png}}]}}]}]}),
            ),
        ];
        for (p, body) in cases {
            assert!(p.texts(&body, false).unread_results, "{p:?}: {body}");
        }
        // A tool's own JSON data is its text, whatever its fields say; a
        // user's image is not a tool result.
        for (p, body) in [
            (
                Protocol::Gemini,
                json!({"contents": [{"role": "user", "parts": [{"functionResponse": {
                    "name": "f", "response": {"type": "image", "name": "a.png"}}}]}]}),
            ),
            (
                Protocol::Chat,
                json!({"messages": [{"role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": png}}]},
                    {"role": "tool", "tool_call_id": "c", "content": "{\"type\": \"image\"}"}]}),
            ),
        ] {
            assert!(!p.texts(&body, false).unread_results, "{p:?}: {body}");
        }
    }

    #[test]
    fn a_turn_that_named_a_stored_item_leaves_every_later_turn_unseen() {
        let named = Protocol::Responses.texts(
            &json!({"input": [{"type": "item_reference", "id": "fco_1"},
                {"role": "user", "content": "go on"}]}),
            true,
        );
        assert!(named.unseen);
        let plain = Protocol::Responses.texts(&json!({"input": "and now"}), true);
        assert!(!plain.unseen);
        // Shared between replicas and read back, then continued.
        let shared = Texts::from_json(&named.to_json()).unwrap_or_default();
        assert!(plain.clone().after(&shared).unseen);
        assert!(!plain.clone().after(&Texts::default()).unseen);
        // A record from a replica that did not write the field.
        let mut old = plain.to_json();
        old.as_object_mut().map(|o| o.remove("unseen"));
        assert_eq!(Texts::from_json(&old), Some(plain));
    }
}
