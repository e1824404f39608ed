//! `[state]`: where state that replicas must share is kept: in this
//! process (`memory`, the default) or in Redis (`redis`), and what a call
//! that needs shared state meets when Redis cannot be reached.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Each replica keeps its own state (one replica, or a sidecar).
    #[default]
    Memory,
    /// Replicas share state in Redis (or Valkey).
    Redis,
}

/// What a call that needs shared state meets while Redis cannot be reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// Rejected, with the reason in the audit trail.
    #[default]
    FailClosed,
    /// Decided on this replica's own state, with a warning and a metric.
    Local,
}

impl OnError {
    /// Its name in the configuration and the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            OnError::FailClosed => "fail_closed",
            OnError::Local => "local",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawState {
    pub(crate) backend: Backend,
    pub(crate) url: Option<Spanned<String>>,
    pub(crate) url_env: Option<String>,
    pub(crate) key_prefix: String,
    pub(crate) on_error: OnError,
    pub(crate) timeout_ms: u64,
    pub(crate) ca_file: Option<String>,
}

impl Default for RawState {
    fn default() -> Self {
        RawState {
            backend: Backend::Memory,
            url: None,
            url_env: None,
            key_prefix: "toolgate:".into(),
            on_error: OnError::FailClosed,
            timeout_ms: 250,
            ca_file: None,
        }
    }
}

/// `[state]`, checked.
#[derive(Clone)]
pub struct State {
    pub backend: Backend,
    /// `redis://[user:password@]host[:port][/db]`, or `rediss://` for TLS
    /// (it may hold a password: never logged, never in an error).
    pub url: String,
    /// Every key toolgate writes starts with it.
    pub key_prefix: String,
    pub on_error: OnError,
    /// How long one exchange with Redis (or a connection attempt) may take.
    pub timeout: Duration,
    /// PEM CA certificates a `rediss://` server is verified against
    /// (without: the system's roots).
    pub ca_file: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("backend", &self.backend)
            .field("key_prefix", &self.key_prefix)
            .field("on_error", &self.on_error)
            .field("timeout", &self.timeout)
            .field("ca_file", &self.ca_file)
            .finish_non_exhaustive()
    }
}

impl Default for State {
    fn default() -> Self {
        State {
            backend: Backend::Memory,
            url: String::new(),
            key_prefix: "toolgate:".into(),
            on_error: OnError::FailClosed,
            timeout: Duration::from_millis(250),
            ca_file: None,
        }
    }
}

/// The URL from `url`, else from the environment variable `url_env`.
fn url_of(r: &RawState) -> Option<String> {
    match (&r.url, &r.url_env) {
        (Some(u), _) => Some(u.get_ref().clone()),
        (None, Some(var)) => std::env::var(var).ok().filter(|v| !v.trim().is_empty()),
        (None, None) => None,
    }
}

/// Checks `[state]`; problems go to `bad` with their place in the file.
pub(super) fn check(r: &RawState, bad: &mut impl FnMut(std::ops::Range<usize>, String)) {
    let span = r.url.as_ref().map_or(0..0, Spanned::span);
    if r.url.is_some() && r.url_env.is_some() {
        bad(span.clone(), "state: set url or url_env, not both".into());
    }
    if !(1..=60_000).contains(&r.timeout_ms) {
        bad(0..0, "state.timeout_ms must be between 1 and 60000".into());
    }
    if r.key_prefix.is_empty() || r.key_prefix.len() > 64 {
        bad(0..0, "state.key_prefix must be 1 to 64 bytes".into());
    }
    if r.backend != Backend::Redis {
        return;
    }
    let Some(url) = url_of(r) else {
        let why = match &r.url_env {
            Some(var) => format!("state.url_env: environment variable {var} is not set"),
            None => "state.backend = \"redis\" needs url or url_env".into(),
        };
        bad(span, why);
        return;
    };
    // Only the scheme is named: the rest may hold a password.
    match url.split_once("://").map(|(s, _)| s) {
        Some("redis") if r.ca_file.is_some() => {
            bad(span, "state.ca_file is for a rediss:// (TLS) URL".into())
        }
        Some("redis" | "rediss") => {}
        _ => bad(span, "state.url must be a redis:// or rediss:// URL".into()),
    }
}

/// The checked table, with a relative `ca_file` resolved by `resolve`.
pub(super) fn build(r: &RawState, resolve: impl Fn(&str) -> std::path::PathBuf) -> State {
    State {
        ca_file: r.ca_file.as_deref().map(resolve),
        backend: r.backend,
        url: url_of(r).unwrap_or_default(),
        key_prefix: r.key_prefix.clone(),
        on_error: r.on_error,
        timeout: Duration::from_millis(r.timeout_ms.max(1)),
    }
}
