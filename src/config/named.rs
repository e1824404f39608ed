//! `[upstream.NAME]`: an upstream a wire format has on its own
//! (`[upstream.messages]`, `[upstream.gemini]`), its timeouts, CA file and
//! HTTP/2 choice defaulting to `[upstream]`'s.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::raw::OneOrMany;
use super::{parse_base_url, AuthMode, KeyHeader, NamedAuth, Upstream};

/// A named section as written (a key left out takes the section's
/// [`Defaults`], or `[upstream]`'s).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNamed {
    pub(crate) base_url: Option<Spanned<String>>,
    pub(crate) api_key_env: Option<OneOrMany>,
    pub(crate) auth: Option<NamedAuth>,
    pub(crate) timeout_secs: Option<u64>,
    pub(crate) connect_timeout_secs: Option<u64>,
    pub(crate) idle_timeout_secs: Option<u64>,
    pub(crate) ca_file: Option<String>,
    pub(crate) http2: Option<bool>,
}

/// What a named section is when its keys are left out.
pub(crate) struct Defaults {
    pub(crate) name: &'static str,
    pub(crate) base_url: &'static str,
    pub(crate) api_key_env: &'static [&'static str],
    /// The header its provider reads a key from.
    pub(crate) key_header: &'static str,
}

/// `[upstream.messages]`: the Anthropic Messages API.
pub(crate) const MESSAGES: Defaults = Defaults {
    name: "messages",
    base_url: "https://api.anthropic.com/v1",
    api_key_env: &["ANTHROPIC_API_KEY"],
    key_header: "x-api-key",
};

/// `[upstream.gemini]`: Google's Gemini API (the version is in each path).
pub(crate) const GEMINI: Defaults = Defaults {
    name: "gemini",
    base_url: "https://generativelanguage.googleapis.com",
    api_key_env: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    key_header: "x-goog-api-key",
};

/// Every header a provider reads a key from, besides `Authorization`: an
/// agent's key in one is dropped when toolgate sends its own, and a client
/// token is read from one.
pub const KEY_HEADERS: [&str; 3] = ["api-key", MESSAGES.key_header, GEMINI.key_header];

impl RawNamed {
    /// Checks the section (`bad` takes each finding) and builds it over
    /// `upstream`'s defaults; `resolve` makes a path absolute.
    pub(crate) fn build(
        self,
        d: &Defaults,
        upstream: &Upstream,
        clients: bool,
        resolve: &dyn Fn(&str) -> PathBuf,
        bad: &mut dyn FnMut(std::ops::Range<usize>, String),
    ) -> Upstream {
        let name = d.name;
        let auth = self.auth.unwrap_or(NamedAuth::Header);
        let mode = match auth {
            NamedAuth::Passthrough => AuthMode::Passthrough,
            _ => AuthMode::Inject,
        };
        let base = (self.base_url).unwrap_or_else(|| Spanned::new(0..0, d.base_url.into()));
        let (origin, path_prefix) = match parse_base_url(base.get_ref()) {
            Ok(v) => v,
            Err(e) => {
                bad(
                    base.span(),
                    e.replace("upstream.base_url", &format!("upstream.{name}.base_url")),
                );
                (http::uri::Uri::from_static("http://invalid"), String::new())
            }
        };
        if self.timeout_secs == Some(0) || self.connect_timeout_secs == Some(0) {
            bad(
                0..0,
                format!("upstream.{name} timeouts must be greater than 0"),
            );
        }
        if clients && mode == AuthMode::Passthrough {
            bad(0..0, format!("upstream.{name}.auth = \"passthrough\" would forward client tokens upstream; it cannot be used with [[client]]"));
        }
        Upstream {
            origin,
            path_prefix,
            api_key_env: match self.api_key_env {
                Some(v) => v.into_vec(),
                None => d.api_key_env.iter().map(|s| s.to_string()).collect(),
            },
            auth: mode,
            key_header: match auth {
                NamedAuth::Bearer => KeyHeader::Bearer,
                _ => KeyHeader::Named(d.key_header),
            },
            timeout: self
                .timeout_secs
                .map_or(upstream.timeout, Duration::from_secs),
            connect_timeout: self
                .connect_timeout_secs
                .map_or(upstream.connect_timeout, Duration::from_secs),
            idle_timeout: match self.idle_timeout_secs {
                None => upstream.idle_timeout,
                Some(0) => None,
                Some(s) => Some(Duration::from_secs(s)),
            },
            ca_file: self
                .ca_file
                .as_deref()
                .map(resolve)
                .or_else(|| upstream.ca_file.clone()),
            http2: self.http2.unwrap_or(upstream.http2),
        }
    }
}
