//! The server's answer to one agent message, read and written again: a
//! `tools/list` result keeps only tools whose definition matches its pin,
//! whose description the injection detectors do not flag (unless a rule
//! allows the tool by name), and that no rule always denies; a
//! `tools/call` or `resources/read` result is fenced and redacted. The
//! server's own requests (sampling, elicitation) pass and are audited;
//! notifications pass. An answer in an event stream is read whole, event
//! by event, and written again as events.

use bytes::{Bytes, BytesMut};
use serde_json::{json, Value};

use super::servers::Pin;
use crate::context::Context;
use crate::error::Error;
use crate::fence::ToolResult;
use crate::gate::Gates;
use crate::protocol::sse::SseDecoder;
use crate::proxy::state::State;

/// What was asked, and of whom.
pub(crate) struct Answer<'a> {
    state: &'a State,
    gates: &'a Gates,
    server: &'a str,
    request_id: &'a str,
    principal: &'a str,
    method: &'a str,
    id: Option<&'a Value>,
    /// The tool a `tools/call` named.
    tool: &'a str,
}

impl<'a> Answer<'a> {
    pub fn new(
        state: &'a State,
        gates: &'a Gates,
        server: &'a str,
        request_id: &'a str,
        principal: &'a str,
        asked: &'a Value,
    ) -> Answer<'a> {
        Answer {
            state,
            gates,
            server,
            request_id,
            principal,
            method: asked.get("method").and_then(Value::as_str).unwrap_or(""),
            id: asked.get("id"),
            tool: (asked.get("params"))
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str)
                .unwrap_or(""),
        }
    }

    /// A JSON answer.
    pub async fn whole(&self, raw: &[u8]) -> Result<Bytes, Error> {
        let mut m = crate::json::strict_value(raw)
            .map_err(|_| Error::UpstreamUnreadable("an MCP answer is not unambiguous JSON"))?;
        if !self.message(&mut m).await? {
            return Err(Error::UpstreamUnreadable(
                "an MCP answer answers another request",
            ));
        }
        Ok(Bytes::from(
            serde_json::to_vec(&m).map_err(|_| Error::Overloaded("memory"))?,
        ))
    }

    /// An answer as an event stream, read whole.
    pub async fn stream(&self, raw: &[u8]) -> Result<Bytes, Error> {
        let mut dec = SseDecoder::new(self.state.config.limits.max_response_bytes);
        dec.push(raw);
        let mut out = BytesMut::new();
        let mut events = Vec::new();
        while let Some(ev) = dec
            .next_event()
            .map_err(|e| Error::UpstreamUnreadable(e.why()))?
        {
            events.push(ev);
        }
        if let Some(ev) = dec
            .finish()
            .map_err(|e| Error::UpstreamUnreadable(e.why()))?
        {
            events.push(ev);
        }
        for ev in events {
            let Some(data) = ev.data else {
                continue;
            };
            let mut m = crate::json::strict_value(&data)
                .map_err(|_| Error::UpstreamUnreadable("an MCP event is not unambiguous JSON"))?;
            if !self.message(&mut m).await? {
                continue;
            }
            let text = serde_json::to_vec(&m).map_err(|_| Error::Overloaded("memory"))?;
            out.extend_from_slice(b"event: message\n");
            crate::protocol::write_raw_data(&mut out, &text);
        }
        Ok(out.freeze())
    }

    /// One message of the server's: the answer to what was asked is
    /// checked; anything else passes.
    /// Whether it goes on: an answer to another request than the one asked
    /// (whose result toolgate would not have checked) is dropped.
    async fn message(&self, m: &mut Value) -> Result<bool, Error> {
        if let Some(method) = m.get("method").and_then(Value::as_str) {
            if m.get("id").is_some() {
                // The server asks the agent (sampling, elicitation): it goes on.
                let method: String = method.chars().take(64).collect();
                let fields = json!({"server": self.server, "method": method});
                self.audit("mcp_server_request", fields).await?;
            }
            // Notifications pass.
            return Ok(true);
        }
        if m.get("id").is_none_or(|id| Some(id) != self.id) {
            return Ok(false);
        }
        let Some(result) = m.get_mut("result") else {
            return Ok(true);
        };
        match self.method {
            "tools/list" => self.pinned(result).await.map(|()| true),
            "tools/call" => self.fenced(result, "content").await.map(|()| true),
            "resources/read" => self.fenced(result, "contents").await.map(|()| true),
            _ => Ok(true),
        }
    }

    /// An audit record of this exchange: `event` with `fields`.
    async fn audit(&self, event: &str, fields: Value) -> Result<(), Error> {
        let mut record = json!({
            "ts": crate::digest::now_rfc3339(),
            "request_id": self.request_id,
            "principal": self.principal,
            "protocol": "mcp",
            "event": event,
        });
        if let (Value::Object(r), Value::Object(f)) = (&mut record, fields) {
            r.extend(f);
        }
        self.state.audit.record(&record).await
    }

    /// The detectors that flag a tool's description (its own, and its
    /// parameters' descriptions); empty when none does.
    fn flagged(&self, tool: &Value) -> Vec<String> {
        let mut texts = Vec::new();
        if let Some(d) = tool.get("description").and_then(Value::as_str) {
            texts.push(d);
        }
        let props = (tool.get("inputSchema"))
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object);
        for p in props.into_iter().flat_map(|p| p.values()) {
            if let Some(d) = p.get("description").and_then(Value::as_str) {
                texts.push(d);
            }
        }
        let words = &self.gates.policy().words;
        let mut out: Vec<String> = texts
            .iter()
            .flat_map(|t| crate::gate::injection::scan(words, t))
            .map(|s| s.pattern.to_string())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Keeps the tools whose definition matches its pin, and none a rule
    /// always denies; a changed one is audited with both digests.
    async fn pinned(&self, result: &mut Value) -> Result<(), Error> {
        let Some(Value::Array(tools)) = result.get_mut("tools") else {
            return Ok(());
        };
        let mut seen = std::collections::HashSet::new();
        let mut kept = Vec::with_capacity(tools.len());
        let ctx = Context::default();
        for tool in std::mem::take(tools) {
            let Some(name) = tool.get("name").and_then(Value::as_str).map(str::to_string) else {
                continue;
            };
            let full = format!("{}.{name}", self.server);
            let flagged = self.flagged(&tool);
            let usable =
                flagged.is_empty() || self.gates.policy_gate.explicitly_allowed(&full, &ctx);
            let Some((name, pin)) = self.state.mcp.check(self.server, &tool, usable) else {
                continue;
            };
            // A name listed twice reads two ways: neither is kept.
            if !seen.insert(name.clone()) {
                kept.retain(|t: &Value| t.get("name").and_then(Value::as_str) != Some(&name));
                continue;
            }
            let (event, pinned, now) = match &pin {
                Pin::Kept => ("", None, None),
                Pin::Changed(pinned, now) => ("mcp_tool_changed", Some(pinned), Some(now)),
                Pin::Unpinned(now) => ("mcp_tool_unpinned", None, Some(now)),
            };
            if !event.is_empty() {
                let fields = json!({"tool": full, "pinned_sha256": pinned, "seen_sha256": now});
                self.audit(event, fields).await?;
                continue;
            }
            if self.gates.policy_gate.always_denied(&full, &ctx) {
                continue;
            }
            if !usable {
                let fields = json!({"tool": full, "detectors": flagged});
                self.audit("mcp_tool_flagged", fields).await?;
                continue;
            }
            kept.push(tool);
        }
        *tools = kept;
        Ok(())
    }

    /// Fences and redacts the text a tool returned or a resource holds (a
    /// result's `content` texts and embedded resources' texts, a read's
    /// `contents` texts).
    async fn fenced(&self, result: &mut Value, list: &str) -> Result<(), Error> {
        if !self.state.config.fence.enabled {
            return Ok(());
        }
        let tool = match self.method {
            "tools/call" => format!("{}.{}", self.server, self.tool),
            _ => format!("{}.resources", self.server),
        };
        // Structured content keeps its shape (a client checks it against
        // the tool's output schema): its strings are redacted, not fenced.
        let mut counts = crate::fence::redact::Counts::new();
        if let Some(structured) = result.get_mut("structuredContent") {
            redact_strings(&self.state.redactor, structured, &mut counts);
        }
        let mut results = Vec::new();
        if let Some(Value::Array(items)) = result.get_mut(list) {
            for item in items.iter_mut() {
                let text = match item.get("type").and_then(Value::as_str) {
                    Some("text") => item.get_mut("text"),
                    Some("resource") => item.get_mut("resource").and_then(|r| r.get_mut("text")),
                    // A read's contents carry no type: a text or a blob.
                    None if list == "contents" => item.get_mut("text"),
                    _ => None,
                };
                if let Some(content) = text.filter(|t| t.is_string()) {
                    results.push(ToolResult {
                        call_id: String::new(),
                        tool: tool.clone(),
                        url: None,
                        content,
                    });
                }
            }
        }
        let settings = crate::proxy::gated::fence_settings(
            self.state,
            self.gates,
            crate::fence::kept::Digests::new(Vec::new()),
        );
        let mut report = crate::fence::apply(results, &settings);
        report.add(&crate::fence::Fenced {
            redactions: counts,
            ..Default::default()
        });
        crate::proxy::gated::fenced(
            self.state,
            (self.request_id, self.principal, "mcp"),
            &report,
        )
        .await
    }
}

/// Redacts every string of a JSON value in place.
fn redact_strings(
    r: &crate::fence::redact::Redactor,
    v: &mut Value,
    counts: &mut crate::fence::redact::Counts,
) {
    match v {
        Value::String(s) => {
            if let Some(t) = r.redact(s, counts) {
                *s = t;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| redact_strings(r, x, counts)),
        Value::Object(m) => m.values_mut().for_each(|x| redact_strings(r, x, counts)),
        _ => {}
    }
}
