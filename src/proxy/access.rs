//! The access line: one log line per request, written when its response
//! has ended (streamed to the last byte, or the agent left), with what the
//! gates decided. Never payload text. Its target is [`TARGET`], whatever
//! module writes it: operators filter on it.

use std::pin::Pin;

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::metrics::genai::Exchange;
use crate::metrics::Metrics;
use crate::policy::Verdict;

pub use crate::call::Tally;

/// The access line's log target, stable and documented
/// (`TOOLGATE_LOG=info,toolgate::access=off` turns it off).
pub const TARGET: &str = "toolgate::access";

/// What the access line says; written when dropped.
#[derive(Debug)]
pub struct Access {
    pub method: http::Method,
    pub route: &'static str,
    /// Why a refused request was refused: its path's class
    /// (`batches`, `stored_response`, `unknown_path`, …).
    pub refused: Option<&'static str>,
    pub status: u16,
    pub request_id: String,
    /// The provider's id for the exchange (its `x-request-id` or
    /// `request-id`), when it answered with one.
    pub upstream_request_id: Option<String>,
    /// Set once the client authenticated.
    pub principal: Option<String>,
    pub tally: Arc<Tally>,
    /// The request's place among `[limits] max_streams`, held until its
    /// response ends.
    pub stream_slot: Option<tokio::sync::OwnedSemaphorePermit>,
    /// The request's trace span (`[telemetry]`), ended with the line.
    pub trace: Option<crate::telemetry::RequestTrace>,
    /// A gated request's exchange, recorded in the GenAI metrics with the line.
    pub exchange: Option<(Arc<Exchange>, Arc<Metrics>)>,
    started: Instant,
}

impl Access {
    pub fn new(method: http::Method, request_id: String) -> Access {
        Access {
            method,
            route: "refused",
            refused: None,
            status: 0,
            request_id,
            upstream_request_id: None,
            principal: None,
            tally: Arc::default(),
            stream_slot: None,
            trace: None,
            exchange: None,
            started: Instant::now(),
        }
    }
}

impl Drop for Access {
    fn drop(&mut self) {
        let t = &self.tally;
        if let Some(trace) = &self.trace {
            if let Some((x, _)) = &self.exchange {
                trace.answered(x);
            }
            trace.end(self.status, t);
        }
        if let Some((x, metrics)) = &self.exchange {
            metrics.exchange_ended(x);
        }
        tracing::info!(
            target: TARGET,
            method = %self.method,
            route = %self.route,
            refused = %self.refused.unwrap_or("-"),
            status = self.status,
            duration_us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX),
            request_id = %self.request_id,
            upstream_request_id = %self.upstream_request_id.as_deref().unwrap_or("-"),
            principal = %self.principal.as_deref().unwrap_or("-"),
            allowed = t.get(Verdict::Allow),
            asked = t.get(Verdict::Ask),
            rejected = t.get(Verdict::Reject),
            denied = t.get(Verdict::Deny),
            "access"
        );
    }
}

/// A response body that writes its request's access line when it ends.
pub struct Logged<B> {
    inner: B,
    access: Option<Access>,
}

impl<B> Logged<B> {
    pub fn new(inner: B, access: Access) -> Self {
        Logged {
            inner,
            access: Some(access),
        }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Logged<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &polled {
            let exchange = self.access.as_ref().and_then(|a| a.exchange.as_ref());
            if let (Some((x, _)), true) = (exchange, f.data_ref().is_some_and(|d| !d.is_empty())) {
                x.agent_began();
            }
        }
        if let Poll::Ready(None) = polled {
            // The last byte is out: the line is written now, not when
            // the connection lets go of the body.
            self.access = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
