//! `[[client]]` entries: a principal each, known by the SHA-256 of its token
//! (`token_env`, `token_sha256`) or by a name in its TLS client certificate
//! (`cert_cn`, `cert_uri`, which need mutual TLS).

use toml::Spanned;

use super::raw::RawClient;
use super::{CertName, Client};

/// The clients of `raw`; what is wrong goes to `bad`, and with `defer` an
/// unset token variable goes to `deferred` instead. `mtls`: client
/// certificates are verified (`[listen.tls] client_ca`).
pub(super) fn parse(
    raw: &[Spanned<RawClient>],
    mtls: bool,
    defer: bool,
    deferred: &mut Vec<String>,
    bad: &mut impl FnMut(std::ops::Range<usize>, String),
) -> Vec<Client> {
    let mut clients = Vec::new();
    for c in raw {
        let at = c.span();
        let c = c.get_ref();
        let cert = match (&c.cert_cn, &c.cert_uri) {
            (Some(cn), None) => Some(CertName::Cn(cn.clone())),
            (None, Some(uri)) => Some(CertName::Uri(uri.clone())),
            (None, None) => None,
            (Some(_), Some(_)) => {
                bad(
                    at.clone(),
                    format!("client `{}`: set one of cert_cn and cert_uri", c.name),
                );
                None
            }
        };
        if cert.is_some() && !mtls {
            bad(
                at.clone(),
                format!(
                    "client `{}`: a certificate name needs [listen.tls] client_ca (mutual TLS), which verifies the certificates that carry it",
                    c.name
                ),
            );
        }
        if cert.as_ref().is_some_and(|n| match n {
            CertName::Cn(s) | CertName::Uri(s) => s.trim().is_empty(),
        }) {
            bad(
                at.clone(),
                format!("client `{}`: the certificate name is empty", c.name),
            );
        }
        let (hash, token) = match (&c.token_env, &c.token_sha256, &cert) {
            (Some(env), None, None) => match std::env::var(env).ok().filter(|t| !t.is_empty()) {
                Some(t) => (Some(crate::digest::sha256(t.as_bytes())), Some(t)),
                None if defer => {
                    deferred.push(format!(
                        "environment variable {env} (client `{}`'s token)",
                        c.name
                    ));
                    (Some([0; 32]), None)
                }
                None => {
                    bad(
                        at.clone(),
                        format!("client `{}`: environment variable {env} is not set", c.name),
                    );
                    (None, None)
                }
            },
            (None, Some(hex), None) => match crate::digest::unhex32(hex) {
                Some(h) => (Some(h), None),
                None => {
                    bad(
                        at.clone(),
                        format!("client `{}`: token_sha256 must be 64 hex digits", c.name),
                    );
                    (None, None)
                }
            },
            (None, None, Some(_)) => (None, None),
            _ => {
                bad(
                    at.clone(),
                    format!(
                        "client `{}`: set exactly one of token_env, token_sha256, cert_cn and cert_uri",
                        c.name
                    ),
                );
                (None, None)
            }
        };
        if c.name.trim().is_empty() {
            bad(at.clone(), "client name must not be empty".into());
        }
        // The name every agent has without [[client]] (context::ANONYMOUS).
        if c.name.trim() == "anonymous" {
            bad(
                at.clone(),
                "client name `anonymous` is the name of unauthenticated agents".into(),
            );
        }
        if hash.is_some() || cert.is_some() {
            clients.push(Client {
                name: c.name.clone(),
                token_sha256: hash,
                token,
                cert,
            });
        }
    }
    clients
}
