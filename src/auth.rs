//! Client authentication: `Authorization: Bearer <token>` (or `x-api-key:
//! <token>`, as the Anthropic SDKs send it) → the `[[client]]` whose token
//! hash matches becomes the principal policies see. With no
//! clients configured every caller is `anonymous`. A missing or wrong token is
//! a generic 401 that says nothing about which clients exist.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::{header, HeaderMap};

use crate::config::Client;
use crate::error::Error;

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

/// The principal name for this request's headers.
pub fn principal(clients: &[Client], headers: &HeaderMap) -> Result<String, Error> {
    if clients.is_empty() {
        return Ok("anonymous".into());
    }
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        });
    let api_key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    let token = bearer
        .or(api_key)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(Error::Unauthorized)?;
    let hash = crate::digest::sha256(token.as_bytes());
    // Compare every entry in full, so timing says nothing about which matched.
    let mut found = None;
    for c in clients {
        let diff = c
            .token_sha256
            .iter()
            .zip(hash.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff == 0 && found.is_none() {
            found = Some(c.name.clone());
        }
    }
    found.ok_or(Error::Unauthorized)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clients() -> Vec<Client> {
        vec![
            Client {
                name: "alpha".into(),
                token_sha256: crate::digest::sha256(b"tok-alpha"),
                token: None,
            },
            Client {
                name: "beta".into(),
                token_sha256: crate::digest::sha256(b"tok-beta"),
                token: None,
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
        assert_eq!(
            principal(&clients(), &with("Bearer tok-beta")).unwrap(),
            "beta"
        );
        assert!(matches!(
            principal(&clients(), &with("Bearer nope")),
            Err(Error::Unauthorized)
        ));
        assert!(matches!(
            principal(&clients(), &HeaderMap::new()),
            Err(Error::Unauthorized)
        ));
        assert!(matches!(
            principal(&clients(), &with("Basic dG9rLWFscGhh")),
            Err(Error::Unauthorized)
        ));
        assert_eq!(principal(&[], &HeaderMap::new()).unwrap(), "anonymous");
        let mut h = HeaderMap::new();
        h.insert("x-api-key", "tok-alpha".parse().unwrap());
        assert_eq!(principal(&clients(), &h).unwrap(), "alpha");
        h.insert("x-api-key", "nope".parse().unwrap());
        assert!(matches!(
            principal(&clients(), &h),
            Err(Error::Unauthorized)
        ));
    }
}
