//! What the admin port checks before it answers: a `Host` header that names
//! an address of this port (an IP address, `localhost`, or a name in
//! `[admin] hosts`), so a page a browser loaded from a rebound DNS name
//! cannot read it; and for a request that changes state, the bearer token
//! from `[admin] token_env`, which a cross-site form cannot send.

use http::{header, HeaderMap};

use crate::digest::sha256;

/// The admin port's checks, made once at start.
pub struct Guard {
    /// The SHA-256 of the token; `None` when `token_env` is unset (then no
    /// request may change state).
    token: Option<[u8; 32]>,
    hosts: Vec<String>,
}

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The `Host` header names no address of this port.
    Host,
    /// No token is configured for requests that change state.
    NoToken,
    /// The request's bearer token is missing or wrong.
    Token,
}

impl Guard {
    /// Reads the token from `token_env`.
    pub fn new(admin: &crate::config::Admin) -> Guard {
        let token = std::env::var(&admin.token_env)
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .map(|t| sha256(t.as_bytes()));
        Guard {
            token,
            hosts: admin.hosts.clone(),
        }
    }

    /// Whether the request's `Host` (if any: HTTP/1.0 sends none) names
    /// this port by address, `localhost` or a configured name.
    pub fn host(&self, h: &HeaderMap) -> Result<(), Refusal> {
        let Some(host) = h.get(header::HOST) else {
            return Ok(());
        };
        let host = host.to_str().map_err(|_| Refusal::Host)?.trim();
        let name = match host.strip_prefix('[') {
            // `[v6]` or `[v6]:port`.
            Some(rest) => rest.split(']').next().unwrap_or_default(),
            None => host.rsplit_once(':').map_or(host, |(n, _)| n),
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let allowed = name.parse::<std::net::IpAddr>().is_ok()
            || name == "localhost"
            || self.hosts.contains(&name);
        allowed.then_some(()).ok_or(Refusal::Host)
    }

    /// Whether a request that changes state carries the admin token.
    pub fn token(&self, h: &HeaderMap) -> Result<(), Refusal> {
        let want = self.token.ok_or(Refusal::NoToken)?;
        let given = h
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or(Refusal::Token)?;
        // Hashes compared, so the time taken says nothing about the token.
        (sha256(given.trim().as_bytes()) == want)
            .then_some(())
            .ok_or(Refusal::Token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            if let Ok(v) = v.parse() {
                h.insert(*k, v);
            }
        }
        h
    }

    fn guard(token: Option<&str>, hosts: &[&str]) -> Guard {
        Guard {
            token: token.map(|t| sha256(t.as_bytes())),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
        }
    }

    #[test]
    fn hosts_are_addresses_localhost_or_named() {
        let g = guard(None, &["toolgate.internal"]);
        for ok in [
            "127.0.0.1:9090",
            "10.0.0.7:9090",
            "[::1]:9090",
            "localhost:9090",
            "LOCALHOST",
            "toolgate.internal:9090",
            "[fe80::1]",
        ] {
            assert_eq!(g.host(&headers(&[("host", ok)])), Ok(()), "{ok}");
        }
        for bad in [
            "evil.example:9090",
            "127.0.0.1.evil.example",
            "localhost.evil.example:9090",
            "",
        ] {
            assert_eq!(
                g.host(&headers(&[("host", bad)])),
                Err(Refusal::Host),
                "{bad}"
            );
        }
        assert_eq!(g.host(&HeaderMap::new()), Ok(()));
    }

    #[test]
    fn state_changes_need_the_token() {
        let none = guard(None, &[]);
        assert_eq!(
            none.token(&headers(&[("authorization", "Bearer x")])),
            Err(Refusal::NoToken)
        );
        let g = guard(Some("s3cret"), &[]);
        assert_eq!(
            g.token(&headers(&[("authorization", "Bearer s3cret")])),
            Ok(())
        );
        assert_eq!(
            g.token(&headers(&[("authorization", "Bearer wrong")])),
            Err(Refusal::Token)
        );
        assert_eq!(g.token(&HeaderMap::new()), Err(Refusal::Token));
    }
}
