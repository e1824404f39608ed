//! A non-streamed Messages body: find the call blocks of `content`, then
//! drop the withheld ones.
//!
//! The body must read one way only: a key repeated anywhere, or one that
//! differs from a key toolgate reads only by case or spelling, fails it.
//! Blocks that stay are written back as they came. When calls were withheld
//! and none remains, a text block with the neutral message ends the content
//! and a `tool_use` stop reason becomes `end_turn`.

use serde_json::value::RawValue;
use serde_json::Value;

use super::{call_of, classify, hosted_call, neutral_block, BlockClass, BLOCK_KEYS};
use crate::call::{Call, Release};
use crate::error::Error;
use crate::json::{self, write_key, Obj, Sink};
use crate::protocol::malformed;
use crate::protocol::{fold_guard, map_guard};

const TOP: [&str; 4] = ["type", "content", "stop_reason", "error"];

/// A parsed message body, borrowed from its text.
pub struct Body<'a> {
    top: Obj<'a>,
    blocks: Vec<&'a RawValue>,
    /// For each block, whether it is a call (in `calls` order).
    is_call: Vec<bool>,
    calls: Vec<Call>,
    /// The calls' ids, kept when the calls are forgotten.
    call_ids: Vec<String>,
    /// The message's id (a thread's later request continues from it).
    id: String,
    hosted: Vec<Call>,
}

impl<'a> Body<'a> {
    /// Parses `text` and finds its call blocks. A body of type `error` is the
    /// provider's error.
    pub fn parse(text: &'a str, max_call_bytes: usize) -> Result<Body<'a>, Error> {
        // Read once strictly (repeated keys anywhere fail), then borrowed.
        let tree = json::strict_value(text.as_bytes())
            .map_err(|_| malformed("response is not unambiguous JSON"))?;
        let top: Obj =
            serde_json::from_str(text).map_err(|_| malformed("response is not a JSON object"))?;
        fold_guard(top.ambiguous(&TOP))?;
        if tree.get("type").and_then(Value::as_str) == Some("error") {
            return Err(Error::UpstreamEvent(bytes::Bytes::copy_from_slice(
                text.as_bytes(),
            )));
        }
        let blocks = match top.present("content") {
            None => Vec::new(),
            Some(c) => json::array(c).ok_or_else(|| malformed("content is not an array"))?,
        };
        let parsed = tree
            .get("content")
            .and_then(Value::as_array)
            .map_or(&[][..], |a| a);
        let mut is_call = Vec::with_capacity(blocks.len());
        let mut calls = Vec::new();
        let mut hosted = Vec::new();
        for (raw, v) in blocks.iter().zip(parsed) {
            let Value::Object(m) = v else {
                return Err(malformed("a content block is not an object"));
            };
            map_guard(m, &BLOCK_KEYS)?;
            let t = m
                .get("type")
                .and_then(Value::as_str)
                .ok_or_else(|| malformed("a content block has no type"))?;
            match classify(t) {
                BlockClass::Call => {
                    let input = Obj::of(raw)
                        .and_then(|o| o.present("input").map(|i| i.get().to_string()))
                        .unwrap_or_else(|| "{}".to_string());
                    calls.push(call_of(m, input, max_call_bytes)?);
                    is_call.push(true);
                }
                class => {
                    if class == BlockClass::Hosted {
                        hosted.push(hosted_call(m));
                    }
                    is_call.push(false);
                }
            }
        }
        let id = tree
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        Ok(Body {
            top,
            blocks,
            is_call,
            call_ids: calls.iter().map(|c| c.id.clone()).collect(),
            calls,
            id,
            hosted,
        })
    }

    /// Writes the body without the withheld calls; false, with nothing
    /// written, when every call is allowed and the body goes out as it came.
    pub fn rewrite(&self, verdicts: &[Release], neutral: &str, out: &mut impl Sink) -> bool {
        let mut n = 0;
        let keep: Vec<bool> = self
            .is_call
            .iter()
            .map(|&call| {
                if !call {
                    return true;
                }
                n += 1;
                Release::at(verdicts, n - 1).allowed()
            })
            .collect();
        let withheld = keep.iter().filter(|k| !**k).count();
        if withheld == 0 {
            return false;
        }
        let none_left = withheld == n;
        out.text("{");
        for (i, (k, v)) in self.top.entries.iter().enumerate() {
            if i > 0 {
                out.text(",");
            }
            write_key(out, k);
            match k.as_ref() {
                "content" => {
                    out.text("[");
                    let mut first = true;
                    for (b, _) in self.blocks.iter().zip(&keep).filter(|(_, k)| **k) {
                        if !first {
                            out.text(",");
                        }
                        first = false;
                        out.raw(b);
                    }
                    if none_left {
                        if !first {
                            out.text(",");
                        }
                        out.text(&neutral_block(neutral).to_string());
                    }
                    out.text("]");
                }
                "stop_reason" if none_left && v.get() == "\"tool_use\"" => {
                    out.text("\"end_turn\"");
                }
                _ => out.raw(v),
            }
        }
        out.text("}");
        true
    }
}

impl crate::protocol::Complete for Body<'_> {
    fn usage(&self) -> crate::protocol::usage::Usage {
        crate::protocol::usage::Usage::of_top(&self.top)
    }
    fn calls(&self) -> &[Call] {
        &self.calls
    }
    fn hosted(&self) -> &[Call] {
        &self.hosted
    }
    fn resumption(
        &self,
        text: &str,
        verdicts: &[Release],
        result: &str,
    ) -> Option<crate::protocol::Resumption> {
        super::follow::whole(text, verdicts, result)
    }
    fn forget_calls(&mut self) {
        self.calls = Vec::new();
    }
    fn id(&self) -> Option<&str> {
        Some(self.id.as_str()).filter(|id| !id.is_empty())
    }
    fn withheld(&self, verdicts: &[Release]) -> Option<crate::protocol::Withheld> {
        let calls: Vec<(String, String)> = self
            .call_ids
            .iter()
            .enumerate()
            .filter(|(i, _)| !Release::at(verdicts, *i).allowed())
            .map(|(_, id)| (id.clone(), "tool_use".to_string()))
            .collect();
        (!calls.is_empty() && !self.id.is_empty()).then(|| crate::protocol::Withheld {
            response_id: self.id.clone(),
            calls,
        })
    }
    fn rewrite(
        &self,
        verdicts: &[Release],
        neutral: &str,
        _id_key: &[u8; 32],
        out: &mut crate::json::Spliced<'_>,
    ) -> bool {
        Body::rewrite(self, verdicts, neutral, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Complete;
    use serde_json::json;

    fn body(stop: &str) -> String {
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"cmd": "rm -rf /"}},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get", "input": {}}
        ], "stop_reason": stop, "stop_sequence": null, "usage": {"input_tokens": 3, "output_tokens": 4}})
        .to_string()
    }

    fn verdicts(allowed: &[bool]) -> Vec<Release> {
        allowed
            .iter()
            .map(|&a| if a { Release::Allow } else { Release::Withhold })
            .collect()
    }

    #[test]
    fn calls_are_found_in_order() {
        let b = body("tool_use");
        let a = Body::parse(&b, 1024).unwrap();
        let seen: Vec<_> = a
            .calls()
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("toolu_1", "shell", r#"{"cmd":"rm -rf /"}"#),
                ("toolu_2", "get", "{}")
            ]
        );
        assert_eq!(a.hosted()[0].name, "web_search");
    }

    #[test]
    fn a_withheld_call_is_removed() {
        let b = body("tool_use");
        let a = Body::parse(&b, 1024).unwrap();
        assert!(!a.rewrite(&verdicts(&[true, true]), "N", &mut String::new()));
        let mut out = String::new();
        assert!(a.rewrite(&verdicts(&[false, true]), "N", &mut out));
        let v: Value = serde_json::from_str(&out).unwrap();
        let types: Vec<_> = v["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["text", "server_tool_use", "tool_use"]);
        assert_eq!(v["stop_reason"], "tool_use");
        assert!(
            !out.contains("rm -rf") && !out.contains("\"toolu_1\""),
            "{out}"
        );
        assert_eq!(v["usage"]["output_tokens"], 4);
    }

    #[test]
    fn when_no_call_remains_the_turn_ends_with_the_neutral_text() {
        let b = body("tool_use");
        let a = Body::parse(&b, 1024).unwrap();
        let mut out = String::new();
        assert!(a.rewrite(&verdicts(&[false, false]), "N", &mut out));
        let v: Value = serde_json::from_str(&out).unwrap();
        let content = v["content"].as_array().unwrap();
        assert_eq!(content.len(), 3);
        assert_eq!(content[2], json!({"type": "text", "text": "N"}));
        assert_eq!(v["stop_reason"], "end_turn");
        let b = body("max_tokens");
        let a = Body::parse(&b, 1024).unwrap();
        let mut out = String::new();
        a.rewrite(&verdicts(&[false, false]), "N", &mut out);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["stop_reason"], "max_tokens");
    }

    #[test]
    fn ambiguous_bodies_fail() {
        for bad in [
            r#"{"type":"message","content":[],"content":[{"type":"tool_use"}]}"#,
            r#"{"type":"message","Content":[]}"#,
            r#"{"type":"message","content":[{"type":"tool_use","name":"a","Name":"b"}]}"#,
            r#"{"type":"message","content":[{"type":"tool_use","input":{"a":1,"a":2}}]}"#,
            r#"{"type":"message","content":{}}"#,
            r#"{"type":"message","content":[5]}"#,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"x"}}"#,
            // Repeated keys in members read no further.
            r#"{"type":"message","content":[],"usage":{"input_tokens":1,"input_tokens":9}}"#,
            r#"{"type":"message","content":[{"type":"text","text":"a","citations":[{"url":"x","url":"y"}]}]}"#,
        ] {
            assert!(Body::parse(bad, 1024).is_err(), "{bad}");
        }
    }
}
