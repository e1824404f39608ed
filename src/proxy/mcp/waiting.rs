//! A `tools/call` whose decision may wait on a person (`ask`) or a judge,
//! answered as an event stream at once: keep-alive comments while the
//! decision and the server's answer are awaited, then the answer as
//! events. An agent's read timeout is shorter than a person's answer.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::mpsc;

use super::listen::Fed;
use super::{error_result, serve, Job, FAILED};
use crate::proxy::state::State;
use crate::proxy::ProxyBody;

/// The answer, as a stream that starts now.
pub fn answer(state: Arc<State>, job: Job) -> Response<ProxyBody> {
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let id = job.asked.as_ref().and_then(|m| m.get("id")).cloned();
    let every = state.config.stream.keepalive;
    tokio::spawn(async move {
        let decided = serve(&state, job);
        tokio::pin!(decided);
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        let resp = loop {
            tokio::select! {
                r = &mut decided => break r,
                _ = tick.tick() => {
                    if tx.send(Bytes::from_static(b": keepalive\n\n")).await.is_err() {
                        // The agent left: the decision goes on, unread.
                        return;
                    }
                }
            }
        };
        let _ = tx.send(events(resp, id).await).await;
    });
    let mut r = Response::new(Fed(rx).boxed_unsync());
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    r
}

/// The answer as events: an event stream as it came, a JSON body as one
/// event, anything else (an error) as an error result.
async fn events(
    resp: Result<Response<ProxyBody>, crate::error::Error>,
    id: Option<serde_json::Value>,
) -> Bytes {
    let failed = || {
        let mut out = BytesMut::new();
        out.extend_from_slice(b"event: message\n");
        crate::protocol::write_raw_data(
            &mut out,
            error_result(id.clone(), FAILED).to_string().as_bytes(),
        );
        out.freeze()
    };
    let Ok(resp) = resp else {
        return failed();
    };
    let sse = (resp.headers().get(header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if !resp.status().is_success() {
        return failed();
    }
    let Ok(body) = resp.into_body().collect().await.map(|c| c.to_bytes()) else {
        return failed();
    };
    if sse {
        return body;
    }
    let mut out = BytesMut::new();
    out.extend_from_slice(b"event: message\n");
    crate::protocol::write_raw_data(&mut out, &body);
    out.freeze()
}
