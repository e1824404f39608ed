//! A non-streamed Responses body: find the call items of `output`, then
//! replace the withheld ones by assistant messages at the same position.
//!
//! The body must read one way only: a key repeated anywhere, or one that
//! differs from a key toolgate reads only by case or spelling, fails it.
//! Items that stay are written back as they came; a reasoning item that led
//! only to withheld calls is dropped.

use serde_json::value::RawValue;
use serde_json::Value;

use super::{call_of, class_of, dropped_reasoning, neutral_item, Ids, ItemClass, ITEM_KEYS};
use crate::call::{Call, Release};
use crate::error::Error;
use crate::json::{self, write_key, Obj, Sink};
use crate::protocol::malformed;
use crate::protocol::{fold_guard, map_guard, Withheld};

const TOP: [&str; 4] = ["id", "output", "error", "object"];

/// One item of `output`.
struct Item<'a> {
    raw: &'a RawValue,
    class: ItemClass,
    /// `(item id, call id, item type)` of a call item.
    call: Option<(String, String, String)>,
}

/// A parsed response body, borrowed from its text.
pub struct Body<'a> {
    top: Obj<'a>,
    id: String,
    items: Vec<Item<'a>>,
    calls: Vec<Call>,
    /// Items the provider ran (web search, file search, …).
    hosted: Vec<Call>,
    /// Neutral messages say their text as a `refusal` part (structured output).
    refusal: bool,
}

impl<'a> Body<'a> {
    /// Parses `text` and finds its call items. An `error` object without
    /// an `output` is the provider's error.
    pub fn parse(text: &'a str, max_call_bytes: usize) -> Result<Body<'a>, Error> {
        // Checked strictly once (repeated keys anywhere fail) without a
        // tree, then read borrowed: only `output` becomes a tree. The rest
        // (the request's instructions and tools, echoed) goes on as it came.
        if !json::is_strict(text) {
            return Err(malformed("response is not unambiguous JSON"));
        }
        let top: Obj =
            serde_json::from_str(text).map_err(|_| malformed("response is not a JSON object"))?;
        fold_guard(top.ambiguous(&TOP))?;
        if top.present("error").is_some() && top.present("output").is_none() {
            return Err(Error::UpstreamEvent(bytes::Bytes::copy_from_slice(
                text.as_bytes(),
            )));
        }
        let id = top
            .present("id")
            .and_then(json::string)
            .map(|s| s.into_owned())
            .unwrap_or_default();
        let raws = match top.present("output") {
            None => Vec::new(),
            Some(o) => json::array(o).ok_or_else(|| malformed("output is not an array"))?,
        };
        let mut items = Vec::with_capacity(raws.len());
        let mut calls = Vec::new();
        let mut hosted = Vec::new();
        // The strict tree's items, in the same order as the raw ones.
        let parsed = match top
            .present("output")
            .map(|o| json::strict_value(o.get().as_bytes()))
        {
            Some(Ok(Value::Array(items))) => items,
            _ => Vec::new(),
        };
        let mut seen = std::collections::HashSet::new();
        for (raw, v) in raws.into_iter().zip(&parsed) {
            let Value::Object(m) = v else {
                return Err(malformed("output item is not an object"));
            };
            map_guard(m, &ITEM_KEYS)?;
            let t = m
                .get("type")
                .and_then(Value::as_str)
                .ok_or_else(|| malformed("output item has no type"))?;
            let class = class_of(v);
            let mut call = None;
            if class == ItemClass::Call {
                let c = call_of(v, max_call_bytes)?;
                // One item per call: an id-less call or one shown twice is
                // read differently by clients that key calls by id.
                let item_id = match m.get("id") {
                    Some(Value::String(id)) if !id.is_empty() => id.clone(),
                    _ => return Err(malformed("a call item has no id")),
                };
                if !seen.insert(item_id.clone()) {
                    return Err(malformed("a response's output shows a call twice"));
                }
                call = Some((item_id, c.id.clone(), t.to_string()));
                calls.push(c);
            } else {
                hosted.extend(super::hosted_call(v));
            }
            items.push(Item { raw, class, call });
        }
        Ok(Body {
            top,
            id,
            items,
            calls,
            hosted,
            refusal: false,
        })
    }

    /// Neutral messages say their text as a `refusal` part.
    pub fn refuse(&mut self, yes: bool) {
        self.refusal = yes;
    }

    fn withheld_flags(&self, verdicts: &[Release]) -> Vec<(ItemClass, bool)> {
        let mut n = 0;
        self.items
            .iter()
            .map(|it| {
                if it.class != ItemClass::Call {
                    return (it.class, false);
                }
                let w = !Release::at(verdicts, n).allowed();
                n += 1;
                (it.class, w)
            })
            .collect()
    }

    /// Writes the body with withheld calls replaced; false, with nothing
    /// written, when every call is allowed and the body goes out as it came.
    pub fn rewrite(
        &self,
        verdicts: &[Release],
        neutral: &str,
        ids: &Ids,
        out: &mut impl Sink,
    ) -> bool {
        let flags = self.withheld_flags(verdicts);
        if !flags.iter().any(|(_, w)| *w) {
            return false;
        }
        let dropped = dropped_reasoning(&flags);
        out.text("{");
        for (i, (k, v)) in self.top.entries.iter().enumerate() {
            if i > 0 {
                out.text(",");
            }
            write_key(out, k);
            if k != "output" {
                out.raw(v);
                continue;
            }
            out.text("[");
            let mut first = true;
            for ((it, (_, withheld)), drop) in self.items.iter().zip(&flags).zip(&dropped) {
                if *drop {
                    continue;
                }
                if !first {
                    out.text(",");
                }
                first = false;
                match (&it.call, withheld) {
                    (Some((item_id, _, _)), true) => out.text(
                        &neutral_item(&ids.message_id(item_id), neutral, self.refusal).to_string(),
                    ),
                    _ => out.raw(it.raw),
                }
            }
            out.text("]");
        }
        out.text("}");
        true
    }
}

impl crate::protocol::Complete for Body<'_> {
    fn usage(&self) -> crate::protocol::usage::Usage {
        crate::protocol::usage::Usage::of_top(&self.top)
    }
    fn hosted(&self) -> &[Call] {
        &self.hosted
    }
    fn calls(&self) -> &[Call] {
        &self.calls
    }
    fn id(&self) -> Option<&str> {
        Some(self.id.as_str()).filter(|i| !i.is_empty())
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
    fn rewrite(
        &self,
        verdicts: &[Release],
        neutral: &str,
        id_key: &[u8; 32],
        out: &mut crate::json::Spliced<'_>,
    ) -> bool {
        Body::rewrite(self, verdicts, neutral, &Ids::new(id_key), out)
    }
    fn withheld(&self, verdicts: &[Release]) -> Option<Withheld> {
        let flags = self.withheld_flags(verdicts);
        let calls: Vec<(String, String)> = self
            .items
            .iter()
            .zip(&flags)
            .filter(|(_, (_, w))| *w)
            .filter_map(|(it, _)| it.call.as_ref().map(|(_, c, t)| (c.clone(), t.clone())))
            .collect();
        (!calls.is_empty() && !self.id.is_empty()).then(|| Withheld {
            response_id: self.id.clone(),
            calls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Complete;
    use serde_json::json;

    fn body() -> String {
        json!({"id": "resp_1", "object": "response", "status": "completed", "output": [
            {"id": "rs_1", "type": "reasoning", "summary": []},
            {"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\":\"rm\"}", "status": "completed"},
            {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi", "annotations": []}]},
            {"id": "fc_2", "type": "function_call", "call_id": "c2", "name": "get", "arguments": "{}", "status": "completed"}
        ], "usage": {"total_tokens": 3}})
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
        let b = body();
        let a = Body::parse(&b, 1024).unwrap();
        let names: Vec<_> = a
            .calls()
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str()))
            .collect();
        assert_eq!(names, [("c1", "shell"), ("c2", "get")]);
    }

    #[test]
    fn a_withheld_call_becomes_a_message_and_its_reasoning_goes() {
        let b = body();
        let a = Body::parse(&b, 1024).unwrap();
        let ids = Ids::new(&[7; 32]);
        assert!(!a.rewrite(&verdicts(&[true, true]), "N", &ids, &mut String::new()));
        let mut out = String::new();
        assert!(a.rewrite(&verdicts(&[false, true]), "N", &ids, &mut out));
        let v: Value = serde_json::from_str(&out).unwrap();
        let output = v["output"].as_array().unwrap();
        assert_eq!(output.len(), 3, "{out}");
        assert_eq!(output[0]["type"], "message");
        assert_eq!(output[0]["content"][0]["text"], "N");
        assert!(output[0]["id"].as_str().unwrap().starts_with("msg_"));
        assert_eq!(output[2]["call_id"], "c2");
        assert!(
            !out.contains("rm") && !out.contains("fc_1") && !out.contains("rs_1"),
            "{out}"
        );
        assert_eq!(v["usage"]["total_tokens"], 3);
        let w = a.withheld(&verdicts(&[false, true])).unwrap();
        assert_eq!(w.response_id, "resp_1");
        assert_eq!(w.calls, [("c1".to_string(), "function_call".to_string())]);
    }

    #[test]
    fn ambiguous_bodies_fail() {
        for bad in [
            r#"{"id":"r","output":[],"output":[{"type":"function_call"}]}"#,
            r#"{"id":"r","Output":[]}"#,
            r#"{"id":"r","output":[{"type":"function_call","name":"a","Name":"b"}]}"#,
            r#"{"id":"r","output":{}}"#,
            r#"{"error":{"message":"x"}}"#,
            // A key repeated deep in the echoed request, which goes on as it came.
            r#"{"id":"r","tools":[{"type":"function","name":"a","name":"b"}],"output":[]}"#,
            r#"{"id":"r","output":[{"type":"message","content":[{"type":"output_text","text":"a","text":"b"}]}]}"#,
        ] {
            assert!(Body::parse(bad, 1024).is_err(), "{bad}");
        }
    }
}
