//! `[[mcp]]`: MCP servers the agent reaches through toolgate, each at
//! `/mcp/{name}` on the data port (Streamable HTTP), its `tools/call`
//! gated by the same policy as the model's calls.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// One `[[mcp]]` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcp {
    pub(crate) name: Spanned<String>,
    /// Without one the entry is a stdio server's (`toolgate mcp`).
    pub(crate) url: Option<Spanned<String>>,
    /// A header the server's credentials go in (`Authorization`, …).
    pub(crate) auth_header: Option<String>,
    /// The environment variable holding that header's value.
    pub(crate) auth_env: Option<String>,
    #[serde(default = "timeout")]
    pub(crate) timeout_secs: u64,
    /// A pin file (`toolgate mcp pin`): the tools and their digests.
    pub(crate) pins: Option<String>,
}

fn timeout() -> u64 {
    60
}

/// One MCP server, checked.
#[derive(Debug, Clone)]
pub struct Mcp {
    /// Its name: the path (`/mcp/{name}`) and the namespace its tools are
    /// gated under (`{name}.{tool}`).
    pub name: String,
    /// The server's Streamable HTTP endpoint; `None`: a stdio server run
    /// by `toolgate mcp` (not served at `/mcp/{name}`).
    pub url: Option<String>,
    /// `(header, environment variable)` of the server's credentials.
    pub auth: Option<(String, String)>,
    /// How long one exchange with the server may take.
    pub timeout: Duration,
    /// The pin file: only the tools it names, as it pins them, are served
    /// (without one, tools are pinned on first sight).
    pub pins: Option<std::path::PathBuf>,
}

/// Checks the entries; problems go to `bad` with their place in the file.
pub(super) fn build(
    raw: &[RawMcp],
    resolve: &dyn Fn(&str) -> std::path::PathBuf,
    bad: &mut impl FnMut(std::ops::Range<usize>, String),
) -> Vec<Mcp> {
    let mut out: Vec<Mcp> = Vec::new();
    for r in raw {
        let name = r.name.get_ref();
        let ok_name = !name.is_empty()
            && name.len() <= 64
            && (name.bytes())
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !ok_name {
            bad(
                r.name.span(),
                format!("mcp.name '{name}' must be 1 to 64 of a-z, 0-9, '_' and '-'"),
            );
        }
        if out.iter().any(|m| &m.name == name) {
            bad(r.name.span(), format!("mcp.name '{name}' is given twice"));
        }
        if let Some(url) = &r.url {
            let u = url.get_ref();
            if super::parse_base_url(u).is_err() {
                bad(url.span(), format!("mcp.url '{u}' is not an http(s) URL"));
            }
        }
        let auth = match (&r.auth_header, &r.auth_env) {
            (Some(h), Some(e)) => {
                if http::HeaderName::from_bytes(h.as_bytes()).is_err() {
                    bad(
                        r.name.span(),
                        format!("mcp.auth_header '{h}' is not a header name"),
                    );
                }
                Some((h.to_ascii_lowercase(), e.clone()))
            }
            (None, None) => None,
            _ => {
                bad(
                    r.name.span(),
                    "mcp.auth_header and mcp.auth_env go together".into(),
                );
                None
            }
        };
        if r.timeout_secs == 0 {
            bad(
                r.name.span(),
                "mcp.timeout_secs must be greater than 0".into(),
            );
        }
        out.push(Mcp {
            name: name.clone(),
            url: r.url.as_ref().map(|u| u.get_ref().clone()),
            auth,
            timeout: Duration::from_secs(r.timeout_secs),
            pins: r.pins.as_deref().map(resolve),
        });
    }
    out
}
