//! `[approval]`: how calls with the `ask` verdict wait for a person: how
//! long, how often a waiting stream hears a keep-alive, how many may wait,
//! who may answer (a bearer token from the environment) and where the
//! question is also sent (a signed webhook).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// The longest a call may wait: SDKs time a read out at 600 s.
pub const MAX_TIMEOUT_SECS: f64 = 540.0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawApproval {
    #[serde(alias = "timeout")]
    pub(crate) timeout_secs: Spanned<f64>,
    #[serde(alias = "keepalive")]
    pub(crate) keepalive_secs: Spanned<f64>,
    pub(crate) max_pending: Spanned<usize>,
    pub(crate) token_env: String,
    pub(crate) webhook: Option<Spanned<String>>,
    pub(crate) secret_env: String,
    pub(crate) webhook_ca_file: Option<String>,
    pub(crate) session_ttl_secs: u64,
}

impl Default for RawApproval {
    fn default() -> Self {
        RawApproval {
            timeout_secs: Spanned::new(0..0, 120.0),
            keepalive_secs: Spanned::new(0..0, 5.0),
            max_pending: Spanned::new(0..0, 1000),
            token_env: "TOOLGATE_APPROVAL_TOKEN".into(),
            webhook: None,
            secret_env: "TOOLGATE_APPROVAL_SECRET".into(),
            webhook_ca_file: None,
            session_ttl_secs: 3600,
        }
    }
}

/// `[approval]`, checked.
#[derive(Debug, Clone)]
pub struct Approval {
    /// How long a call waits for an answer (then it is a neutral failure).
    pub timeout: Duration,
    /// How often a waiting stream sends an SSE comment.
    pub keepalive: Duration,
    /// Calls that may wait at once; an `ask` over it fails closed.
    pub max_pending: usize,
    /// The environment variable holding the API's bearer token.
    pub token_env: String,
    /// Where each question is also POSTed, signed.
    pub webhook: Option<String>,
    /// The environment variable holding the webhook's signing key.
    pub secret_env: String,
    /// Extra CA certificates for an `https` webhook.
    pub webhook_ca_file: Option<PathBuf>,
    /// How long a `scope: "session"` approval holds.
    pub session_ttl: Duration,
}

impl Default for Approval {
    fn default() -> Self {
        build(&RawApproval::default(), |p: &str| PathBuf::from(p))
    }
}

/// The checked table, with relative paths resolved by `resolve`.
pub(super) fn build(r: &RawApproval, resolve: impl Fn(&str) -> PathBuf) -> Approval {
    let secs = |s: f64| Duration::try_from_secs_f64(s).unwrap_or(Duration::from_secs(1));
    Approval {
        timeout: secs(*r.timeout_secs.get_ref()),
        keepalive: secs(*r.keepalive_secs.get_ref()),
        max_pending: *r.max_pending.get_ref(),
        token_env: r.token_env.clone(),
        webhook: r.webhook.as_ref().map(|w| w.get_ref().clone()),
        secret_env: r.secret_env.clone(),
        webhook_ca_file: r.webhook_ca_file.as_deref().map(resolve),
        session_ttl: Duration::from_secs(r.session_ttl_secs.max(1)),
    }
}

/// Whether a URL's host is this machine (`localhost`, 127.0.0.0/8, `::1`).
fn loopback(uri: &http::uri::Uri) -> bool {
    let host = uri.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Checks `[approval]`; problems go to `bad` with their place in the file.
pub(super) fn check(r: &RawApproval, bad: &mut impl FnMut(std::ops::Range<usize>, String)) {
    let t = &r.timeout_secs;
    if !(*t.get_ref() > 0.0 && *t.get_ref() <= MAX_TIMEOUT_SECS) {
        bad(
            t.span(),
            format!("approval.timeout_secs must be more than 0 and at most {MAX_TIMEOUT_SECS} (SDK read time-outs are 600 s)"),
        );
    }
    let k = &r.keepalive_secs;
    if !(*k.get_ref() >= 0.05 && *k.get_ref() <= 300.0) {
        bad(
            k.span(),
            "approval.keepalive_secs must be between 0.05 and 300".into(),
        );
    }
    if *r.max_pending.get_ref() == 0 {
        bad(
            r.max_pending.span(),
            "approval.max_pending must be greater than 0".into(),
        );
    }
    if let Some(w) = &r.webhook {
        match super::parse_base_url(w.get_ref()) {
            Err(m) => bad(w.span(), m.replace("upstream.base_url", "approval.webhook")),
            // Plain HTTP only to this machine: elsewhere a question and its
            // answer would cross the network readable and changeable.
            Ok((origin, _)) if origin.scheme_str() == Some("http") && !loopback(&origin) => bad(
                w.span(),
                format!(
                    "approval.webhook `{}` must use https:// (http:// only to a loopback address)",
                    w.get_ref()
                ),
            ),
            Ok(_) => {}
        }
    }
    for (name, v) in [("token_env", &r.token_env), ("secret_env", &r.secret_env)] {
        if v.trim().is_empty() {
            bad(
                0..0,
                format!("approval.{name} must name an environment variable"),
            );
        }
    }
}
