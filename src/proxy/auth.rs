//! Client authentication: `Authorization: Bearer <token>` (or `x-api-key:
//! <token>` as the Anthropic SDKs send it, `x-goog-api-key` as Google's do) → the `[[client]]` whose token
//! hash matches becomes the principal policies see; over mutual TLS, the
//! `[[client]]` whose `cert_cn`/`cert_uri` the client certificate carries.
//! With no clients configured every caller is `anonymous`. A missing or wrong
//! token is a generic 401 that says nothing about which clients exist.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::{header, HeaderMap};

use crate::config::Client;
use crate::error::Error;
use crate::net::peer::PeerNames;

/// How often a failed client authentication is logged at most.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Failed client authentications: each is counted; a line at `warn` says
/// how many failed since the last one, at most every [`WARN_EVERY`], so
/// a flood of bad tokens cannot flood the log.
#[derive(Debug, Default)]
pub struct Failures {
    /// When the last line was written, and the count it reported up to.
    last: Mutex<Option<(Instant, u64)>>,
}

impl Failures {
    /// Records that authentication failed; `total` counts every failure so far.
    pub fn record(&self, total: u64) {
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        let since = match *last {
            Some((at, _)) if at.elapsed() < WARN_EVERY => return,
            Some((_, reported)) => total.saturating_sub(reported),
            None => total,
        };
        *last = Some((Instant::now(), total));
        drop(last);
        tracing::warn!(failures = since, "client authentication failed");
    }
}

/// The principal name for this request's headers and, over mutual TLS, its
/// connection's client certificate.
///
/// A certificate that names a client makes it the principal; a token sent
/// beside it (SDKs always send one) is then ignored unless it is another
/// client's, which is refused: one request, one identity. A certificate
/// naming two clients is refused too.
pub fn principal(
    clients: &[Client],
    headers: &HeaderMap,
    peer: Option<&PeerNames>,
) -> Result<String, Error> {
    if clients.is_empty() {
        return Ok(crate::context::ANONYMOUS.into());
    }
    let by_cert = match peer {
        Some(p) => p.client(clients)?,
        None => None,
    };
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        });
    // A provider's own key header (`x-api-key` as the Anthropic SDKs send
    // a key, `x-goog-api-key` as Google's do).
    let api_key = (crate::config::KEY_HEADERS.into_iter())
        .find_map(|h| headers.get(h).and_then(|v| v.to_str().ok()));
    let token = bearer.or(api_key).map(str::trim).filter(|t| !t.is_empty());
    let by_token = token.and_then(|t| by_token(clients, t));
    match (by_cert, by_token) {
        (Some(c), None) => Ok(c.to_string()),
        (Some(c), Some(t)) if c == t => Ok(t),
        (Some(_), Some(_)) => Err(Error::Unauthorized),
        (None, found) => found.ok_or(Error::Unauthorized),
    }
}

/// The client whose token this is.
fn by_token(clients: &[Client], token: &str) -> Option<String> {
    let hash = crate::digest::sha256(token.as_bytes());
    // Compare every entry in full, so timing says nothing about which matched.
    let mut found = None;
    for c in clients {
        let Some(known) = &c.token_sha256 else {
            continue;
        };
        if crate::digest::same(known, &hash) && found.is_none() {
            found = Some(c.name.clone());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CertName;

    fn clients() -> Vec<Client> {
        vec![
            Client {
                name: "alpha".into(),
                token_sha256: Some(crate::digest::sha256(b"tok-alpha")),
                token: None,
                cert: None,
            },
            Client {
                name: "beta".into(),
                token_sha256: Some(crate::digest::sha256(b"tok-beta")),
                token: None,
                cert: None,
            },
            Client {
                name: "gamma".into(),
                token_sha256: None,
                token: None,
                cert: Some(CertName::Uri("spiffe://example.org/gamma".into())),
            },
        ]
    }

    fn with(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, v.parse().unwrap());
        h
    }

    #[test]
    fn tokens_map_to_principals() {
        let p = |h: &HeaderMap| principal(&clients(), h, None);
        assert_eq!(p(&with("Bearer tok-beta")).unwrap(), "beta");
        assert!(matches!(p(&with("Bearer nope")), Err(Error::Unauthorized)));
        assert!(matches!(p(&HeaderMap::new()), Err(Error::Unauthorized)));
        assert!(matches!(
            p(&with("Basic dG9rLWFscGhh")),
            Err(Error::Unauthorized)
        ));
        assert_eq!(
            principal(&[], &HeaderMap::new(), None).unwrap(),
            "anonymous"
        );
        let mut h = HeaderMap::new();
        h.insert("x-api-key", "tok-alpha".parse().unwrap());
        assert_eq!(p(&h).unwrap(), "alpha");
        h.insert("x-api-key", "nope".parse().unwrap());
        assert!(matches!(p(&h), Err(Error::Unauthorized)));
    }

    #[test]
    fn a_client_certificate_names_its_principal() {
        let gamma = PeerNames {
            cn: Some("beta".into()),
            uris: vec!["spiffe://example.org/gamma".into()],
        };
        let none = PeerNames::default();
        let p = |h: &HeaderMap, peer: &PeerNames| principal(&clients(), h, Some(peer));
        // The certificate alone, or with a token that is no client's (an
        // SDK's placeholder key).
        assert_eq!(p(&HeaderMap::new(), &gamma).unwrap(), "gamma");
        assert_eq!(p(&with("Bearer unused"), &gamma).unwrap(), "gamma");
        // Another client's token beside it: refused, not chosen between.
        assert!(matches!(
            p(&with("Bearer tok-alpha"), &gamma),
            Err(Error::Unauthorized)
        ));
        // A certificate that names no client leaves the token to decide (a
        // common name that equals a token client's name is no proof).
        assert_eq!(p(&with("Bearer tok-alpha"), &none).unwrap(), "alpha");
        assert!(matches!(
            p(&HeaderMap::new(), &none),
            Err(Error::Unauthorized)
        ));
    }
}
