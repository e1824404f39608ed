//! A reference reader of what an agent receives: SSE or JSON → text and calls per choice.
//!
//! Written independently of toolgate's own decoder and assembler (the way the
//! OpenAI SDK accumulates: by choice, then by tool-call index; a missing index
//! means the entry's position), so the conformance tests compare toolgate
//! against a second reading of the same bytes.

use std::collections::BTreeMap;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub id: String,
    pub name: String,
    pub arguments: String,
    pub legacy: bool,
}

#[derive(Debug, Default, Clone)]
pub struct Acc {
    pub content: BTreeMap<u64, String>,
    /// Calls per choice, in order of first appearance.
    pub calls: BTreeMap<u64, Vec<(u64, Call)>>,
    pub finish: BTreeMap<u64, String>,
    pub error: bool,
    pub done: bool,
    pub events: usize,
}

impl Acc {
    pub fn calls_of(&self, choice: u64) -> Vec<Call> {
        self.calls
            .get(&choice)
            .map(|v| v.iter().map(|(_, c)| c.clone()).collect())
            .unwrap_or_default()
    }

    pub fn all_calls(&self) -> Vec<Call> {
        self.calls
            .values()
            .flat_map(|v| v.iter().map(|(_, c)| c.clone()))
            .collect()
    }

    pub fn choices(&self) -> Vec<u64> {
        let mut c: Vec<u64> = self
            .content
            .keys()
            .chain(self.calls.keys())
            .chain(self.finish.keys())
            .copied()
            .collect();
        c.sort();
        c.dedup();
        c
    }

    /// The data payloads of an SSE body, with their `event:` names.
    pub fn sse_events(body: &[u8]) -> Vec<(Option<String>, String)> {
        let text = String::from_utf8_lossy(body)
            .replace("\r\n", "\n")
            .replace('\r', "\n");
        let mut out = Vec::new();
        for block in text.split("\n\n") {
            let mut data: Vec<&str> = Vec::new();
            let mut event = None;
            for line in block.lines() {
                if let Some(d) = line.strip_prefix("data:") {
                    data.push(d.strip_prefix(' ').unwrap_or(d));
                } else if let Some(e) = line.strip_prefix("event:") {
                    event = Some(e.trim().to_string());
                }
            }
            if !data.is_empty() {
                out.push((event, data.join("\n")));
            }
        }
        out
    }

    pub fn from_sse(body: &[u8]) -> Acc {
        let mut acc = Acc::default();
        for (event, data) in Acc::sse_events(body) {
            acc.events += 1;
            if data.trim() == "[DONE]" {
                acc.done = true;
                break;
            }
            let Ok(v) = serde_json::from_str::<Value>(&data) else {
                continue;
            };
            if event.as_deref() == Some("error") || v.get("error").is_some_and(|e| !e.is_null()) {
                acc.error = true;
                break;
            }
            acc.choices_from(&v, "delta", false);
        }
        acc
    }

    pub fn from_json(body: &[u8]) -> Acc {
        let mut acc = Acc::default();
        let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        if v.get("error").is_some_and(|e| !e.is_null()) || v.is_null() {
            acc.error = true;
            return acc;
        }
        acc.choices_from(&v, "message", true);
        acc
    }

    /// Reads every choice of one chunk (`delta`) or completion (`message`).
    fn choices_from(&mut self, v: &Value, part: &str, whole: bool) {
        for (pos, ch) in v["choices"].as_array().into_iter().flatten().enumerate() {
            let idx = ch["index"].as_u64().unwrap_or(pos as u64);
            self.absorb(idx, &ch[part], whole);
            if let Some(f) = ch["finish_reason"].as_str() {
                self.finish.insert(idx, f.to_string());
            }
        }
    }

    fn absorb(&mut self, idx: u64, d: &Value, whole: bool) {
        if let Some(t) = d["content"].as_str() {
            self.content.entry(idx).or_default().push_str(t);
        }
        let calls = self.calls.entry(idx).or_default();
        for (pos, t) in d["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let key = if whole {
                pos as u64
            } else {
                t["index"].as_u64().unwrap_or(pos as u64)
            };
            let i = match calls.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    calls.push((
                        key,
                        Call {
                            id: String::new(),
                            name: String::new(),
                            arguments: String::new(),
                            legacy: false,
                        },
                    ));
                    calls.len() - 1
                }
            };
            let c = &mut calls[i].1;
            if let Some(id) = t["id"].as_str().filter(|s| !s.is_empty()) {
                if c.id.is_empty() {
                    c.id = id.to_string();
                }
            }
            if let Some(n) = t["function"]["name"].as_str().filter(|s| !s.is_empty()) {
                if c.name.is_empty() {
                    c.name = n.to_string();
                }
            }
            if let Some(a) = t["function"]["arguments"].as_str() {
                c.arguments.push_str(a);
            }
        }
        if let Some(f) = d.get("function_call").filter(|f| f.is_object()) {
            let i = match calls.iter().position(|(k, _)| *k == u64::MAX) {
                Some(i) => i,
                None => {
                    calls.push((
                        u64::MAX,
                        Call {
                            id: String::new(),
                            name: String::new(),
                            arguments: String::new(),
                            legacy: true,
                        },
                    ));
                    calls.len() - 1
                }
            };
            let c = &mut calls[i].1;
            if let Some(n) = f["name"].as_str().filter(|s| !s.is_empty()) {
                if c.name.is_empty() {
                    c.name = n.to_string();
                }
            }
            if let Some(a) = f["arguments"].as_str() {
                c.arguments.push_str(a);
            }
        }
        if calls.is_empty() {
            self.calls.remove(&idx);
        }
    }

    /// A non-streaming `chat.completion` holding what this stream said.
    pub fn to_completion(&self) -> Value {
        let choices: Vec<Value> = self
            .choices()
            .iter()
            .map(|&i| {
                let calls = self.calls_of(i);
                let mut msg = serde_json::json!({"role": "assistant", "content": self.content.get(&i).cloned()});
                let tools: Vec<Value> = calls
                    .iter()
                    .filter(|c| !c.legacy)
                    .map(|c| serde_json::json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
                if !tools.is_empty() {
                    msg["tool_calls"] = Value::Array(tools);
                }
                if let Some(c) = calls.iter().find(|c| c.legacy) {
                    msg["function_call"] = serde_json::json!({"name": c.name, "arguments": c.arguments});
                }
                serde_json::json!({"index": i, "message": msg, "finish_reason": self.finish.get(&i).cloned().unwrap_or_else(|| "stop".into())})
            })
            .collect();
        serde_json::json!({"id": "chatcmpl-mock", "object": "chat.completion", "created": 0, "model": "mock", "choices": choices})
    }
}
