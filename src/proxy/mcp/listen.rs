//! The `GET` stream: the server's own messages to the agent (its requests,
//! such as sampling and elicitation, audited; notifications, such as
//! `notifications/tools/list_changed`, after which the agent lists again
//! and the pins apply), relayed event by event as they come. An answer on
//! it (a response replayed after a reconnection) is dropped: toolgate
//! checks an answer only where it sees the request it answers.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::Frame;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::protocol::sse::SseDecoder;
use crate::proxy::body::BodyError;
use crate::proxy::state::State;
use crate::proxy::ProxyBody;
use crate::upstream::encoding::ContentDecoder;
use crate::upstream::ResponseBody;

/// A body fed by a task.
pub(super) struct Fed(pub(super) mpsc::Receiver<Bytes>);

impl http_body::Body for Fed {
    type Data = Bytes;
    type Error = BodyError;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

/// Who the stream is for.
pub struct Listener {
    pub server: String,
    pub principal: String,
    pub request_id: String,
}

/// The agent's side of the server's stream.
pub fn relay(
    state: Arc<State>,
    who: Listener,
    mut body: ResponseBody,
    mut decoder: ContentDecoder,
) -> ProxyBody {
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        let mut dec = SseDecoder::new(state.config.limits.max_event_bytes);
        while let Some(Ok(frame)) = body.frame().await {
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let Ok(piece) = decoder.decode(&data) else {
                return;
            };
            dec.push(&piece);
            loop {
                let ev = match dec.next_event() {
                    Ok(Some(ev)) => ev,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(
                            why = e.why(),
                            server = who.server,
                            "an MCP stream cannot be read"
                        );
                        return;
                    }
                };
                let Some(out) = message(&state, &who, ev.data.as_deref()).await else {
                    continue;
                };
                if tx.send(out).await.is_err() {
                    return;
                }
            }
        }
    });
    Fed(rx).boxed_unsync()
}

/// The event the agent gets for one of the server's, if any.
async fn message(state: &State, who: &Listener, data: Option<&[u8]>) -> Option<Bytes> {
    let m = crate::json::strict_value(data?).ok()?;
    let method = m.get("method").and_then(Value::as_str);
    let Some(method) = method else {
        tracing::warn!(
            server = who.server,
            "an answer on an MCP server's own stream; dropped"
        );
        return None;
    };
    if m.get("id").is_some() {
        let record = json!({
            "ts": crate::digest::now_rfc3339(),
            "request_id": who.request_id,
            "principal": who.principal,
            "protocol": "mcp",
            "event": "mcp_server_request",
            "server": who.server,
            "method": method.chars().take(64).collect::<String>(),
        });
        state.audit.record(&record).await.ok()?;
    }
    let text = serde_json::to_vec(&m).ok()?;
    let mut out = BytesMut::new();
    out.extend_from_slice(b"event: message\n");
    crate::protocol::write_raw_data(&mut out, &text);
    Some(out.freeze())
}
