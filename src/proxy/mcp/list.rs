//! Asks a server for its tools, as a client does (`initialize`, then
//! `tools/list` page by page), over Streamable HTTP or stdio: what
//! `toolgate mcp pin` pins.

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method};
use serde_json::{json, Value};
use tokio::io::{AsyncWriteExt, BufReader};

use super::servers::Server;
use super::{full, SESSION};
use crate::error::Error;
use crate::protocol::sse::SseDecoder;
use crate::upstream::encoding::ContentDecoder;

/// The protocol version asked for (servers answer with one they speak).
const VERSION: &str = "2025-06-18";
/// The most an answer may hold.
const MAX: usize = 16 << 20;

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {},
        "clientInfo": {"name": "toolgate", "version": env!("CARGO_PKG_VERSION")}}})
}

fn list(id: u64, cursor: Option<&Value>) -> Value {
    let params = match cursor {
        Some(c) => json!({"cursor": c}),
        None => json!({}),
    };
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params})
}

/// The most pages of tools read.
const MAX_PAGES: u64 = 100;

/// Tools gathered page by page.
#[derive(Default)]
struct Pages {
    tools: Vec<Value>,
    cursor: Option<Value>,
}

impl Pages {
    /// Takes one page's result; whether it was the last.
    fn take(&mut self, result: Value) -> bool {
        let tools = result.get("tools").and_then(Value::as_array);
        self.tools.extend(tools.into_iter().flatten().cloned());
        self.cursor = result.get("nextCursor").filter(|c| !c.is_null()).cloned();
        self.cursor.is_none()
    }
}

fn endless() -> Error {
    Error::UpstreamUnreadable("the MCP server's tool list does not end")
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// The answer with `id` among a body's messages (JSON, or events).
fn answer(body: &[u8], sse: bool, id: u64) -> Result<Value, Error> {
    let unreadable = || Error::UpstreamUnreadable("an MCP answer cannot be read");
    let mut messages = Vec::new();
    if sse {
        let mut dec = SseDecoder::new(MAX);
        dec.push(body);
        while let Some(ev) = dec.next_event().map_err(|_| unreadable())? {
            messages.extend(ev.data);
        }
        messages.extend(dec.finish().map_err(|_| unreadable())?.and_then(|e| e.data));
    } else {
        messages.push(Bytes::copy_from_slice(body));
    }
    for m in messages {
        let v = crate::json::strict_value(&m).map_err(|_| unreadable())?;
        if v.get("id") == Some(&json!(id)) {
            if v.get("error").is_some() {
                return Err(Error::UpstreamUnreadable(
                    "the MCP server answered with an error",
                ));
            }
            return Ok(v.get("result").cloned().unwrap_or(Value::Null));
        }
    }
    Err(unreadable())
}

/// The tools an HTTP server lists now.
pub async fn over_http(server: &Server) -> Result<Vec<Value>, Error> {
    let mut session: Option<HeaderValue> = None;
    let mut send = async |m: &Value| -> Result<(Bytes, bool), Error> {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        h.insert("mcp-protocol-version", HeaderValue::from_static(VERSION));
        if let Some(s) = &session {
            h.insert(SESSION, s.clone());
        }
        if let Some((name, env)) = &server.config.auth {
            let v = std::env::var(env).unwrap_or_default();
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| Error::Overloaded("mcp credentials"))?;
            h.insert(
                name,
                HeaderValue::from_str(&v).map_err(|_| Error::Overloaded("mcp credentials"))?,
            );
        }
        let body = Bytes::from(m.to_string());
        let req = server
            .client
            .request(Method::POST, "", None, h, full(body))?;
        let resp = server.client.send(req).await?;
        let (head, body) = resp.into_parts();
        if !head.status.is_success() {
            return Err(Error::UpstreamUnreadable(
                "the MCP server refused a request",
            ));
        }
        if let Some(s) = head.headers.get(SESSION) {
            session = Some(s.clone());
        }
        let sse = (head.headers.get(header::CONTENT_TYPE))
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let dec = ContentDecoder::for_headers(&head.headers)?;
        let deadline = tokio::time::Instant::now() + server.config.timeout;
        let mut charge = crate::proxy::budget::Budget::new(MAX).charge();
        let b = crate::proxy::gather::response(body, dec, None, MAX, deadline, &mut charge).await?;
        Ok((b, sse))
    };
    let (b, sse) = send(&initialize()).await?;
    answer(&b, sse, 0)?;
    let initialized: Value = serde_json::from_str(INITIALIZED).unwrap_or_default();
    send(&initialized).await?;
    let mut pages = Pages::default();
    for page in 1..=MAX_PAGES {
        let (b, sse) = send(&list(page, pages.cursor.as_ref())).await?;
        if pages.take(answer(&b, sse, page)?) {
            return Ok(pages.tools);
        }
    }
    Err(endless())
}

/// The tools a stdio server lists now.
pub async fn over_stdio(
    command: &[String],
    timeout: std::time::Duration,
) -> Result<Vec<Value>, Error> {
    let (_child, mut to, from) = super::stdio::spawn(command)?;
    let mut from = BufReader::new(from);
    let mut ask = async |m: &Value, id: Option<u64>| -> Result<Value, Error> {
        let mut line = m.to_string().into_bytes();
        line.push(b'\n');
        to.write_all(&line)
            .await
            .map_err(|e| Error::io("stdio", e))?;
        let Some(id) = id else {
            return Ok(Value::Null);
        };
        loop {
            let read = super::stdio::line(&mut from, MAX);
            let raw = tokio::time::timeout(timeout, read)
                .await
                .map_err(|_| Error::UpstreamTimeout)??
                .ok_or(Error::UpstreamUnreadable("the MCP server ended"))?;
            if let Ok(v) = answer(&raw, false, id) {
                return Ok(v);
            }
        }
    };
    ask(&initialize(), Some(0)).await?;
    let initialized: Value = serde_json::from_str(INITIALIZED).unwrap_or_default();
    ask(&initialized, None).await?;
    let mut pages = Pages::default();
    for page in 1..=MAX_PAGES {
        let result = ask(&list(page, pages.cursor.as_ref()), Some(page)).await?;
        if pages.take(result) {
            return Ok(pages.tools);
        }
    }
    Err(endless())
}
