//! An independent reader of Anthropic Messages streams, as strict as the
//! anthropic SDK's accumulator (the oracle of `messages.rs`).

use serde_json::{json, Value};

/// An independent reader of a Messages stream, as strict as the anthropic
/// SDK's accumulator: every event is named by its type, `message_start`
/// comes first with no content, blocks are appended in `index` order (the
/// index is the block's position), deltas and stops name the open block, a
/// call's input fragments join into JSON, and nothing follows `message_stop`.
#[derive(Debug, Default)]
pub struct Reader {
    pub message: Value,
    pub content: Vec<Value>,
    open: Option<usize>,
    json: Vec<String>,
    pub stopped: bool,
    pub errors: Vec<Value>,
}

impl Reader {
    pub fn read(body: &[u8]) -> Result<Reader, String> {
        let mut r = Reader::default();
        let text = String::from_utf8_lossy(body).replace("\r\n", "\n");
        for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_string());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                    data.push('\n');
                }
            }
            if data.is_empty() {
                continue;
            }
            let ev: Value = serde_json::from_str(&data).map_err(|e| format!("{e}: {data}"))?;
            let ty = ev["type"].as_str().ok_or("no type")?.to_string();
            if name.as_deref() != Some(ty.as_str()) {
                return Err(format!("event {name:?} carries {ty}"));
            }
            if r.stopped {
                return Err(format!("{ty} after message_stop"));
            }
            r.event(&ty, &ev)?;
        }
        Ok(r)
    }

    fn event(&mut self, ty: &str, ev: &Value) -> Result<(), String> {
        let index = ev["index"].as_u64().map(|i| i as usize);
        match ty {
            "message_start" => {
                if !self.message.is_null() {
                    return Err("second message_start".into());
                }
                if ev["message"]["content"] != json!([]) {
                    return Err("message_start holds content".into());
                }
                self.message = ev["message"].clone();
            }
            "content_block_start" => {
                if self.message.is_null() || self.open.is_some() {
                    return Err("block start out of place".into());
                }
                if index != Some(self.content.len()) {
                    return Err(format!(
                        "block at {index:?}, expected {}",
                        self.content.len()
                    ));
                }
                self.content.push(ev["content_block"].clone());
                self.json.push(String::new());
                self.open = index;
            }
            "content_block_delta" => {
                let i = index
                    .filter(|i| Some(*i) == self.open)
                    .ok_or("delta for a block that is not open")?;
                let d = &ev["delta"];
                let b = &mut self.content[i];
                match d["type"].as_str().unwrap_or("") {
                    "text_delta" => {
                        let t = format!(
                            "{}{}",
                            b["text"].as_str().unwrap_or(""),
                            d["text"].as_str().unwrap_or("")
                        );
                        b["text"] = json!(t);
                    }
                    "input_json_delta" => {
                        self.json[i].push_str(d["partial_json"].as_str().ok_or("partial_json")?)
                    }
                    "thinking_delta" => {
                        let t = format!(
                            "{}{}",
                            b["thinking"].as_str().unwrap_or(""),
                            d["thinking"].as_str().unwrap_or("")
                        );
                        b["thinking"] = json!(t);
                    }
                    "signature_delta" => b["signature"] = d["signature"].clone(),
                    other => return Err(format!("unknown delta {other}")),
                }
            }
            "content_block_stop" => {
                let i = index
                    .filter(|i| Some(*i) == self.open)
                    .ok_or("stop for a block that is not open")?;
                if !self.json[i].is_empty() {
                    let input: Value = serde_json::from_str(&self.json[i])
                        .map_err(|e| format!("input of block {i}: {e}"))?;
                    self.content[i]["input"] = input;
                }
                self.open = None;
            }
            "message_delta" => {
                if self.open.is_some() {
                    return Err("message_delta inside a block".into());
                }
                for k in ["stop_reason", "stop_sequence"] {
                    self.message[k] = ev["delta"][k].clone();
                }
                // As the SDK: the delta's counts replace the start's.
                for k in [
                    "output_tokens",
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                ] {
                    if let Some(n) = ev["usage"][k].as_u64() {
                        self.message["usage"][k] = json!(n);
                    }
                }
            }
            "message_stop" => self.stopped = true,
            "ping" => {}
            "error" => self.errors.push(ev.clone()),
            other => return Err(format!("unknown event {other}")),
        }
        Ok(())
    }

    /// The message the stream builds (what a non-streamed request answers).
    pub fn message(&self) -> Value {
        let mut m = self.message.clone();
        m["content"] = Value::Array(self.content.clone());
        m
    }

    /// `(id, name, input)` of each `tool_use` block.
    pub fn calls(&self) -> Vec<(String, String, Value)> {
        calls_of(&self.content)
    }
}

pub fn calls_of(content: &[Value]) -> Vec<(String, String, Value)> {
    content
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| {
            (
                b["id"].as_str().unwrap_or("").to_string(),
                b["name"].as_str().unwrap_or("").to_string(),
                b["input"].clone(),
            )
        })
        .collect()
}
