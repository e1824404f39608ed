//! The OTLP exporter's HTTP client: toolgate's own upstream client (pool,
//! rustls, timeouts) on a one-thread runtime of its own, so exports neither
//! compete with requests nor wait on them, and shutting down never blocks a
//! request worker.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use opentelemetry_http::{HttpClient, HttpError};

use crate::error::Error;
use crate::upstream::Upstream;

/// How much of a collector's answer is read (it is only checked for status).
const MAX_ANSWER: usize = 64 * 1024;

/// A runtime shut down in the background when dropped (dropping a runtime
/// from inside another one would panic).
struct Runtime(Option<tokio::runtime::Runtime>);

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// Sends OTLP requests to one collector URL.
#[derive(Clone)]
pub(super) struct Client {
    upstream: Arc<Upstream>,
    runtime: Arc<Runtime>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("toolgate OTLP client")
    }
}

impl Client {
    /// A client for `url` (the full traces URL); `timeout` bounds each export.
    pub(super) fn new(
        url: &str,
        ca_file: Option<&std::path::Path>,
        timeout: Duration,
    ) -> Result<Client, Error> {
        // Headers from OTEL_EXPORTER_OTLP_HEADERS go as they are.
        let upstream = Arc::new(Upstream::to_url(
            url,
            ("telemetry", "the OTLP endpoint"),
            ca_file,
            timeout,
        )?);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("toolgate-otlp")
            .enable_all()
            .build()
            .map_err(|e| Error::config("<telemetry>", 1, format!("cannot start: {e}")))?;
        Ok(Client {
            upstream,
            runtime: Arc::new(Runtime(Some(rt))),
        })
    }

    async fn send(upstream: Arc<Upstream>, req: Request<Bytes>) -> Result<Response<Bytes>, Error> {
        let (parts, body) = req.into_parts();
        let body = Full::new(body).map_err(|never| match never {}).boxed();
        let req = upstream.request(parts.method, "", None, parts.headers, body)?;
        let deadline = upstream.timeout;
        let resp = upstream.send(req).await?;
        let (head, body) = resp.into_parts();
        let read = Limited::new(body, MAX_ANSWER).collect();
        let bytes = match tokio::time::timeout(deadline, read).await {
            Ok(Ok(b)) => b.to_bytes(),
            // The status is what counts; an unreadable answer is empty.
            _ => Bytes::new(),
        };
        Ok(Response::from_parts(head, bytes))
    }
}

impl HttpClient for Client {
    fn send_bytes<'a, 'f>(
        &'a self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'f>>
    where
        'a: 'f,
        Self: 'f,
    {
        let upstream = self.upstream.clone();
        let handle = self.runtime.0.as_ref().map(|rt| rt.handle().clone());
        Box::pin(async move {
            let Some(handle) = handle else {
                return Err(HttpError::from("the OTLP client has shut down"));
            };
            // The batch processor polls this on a thread of its own: the
            // exchange itself runs on the client's runtime.
            match handle.spawn(Client::send(upstream, request)).await {
                Ok(Ok(resp)) => Ok(resp),
                Ok(Err(e)) => Err(HttpError::from(e.to_string())),
                Err(_) => Err(HttpError::from("the OTLP export was cancelled")),
            }
        })
    }
}
