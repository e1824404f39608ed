//! `[telemetry]`: where OpenTelemetry traces go (OTLP over HTTP with
//! protobuf). Off unless `otlp_endpoint` or an `OTEL_EXPORTER_OTLP_*`
//! endpoint variable is set; the variables are read when toolgate starts.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawTelemetry {
    pub(crate) otlp_endpoint: Option<Spanned<String>>,
    pub(crate) service_name: Option<Spanned<String>>,
    pub(crate) export_interval_ms: Option<Spanned<u64>>,
    pub(crate) ca_file: Option<String>,
}

/// `[telemetry]`, checked.
#[derive(Debug, Clone, Default)]
pub struct Telemetry {
    /// The collector's base URL (`/v1/traces` is appended unless it is
    /// there), as with `OTEL_EXPORTER_OTLP_ENDPOINT`. `None`: the
    /// environment decides, and with nothing there tracing is off.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the spans; else `OTEL_SERVICE_NAME`, else `toolgate`.
    pub service_name: Option<String>,
    /// How long finished spans wait to be sent in a batch; else
    /// `OTEL_BSP_SCHEDULE_DELAY`, else 5 s.
    pub export_interval: Option<Duration>,
    /// Extra CA certificates for an `https` collector.
    pub ca_file: Option<PathBuf>,
}

/// The checked table, with relative paths resolved by `resolve`.
pub(super) fn build(r: &RawTelemetry, resolve: impl Fn(&str) -> PathBuf) -> Telemetry {
    Telemetry {
        otlp_endpoint: r.otlp_endpoint.as_ref().map(|e| e.get_ref().clone()),
        service_name: r.service_name.as_ref().map(|s| s.get_ref().clone()),
        export_interval: r
            .export_interval_ms
            .as_ref()
            .map(|ms| Duration::from_millis(*ms.get_ref())),
        ca_file: r.ca_file.as_deref().map(resolve),
    }
}

/// Checks `[telemetry]`; problems go to `bad` with their place in the file.
pub(super) fn check(raw: &RawTelemetry, bad: &mut impl FnMut(std::ops::Range<usize>, String)) {
    if let Some(e) = &raw.otlp_endpoint {
        if let Err(m) = super::parse_base_url(e.get_ref()) {
            bad(
                e.span(),
                m.replace("upstream.base_url", "telemetry.otlp_endpoint"),
            );
        }
    }
    if let Some(s) = &raw.service_name {
        if s.get_ref().trim().is_empty() {
            bad(s.span(), "telemetry.service_name must not be empty".into());
        }
    }
    if let Some(ms) = &raw.export_interval_ms {
        if *ms.get_ref() == 0 {
            bad(
                ms.span(),
                "telemetry.export_interval_ms must be greater than 0".into(),
            );
        }
    }
}

/// The traces URL for a collector base URL, as the OTLP exporter
/// specification builds it from `OTEL_EXPORTER_OTLP_ENDPOINT`.
pub fn traces_url(base: &str) -> String {
    let b = base.trim_end_matches('/');
    if b.ends_with("/v1/traces") {
        b.to_string()
    } else {
        format!("{b}/v1/traces")
    }
}

impl Telemetry {
    /// The traces URL toolgate sends to, or `None` when tracing is off:
    /// `otlp_endpoint`, else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as is),
    /// else `OTEL_EXPORTER_OTLP_ENDPOINT`; `OTEL_SDK_DISABLED=true` or
    /// `OTEL_TRACES_EXPORTER=none` turn it off.
    pub fn endpoint(&self, env: impl Fn(&str) -> Option<String>) -> Option<String> {
        let var = |k: &str| {
            env(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
        {
            return None;
        }
        if let Some(e) = &self.otlp_endpoint {
            return Some(traces_url(e));
        }
        var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT").map(|b| traces_url(&b)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_endpoint_comes_from_the_config_then_the_standard_variables() {
        let off = Telemetry::default();
        assert_eq!(off.endpoint(env(&[])), None);
        assert_eq!(
            off.endpoint(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")])),
            Some("http://c:4318/v1/traces".into())
        );
        assert_eq!(
            off.endpoint(env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/custom"),
            ])),
            Some("http://t:1/custom".into())
        );
        let on = Telemetry {
            otlp_endpoint: Some("https://collector/otlp".into()),
            ..Telemetry::default()
        };
        assert_eq!(
            on.endpoint(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")])),
            Some("https://collector/otlp/v1/traces".into())
        );
        assert_eq!(on.endpoint(env(&[("OTEL_SDK_DISABLED", "TRUE")])), None);
        assert_eq!(on.endpoint(env(&[("OTEL_TRACES_EXPORTER", "none")])), None);
    }

    #[test]
    fn bad_values_are_refused_with_their_key() {
        for (text, key) in [
            ("otlp_endpoint = \"ftp://x\"", "telemetry.otlp_endpoint"),
            ("service_name = \" \"", "telemetry.service_name"),
            ("export_interval_ms = 0", "telemetry.export_interval_ms"),
            ("sample = 1", "unknown field"),
        ] {
            let src = format!("[telemetry]\n{text}\n");
            let err = crate::config::Config::from_toml(&src, "t.toml", Path::new("."))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(key), "{text}: {err}");
            assert!(err.contains("t.toml:2"), "{text}: {err}");
        }
    }
}
