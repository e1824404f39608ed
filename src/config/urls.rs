//! Addresses and URLs in the config: `IP:port` listeners, and base URLs
//! split into an origin and a path prefix.

use std::net::SocketAddr;

use toml::Spanned;

pub(super) fn parse_addr(
    v: &Spanned<String>,
    key: &str,
    bad: &mut impl FnMut(std::ops::Range<usize>, String),
) -> SocketAddr {
    match v.get_ref().parse::<SocketAddr>() {
        Ok(a) => a,
        Err(_) => {
            bad(
                v.span(),
                format!("{key}: `{}` is not an IP:port address", v.get_ref()),
            );
            SocketAddr::from(([127, 0, 0, 1], 0))
        }
    }
}

/// Splits `https://host/api/v1` into the origin and the path prefix `/api/v1`.
pub(crate) fn parse_base_url(s: &str) -> Result<(http::uri::Uri, String), String> {
    let uri: http::uri::Uri = s
        .parse()
        .map_err(|e| format!("upstream.base_url `{s}`: {e}"))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        _ => {
            return Err(format!(
                "upstream.base_url `{s}` must start with http:// or https://"
            ))
        }
    }
    let authority = uri
        .authority()
        .ok_or_else(|| format!("upstream.base_url `{s}` has no host"))?;
    if uri.query().is_some() {
        return Err(format!("upstream.base_url `{s}` must not have a query"));
    }
    let origin = http::uri::Uri::builder()
        .scheme(uri.scheme_str().unwrap_or("https"))
        .authority(authority.as_str())
        .path_and_query("/")
        .build()
        .map_err(|e| format!("upstream.base_url `{s}`: {e}"))?;
    let prefix = uri.path().trim_end_matches('/').to_string();
    Ok((origin, prefix))
}
