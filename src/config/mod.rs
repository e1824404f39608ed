//! `toolgate.toml`: raw TOML (unknown keys rejected) → a validated [`Config`].
//!
//! Two phases, as in the STYLE guide: [`RawConfig`] mirrors the file with
//! `deny_unknown_fields`; [`Config::from_toml`] checks every value and reports
//! `file:line: message` diagnostics. With no file, [`Config::embedded`] is the
//! same as an empty file: every key has a default.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Diagnostic, Error};

/// Where the default config lives when `--config` is not given.
pub const EMBEDDED: &str = "<embedded>";

#[derive(Debug, Clone)]
pub struct Config {
    pub source: String,
    /// What `check` found missing here that the place toolgate runs must
    /// provide (empty unless loaded with [`Config::load_for_check`]).
    pub deferred: Vec<String>,
    pub listen: Listen,
    pub upstream: Upstream,
    /// The `[upstream.NAME]` sections (`messages`, `gemini`), by name.
    pub named_upstreams: Vec<(&'static str, Upstream)>,
    pub policy: Policy,
    pub audit: Audit,
    pub rewrite: Rewrite,
    pub limits: Limits,
    pub stream: Stream,
    /// `[gate] text_tool_calls`: calls written as text are held and gated.
    pub text_tool_calls: bool,
    /// `[log] format`.
    pub log_format: LogFormat,
    pub responses: Responses,
    pub fence: Fence,
    pub judge: Option<Judge>,
    pub clients: Vec<Client>,
    /// `[facts.bridge]`: trace findings → a fact file.
    pub bridge: Option<crate::facts::bridge::Bridge>,
    /// `[telemetry]`: OpenTelemetry traces.
    pub telemetry: Telemetry,
    /// `[approval]`: calls that wait for a person (`ask`).
    pub approval: Approval,
    /// `[admin]`: the admin port's token, `Host` names, connection cap.
    pub admin: Admin,
    /// `[state]`: where state shared by replicas is kept.
    pub state: State,
    /// `[[mcp]]`: MCP servers served at `/mcp/{name}`.
    pub mcp: Vec<Mcp>,
}

mod sections;
pub use sections::*;

mod approval;
mod clients;
mod mcp;
pub use mcp::Mcp;
mod named;
pub use named::KEY_HEADERS;
mod raw;
mod state;
mod telemetry;
mod urls;

pub use approval::{Approval, MAX_TIMEOUT_SECS};
pub use state::{Backend, OnError, State};
pub use telemetry::Telemetry;
use urls::parse_addr;
pub(crate) use urls::parse_base_url;

pub(crate) use raw::OneOrMany;
use raw::RawConfig;

/// 1-based line of a byte offset in `src`.
pub fn line_of(src: &str, offset: usize) -> usize {
    let end = offset.min(src.len());
    src.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Turns a TOML parse error into a `file:line: message` diagnostic.
pub fn toml_diagnostic(file: &str, src: &str, err: &toml::de::Error) -> Diagnostic {
    let line = err.span().map(|s| line_of(src, s.start)).unwrap_or(1);
    Diagnostic {
        file: file.to_string(),
        line,
        col: None,
        message: err.message().trim().to_string(),
    }
}

impl Config {
    /// An upstream section: `[upstream]` for `None`, `[upstream.NAME]` for
    /// a protocol that has its own (`Protocol::upstream_section`); a name
    /// without a section is the default one.
    pub fn upstream_section(&self, name: Option<&str>) -> &Upstream {
        let named = (self.named_upstreams.iter()).find(|(n, _)| Some(*n) == name);
        named.map_or(&self.upstream, |(_, u)| u)
    }

    /// The configuration used when no file is given.
    pub fn embedded() -> Result<Config, Error> {
        Config::from_toml("", EMBEDDED, Path::new("."))
    }

    /// Reads and validates a config file; relative paths in it are relative to its folder.
    pub fn load(path: &Path) -> Result<Config, Error> {
        let src = std::fs::read_to_string(path).map_err(|e| {
            Error::config(path.display().to_string(), 1, format!("cannot read: {e}"))
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Config::from_toml(&src, &path.display().to_string(), base)
    }

    /// Reads and validates a config file as `check` does: what only the
    /// place it runs provides (a client token's environment variable) is
    /// listed in [`Config::deferred`] instead of failing.
    pub fn load_for_check(path: &Path) -> Result<Config, Error> {
        let src = std::fs::read_to_string(path).map_err(|e| {
            Error::config(path.display().to_string(), 1, format!("cannot read: {e}"))
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Config::parse(&src, &path.display().to_string(), base, true)
    }

    /// Parses and validates config text. `file` names it in diagnostics.
    pub fn from_toml(src: &str, file: &str, base: &Path) -> Result<Config, Error> {
        Config::parse(src, file, base, false)
    }

    fn parse(src: &str, file: &str, base: &Path, defer: bool) -> Result<Config, Error> {
        let mut raw: RawConfig =
            toml::from_str(src).map_err(|e| Error::Config(vec![toml_diagnostic(file, src, &e)]))?;
        let named = raw.upstream.named();
        let mut diags = Vec::new();
        let mut bad = |span: std::ops::Range<usize>, message: String| {
            diags.push(Diagnostic {
                file: file.to_string(),
                line: line_of(src, span.start),
                col: None,
                message,
            });
        };
        let addr = parse_addr(&raw.listen.addr, "listen.addr", &mut bad);
        let admin = parse_addr(&raw.listen.admin, "listen.admin", &mut bad);
        let (origin, path_prefix) = match parse_base_url(raw.upstream.base_url.get_ref()) {
            Ok(v) => v,
            Err(m) => {
                bad(raw.upstream.base_url.span(), m);
                (http::uri::Uri::from_static("http://invalid"), String::new())
            }
        };
        if raw.rewrite.neutral_message.get_ref().trim().is_empty() {
            bad(
                raw.rewrite.neutral_message.span(),
                "rewrite.neutral_message must not be empty".into(),
            );
        }
        if raw.rewrite.neutral_result.get_ref().trim().is_empty() {
            bad(
                raw.rewrite.neutral_result.span(),
                "rewrite.neutral_result must not be empty".into(),
            );
        }
        if *raw.rewrite.max_resumes.get_ref() > 8 {
            bad(
                raw.rewrite.max_resumes.span(),
                "rewrite.max_resumes must be at most 8 (each is a round trip to the provider)"
                    .into(),
            );
        }
        let l = &raw.limits;
        for (name, v) in [
            ("max_request_bytes", l.max_request_bytes),
            ("max_response_bytes", l.max_response_bytes),
            ("max_tool_args_bytes", l.max_tool_args_bytes),
            ("max_held_args_bytes", l.max_held_args_bytes),
            ("max_event_bytes", l.max_event_bytes),
            ("max_body_bytes_in_flight", l.max_body_bytes_in_flight),
            ("max_connections", l.max_connections),
            ("max_streams", l.max_streams),
            (
                "header_read_timeout_secs",
                l.header_read_timeout_secs as usize,
            ),
            (
                "request_body_timeout_secs",
                l.request_body_timeout_secs as usize,
            ),
        ] {
            if v == 0 {
                bad(0..0, format!("limits.{name} must be greater than 0"));
            }
        }
        if raw.upstream.timeout_secs == 0 || raw.upstream.connect_timeout_secs == 0 {
            bad(0..0, "upstream timeouts must be greater than 0".into());
        }
        if raw.policy.namespace_separators.iter().any(String::is_empty) {
            bad(
                0..0,
                "policy.namespace_separators must not hold an empty string".into(),
            );
        }
        if raw.policy.namespace_prefixes.iter().any(|p| p.is_empty()) {
            bad(
                0..0,
                "policy.namespace_prefixes must not hold an empty string".into(),
            );
        }
        if raw.responses.remember_ttl_secs == 0 {
            bad(
                0..0,
                "responses.remember_ttl_secs must be greater than 0".into(),
            );
        }
        if raw.stream.keepalive_ms == 0 {
            bad(0..0, "stream.keepalive_ms must be greater than 0".into());
        }
        let api_key_env = raw.upstream.api_key_env.into_vec();
        let judge_base = match raw.judge.as_ref().and_then(|j| j.base_url.as_ref()) {
            Some(b) => match parse_base_url(b.get_ref()) {
                Ok(v) => Some(v),
                Err(m) => {
                    bad(b.span(), m.replace("upstream.base_url", "judge.base_url"));
                    None
                }
            },
            None => None,
        };
        if let Some(j) = &raw.judge {
            if !(0.0..=1.0).contains(&j.confidence_threshold) {
                bad(
                    0..0,
                    "judge.confidence_threshold must be between 0 and 1".into(),
                );
            }
            if j.timeout_ms == 0 || j.max_tokens == 0 {
                bad(
                    0..0,
                    "judge.timeout_ms and judge.max_tokens must be greater than 0".into(),
                );
            }
            if !(1..=65_536).contains(&j.max_concurrent) {
                bad(
                    0..0,
                    "judge.max_concurrent must be between 1 and 65536".into(),
                );
            }
        }
        telemetry::check(&raw.telemetry, &mut bad);
        approval::check(&raw.approval, &mut bad);
        state::check(&raw.state, &mut bad);
        let a = &raw.admin;
        if !(1..=1024).contains(a.max_connections.get_ref()) {
            bad(
                a.max_connections.span(),
                "admin.max_connections must be between 1 and 1024".into(),
            );
        }
        if a.token_env.trim().is_empty() {
            bad(
                0..0,
                "admin.token_env must name an environment variable".into(),
            );
        }
        let mut deferred = Vec::new();
        if let Some(w) = &raw.approval.webhook {
            let env = &raw.approval.secret_env;
            if std::env::var(env).map_or(true, |v| v.is_empty()) {
                match defer {
                    true => deferred.push(format!(
                        "environment variable {env} (the approval webhook's signing key)"
                    )),
                    false => bad(
                        w.span(),
                        format!("approval.webhook: environment variable {env} (its signing key) is not set"),
                    ),
                }
            }
        }
        let mtls = raw
            .listen
            .tls
            .as_ref()
            .is_some_and(|t| t.client_ca.is_some());
        let clients = clients::parse(&raw.client, mtls, defer, &mut deferred, &mut bad);
        if !raw.client.is_empty() && raw.upstream.auth == AuthMode::Passthrough {
            bad(0..0, "upstream.auth = \"passthrough\" would forward client tokens upstream; it cannot be used with [[client]]".into());
        }
        if raw.client.is_empty() && !raw.listen.allow_anonymous && !addr.ip().is_loopback() {
            bad(
                raw.listen.addr.span(),
                format!("listen.addr {addr} is not a loopback address and no [[client]] is configured: anyone who can reach it could use the upstream key; add [[client]] entries or set listen.allow_anonymous = true"),
            );
        }
        let resolve = |p: &str| -> PathBuf {
            let p = Path::new(p);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }
        };
        let upstream = Upstream {
            origin,
            path_prefix,
            api_key_env,
            auth: raw.upstream.auth,
            key_header: KeyHeader::Bearer,
            timeout: Duration::from_secs(raw.upstream.timeout_secs),
            connect_timeout: Duration::from_secs(raw.upstream.connect_timeout_secs),
            idle_timeout: (raw.upstream.idle_timeout_secs > 0)
                .then(|| Duration::from_secs(raw.upstream.idle_timeout_secs)),
            ca_file: raw.upstream.ca_file.as_deref().map(resolve),
            http2: raw.upstream.http2,
        };
        let clients_set = !raw.client.is_empty();
        let mcp = mcp::build(&raw.mcp, &resolve, &mut bad);
        let named_upstreams = (named.into_iter())
            .map(|(d, r)| {
                (
                    d.name,
                    r.build(d, &upstream, clients_set, &resolve, &mut bad),
                )
            })
            .collect();
        if !diags.is_empty() {
            return Err(Error::Config(diags));
        }
        Ok(Config {
            deferred,
            source: file.to_string(),
            listen: Listen {
                addr,
                admin,
                drain: Duration::from_secs(raw.listen.drain_secs),
                allow_anonymous: raw.listen.allow_anonymous,
                tls: raw.listen.tls.as_ref().map(|t| Tls {
                    cert: resolve(&t.cert),
                    key: resolve(&t.key),
                    client_ca: t.client_ca.as_deref().map(resolve),
                }),
            },
            clients,
            telemetry: telemetry::build(&raw.telemetry, resolve),
            approval: approval::build(&raw.approval, resolve),
            state: state::build(&raw.state, resolve),
            mcp,
            admin: Admin {
                token_env: raw.admin.token_env.clone(),
                hosts: raw
                    .admin
                    .hosts
                    .iter()
                    .map(|h| h.to_ascii_lowercase())
                    .collect(),
                max_connections: *raw.admin.max_connections.get_ref(),
            },
            bridge: raw
                .facts
                .bridge
                .as_ref()
                .map(|b| crate::facts::bridge::Bridge {
                    dir: resolve(&b.dir),
                    out: resolve(&b.out),
                    interval: Duration::from_secs(b.interval_secs.max(1)),
                }),
            judge: raw.judge.map(|j| {
                let mut u = upstream.clone();
                if let Some((origin, prefix)) = judge_base {
                    u.origin = origin;
                    u.path_prefix = prefix;
                }
                if let Some(k) = j.api_key_env {
                    u.api_key_env = k.into_vec();
                }
                u.auth = AuthMode::Inject;
                u.timeout = Duration::from_millis(j.timeout_ms);
                Judge {
                    upstream: u,
                    model: j.model.clone(),
                    max_tokens: j.max_tokens,
                    confidence_threshold: j.confidence_threshold,
                    cache_ttl: Duration::from_secs(j.cache_ttl_secs),
                    cache_capacity: j.cache_capacity.max(1),
                    max_concurrent: j.max_concurrent,
                    output: OutputCheck {
                        model: j.output.model.unwrap_or_else(|| j.model.clone()),
                        max_tokens: j.output.max_tokens,
                        timeout: Duration::from_millis(j.output.timeout_ms),
                    },
                }
            }),
            upstream,
            named_upstreams,
            policy: Policy {
                dir: raw.policy.dir.as_deref().map(resolve),
                default_phase: raw.policy.default_phase.clone(),
                hide_denied_tools: raw.policy.hide_denied_tools,
                mode: raw.policy.mode,
                namespace_separators: raw.policy.namespace_separators.clone(),
                namespace_prefixes: raw.policy.namespace_prefixes.clone(),
                reload: Duration::from_secs(raw.policy.reload_secs.max(1)),
                reload_mode: raw.policy.reload,
                settle: Duration::from_millis(raw.policy.settle_ms),
                reload_drops: raw.policy.reload_drops,
            },
            audit: Audit {
                path: match raw.audit.path.as_str() {
                    "-" => AuditPath::Stdout,
                    p => AuditPath::File(resolve(p)),
                },
                include_judge_reason: raw.audit.include_judge_reason,
                on_error: raw.audit.on_error,
                max_bytes: (raw.audit.max_bytes > 0).then_some(raw.audit.max_bytes),
                keep: raw.audit.keep.max(1),
                key_env: raw.audit.key_env.clone(),
            },
            rewrite: Rewrite {
                neutral_message: raw.rewrite.neutral_message.into_inner().into(),
                errors: raw.rewrite.errors,
                mode: raw.rewrite.mode,
                max_resumes: raw.rewrite.max_resumes.into_inner(),
                neutral_result: raw.rewrite.neutral_result.into_inner().into(),
            },
            limits: Limits {
                max_request_bytes: l.max_request_bytes,
                max_body_bytes_in_flight: l.max_body_bytes_in_flight,
                max_response_bytes: l.max_response_bytes,
                max_tool_args_bytes: l.max_tool_args_bytes,
                max_held_args_bytes: l.max_held_args_bytes,
                max_event_bytes: l.max_event_bytes,
                max_connections: l.max_connections,
                max_streams: l.max_streams,
                header_read_timeout: Duration::from_secs(l.header_read_timeout_secs),
                request_body_timeout: Duration::from_secs(l.request_body_timeout_secs),
            },
            stream: Stream {
                keepalive: Duration::from_millis(raw.stream.keepalive_ms),
            },
            text_tool_calls: raw.gate.text_tool_calls,
            log_format: raw.log.format,
            responses: Responses {
                remember_max: raw.responses.remember_max,
                remember_max_bytes: raw.responses.remember_max_bytes,
                remember_ttl: Duration::from_secs(raw.responses.remember_ttl_secs),
            },
            fence: Fence {
                enabled: raw.fence.enabled,
                key_env: raw.fence.key_env.clone(),
                max_tool_result_bytes: (raw.fence.max_tool_result_bytes > 0)
                    .then_some(raw.fence.max_tool_result_bytes),
            },
        })
    }
}

#[cfg(test)]
mod tests;
