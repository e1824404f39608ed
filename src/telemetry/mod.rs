//! OpenTelemetry traces over OTLP/HTTP (protobuf): one span per request,
//! named and attributed by the GenAI semantic conventions, a child span per
//! gate decision and one per sensor call under it; the agent's `traceparent`
//! is continued and the request's own span passed upstream. Spans carry
//! names, ids, verdicts and timings, never prompt or argument text.
//!
//! Off unless an endpoint is configured ([`crate::config::Telemetry`]); off,
//! a request pays one `Option` check.

mod export;
mod spans;

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};
use opentelemetry_sdk::Resource;

pub use spans::{DecisionSpan, RequestTrace, SensorRun};

use crate::config;
use crate::error::Error;

/// How long one export may take when `OTEL_EXPORTER_OTLP_TIMEOUT` is not set.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The tracer and the provider that batches and sends its spans.
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    /// Where spans go (for the start-up log line).
    pub endpoint: String,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl Telemetry {
    /// Starts the exporter when an endpoint is configured; `None` when tracing is off.
    pub fn start(cfg: &config::Telemetry) -> Result<Option<Telemetry>, Error> {
        let Some(endpoint) = cfg.endpoint(env) else {
            return Ok(None);
        };
        let timeout = env("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .or_else(|| env("OTEL_EXPORTER_OTLP_TIMEOUT"))
            .and_then(|ms| ms.trim().parse::<u64>().ok())
            .map_or(EXPORT_TIMEOUT, Duration::from_millis);
        let client = export::Client::new(&endpoint, cfg.ca_file.as_deref(), timeout)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_endpoint(endpoint.clone())
            .with_protocol(Protocol::HttpBinary)
            .with_timeout(timeout)
            .build()
            .map_err(|e| Error::config("<telemetry>", 1, format!("OTLP exporter: {e}")))?;
        let mut batch = BatchConfigBuilder::default();
        if let Some(d) = cfg.export_interval {
            batch = batch.with_scheduled_delay(d);
        }
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batch.build())
            .build();
        let name = cfg
            .service_name
            .clone()
            .or_else(|| env("OTEL_SERVICE_NAME").filter(|n| !n.trim().is_empty()))
            .unwrap_or_else(|| "toolgate".to_string());
        let resource = Resource::builder()
            .with_service_name(name)
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("toolgate");
        Ok(Some(Telemetry {
            provider,
            tracer,
            endpoint,
        }))
    }

    /// Sends the spans still queued and stops the exporter; blocks (call it
    /// from a blocking thread).
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "telemetry: the last spans could not be sent");
        }
    }
}
