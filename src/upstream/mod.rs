//! The upstream client: header hygiene, key injection and the total timeout,
//! over hyper's HTTP/1.1 ([`h1`]) and HTTP/2 client connections, kept in
//! toolgate's pool ([`pool`]), plain or rustls.

pub mod encoding;
pub mod fault;
mod h1;
pub mod judge;
mod pool;
mod resolve;
mod response;
pub mod scrub;
mod stream;

pub use response::ResponseBody;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, Request, Response};
use http_body_util::combinators::BoxBody;

use crate::config::{self, AuthMode, KeyHeader};
use crate::error::Error;

/// A request body sent upstream; its error ends the request (a
/// pass-through body past its deadline, say).
pub type UpstreamBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

pub struct Upstream {
    pool: Arc<pool::Pool>,
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
    prefix: String,
    key: Option<HeaderValue>,
    key_header: KeyHeader,
    auth: AuthMode,
    pub timeout: Duration,
    /// Longest silence between a streamed response's bytes.
    pub idle_timeout: Option<Duration>,
}

/// Whether a header belongs to one connection and is never forwarded:
/// a hop-by-hop header, or one the agent's `Connection` names (`named`).
fn hop_by_hop(name: &HeaderName, named: &[HeaderName]) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    ) || named.contains(name)
}

/// The headers a message's `Connection` names (hop-by-hop too).
fn connection_named(h: &HeaderMap) -> Vec<HeaderName> {
    h.get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect()
}

fn tls_config(ca_file: Option<&std::path::Path>) -> Result<rustls::ClientConfig, Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        for c in crate::net::tls::read_certs(path, "CA file")? {
            roots.add(c).map_err(|e| {
                Error::config(
                    path.display().to_string(),
                    1,
                    format!("bad CA certificate: {e}"),
                )
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config("<tls>", 1, e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(cfg)
}

/// A query string without its `key` parameters; `None` when nothing is left.
fn without_key(q: &str) -> Option<std::borrow::Cow<'_, str>> {
    let is_key = |p: &&str| {
        let name = p.split('=').next().unwrap_or("");
        name.eq_ignore_ascii_case("key")
    };
    if !q.split('&').any(|p| is_key(&p)) {
        return Some(std::borrow::Cow::Borrowed(q));
    }
    let kept: Vec<&str> = q
        .split('&')
        .filter(|p| !is_key(p) && !p.is_empty())
        .collect();
    (!kept.is_empty()).then(|| std::borrow::Cow::Owned(kept.join("&")))
}

/// Whether an agent's header goes on to the upstream: not hop-by-hop, not
/// one toolgate writes itself (host, length, encoding), not toolgate's own
/// (`x-toolgate-*`), and no key of the agent's when toolgate injects its own.
fn forwarded(name: &HeaderName, inject: bool, named: &[HeaderName]) -> bool {
    let own = name == header::HOST
        || name == header::CONTENT_LENGTH
        || name == header::ACCEPT_ENCODING
        || name.as_str().starts_with("x-toolgate-");
    let key =
        inject && (name == header::AUTHORIZATION || config::KEY_HEADERS.contains(&name.as_str()));
    !(own || key || hop_by_hop(name, named))
}

impl Upstream {
    /// A client for one full URL that toolgate sends its own requests to
    /// (the OTLP collector, the approval webhook): no key of its own, the
    /// headers passed as given, `timeout` for connecting and for the answer.
    /// Errors name the config section `place` and the setting `key`.
    pub fn to_url(
        url: &str,
        (place, key): (&str, &str),
        ca_file: Option<&std::path::Path>,
        timeout: std::time::Duration,
    ) -> Result<Upstream, Error> {
        let (origin, prefix) = config::parse_base_url(url).map_err(|m| {
            Error::config(format!("<{place}>"), 1, m.replace("upstream.base_url", key))
        })?;
        Upstream::new(&config::Upstream {
            origin,
            path_prefix: if prefix.is_empty() {
                "/".into()
            } else {
                prefix
            },
            api_key_env: Vec::new(),
            auth: AuthMode::Passthrough,
            key_header: KeyHeader::Bearer,
            timeout,
            connect_timeout: timeout,
            idle_timeout: None,
            ca_file: ca_file.map(std::path::Path::to_path_buf),
            http2: true,
        })
    }

    /// The upstream's host and port (`server.address`, `server.port`).
    pub fn server(&self) -> (&str, u16) {
        let default = match self.scheme == http::uri::Scheme::HTTPS {
            true => 443,
            false => 80,
        };
        (
            self.authority.host(),
            self.authority.port_u16().unwrap_or(default),
        )
    }

    /// Keeps up to `n` idle connections for reuse (`[limits] max_streams`:
    /// no more exchanges than that are in flight at once).
    pub fn keep_idle(self, n: usize) -> Upstream {
        self.pool.keep(n);
        self
    }

    pub fn new(cfg: &config::Upstream) -> Result<Upstream, Error> {
        let key = cfg
            .api_key_env
            .iter()
            .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()));
        let key = match key {
            Some(k) => {
                let text = match cfg.key_header {
                    KeyHeader::Bearer => format!("Bearer {k}"),
                    KeyHeader::Named(_) => k,
                };
                let mut v = HeaderValue::from_str(&text).map_err(|_| {
                    Error::config(
                        "<env>",
                        1,
                        "the upstream key has characters not allowed in a header",
                    )
                })?;
                v.set_sensitive(true);
                Some(v)
            }
            None => {
                if cfg.auth == AuthMode::Inject {
                    let origin = cfg.origin.to_string();
                    tracing::warn!(vars = ?cfg.api_key_env, origin = %origin.trim_end_matches('/'), "no upstream key in the environment; requests to this upstream go without one");
                }
                None
            }
        };
        let scheme = cfg
            .origin
            .scheme()
            .cloned()
            .unwrap_or(http::uri::Scheme::HTTPS);
        let authority = cfg
            .origin
            .authority()
            .cloned()
            .ok_or_else(|| Error::config("<config>", 1, "upstream.base_url has no host"))?;
        let tls = match scheme.as_str() {
            "https" => Some(tls_config(cfg.ca_file.as_deref())?),
            "http" => None,
            other => {
                return Err(Error::config(
                    "<config>",
                    1,
                    format!("upstream.base_url: scheme '{other}' is not http or https"),
                ))
            }
        };
        let target = stream::Target::new(&authority, tls, cfg.connect_timeout, cfg.http2)?;
        Ok(Upstream {
            pool: Arc::new(pool::Pool::new(target)),
            scheme,
            authority,
            prefix: cfg.path_prefix.clone(),
            key,
            key_header: cfg.key_header,
            auth: cfg.auth,
            timeout: cfg.timeout,
            idle_timeout: cfg.idle_timeout,
        })
    }

    /// Closes the idle connections that expired or that the server closed.
    pub fn sweep(&self) -> usize {
        self.pool.sweep()
    }

    /// [`Upstream::sweep`] as it would be at `now` (for tests).
    pub fn sweep_at(&self, now: std::time::Instant) -> usize {
        self.pool.sweep_at(now)
    }

    /// The upstream key's raw value, for redaction (never logged).
    pub fn key_header(&self) -> Option<&HeaderValue> {
        self.key.as_ref()
    }

    /// The upstream key itself (without a `Bearer ` prefix), for redaction.
    pub fn key_text(&self) -> Option<String> {
        let v = self.key.as_ref()?.to_str().ok()?;
        Some(v.strip_prefix("Bearer ").unwrap_or(v).to_string())
    }

    /// Builds the upstream request for `rest` (the path after `/v1`) and `query`.
    pub fn request(
        &self,
        method: http::Method,
        rest: &str,
        query: Option<&str>,
        agent_headers: HeaderMap,
        body: UpstreamBody,
    ) -> Result<Request<UpstreamBody>, Error> {
        // The agent's key in the query (`?key=`, as Google's API takes it)
        // goes no further when toolgate sends its own.
        let query = match query {
            Some(q) if self.auth == AuthMode::Inject => without_key(q),
            q => q.map(std::borrow::Cow::Borrowed),
        };
        let pq = match query.as_deref() {
            Some(q) => format!("{}{rest}?{q}", self.prefix),
            None => format!("{}{rest}", self.prefix),
        };
        let uri = http::Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(pq)
            .build()
            .map_err(|_| Error::BadRequest("The request path is not valid.".into()))?;
        // One pass that keeps what may go on, rather than a removal per
        // name (each one a lookup, 15 of them cost about 4k instructions a
        // request).
        let named = connection_named(&agent_headers);
        let inject = self.auth == AuthMode::Inject;
        let mut headers = HeaderMap::with_capacity(agent_headers.len() + 2);
        let mut current = None;
        for (name, value) in agent_headers {
            // A name's further values come without it.
            if name.is_some() {
                current = name;
            }
            let Some(name) = &current else { continue };
            if forwarded(name, inject, &named) {
                headers.append(name.clone(), value);
            }
        }
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        if let (true, Some(k)) = (inject, &self.key) {
            let name = match self.key_header {
                KeyHeader::Bearer => header::AUTHORIZATION,
                KeyHeader::Named(n) => HeaderName::from_static(n),
            };
            headers.insert(name, k.clone());
        }
        let mut req = Request::new(body);
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        *req.headers_mut() = headers;
        Ok(req)
    }

    /// Sends a request; waits for the response head up to the total timeout.
    pub async fn send(&self, req: Request<UpstreamBody>) -> Result<Response<ResponseBody>, Error> {
        match tokio::time::timeout(self.timeout, self.pool.send(req)).await {
            Err(_) => Err(Error::UpstreamTimeout),
            // toolgate never asks the provider to switch protocols (it sends
            // no `Upgrade`): a 1xx answer is a provider fault on every route.
            Ok(Ok(r)) if r.status().is_informational() => Err(Error::UpstreamUnreadable(
                "an informational status (an upgrade nobody asked for)",
            )),
            Ok(r) => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Empty};

    fn upstream(auth: AuthMode) -> Upstream {
        let mut cfg = config::Config::embedded().unwrap().upstream;
        cfg.api_key_env = vec!["TOOLGATE_TEST_KEY_THAT_IS_UNSET".into()];
        cfg.auth = auth;
        let mut u = Upstream::new(&cfg).unwrap();
        u.key = Some(HeaderValue::from_static("Bearer sk-upstream"));
        u
    }

    fn body() -> UpstreamBody {
        Empty::<Bytes>::new()
            .map_err(|never| match never {})
            .boxed()
    }

    #[test]
    fn joins_paths_and_cleans_headers() {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer agent"),
        );
        h.insert(header::CONNECTION, HeaderValue::from_static("x-hop"));
        h.insert("x-hop", HeaderValue::from_static("1"));
        h.insert("x-toolgate-phase", HeaderValue::from_static("planning"));
        h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("br"));
        h.insert("x-custom", HeaderValue::from_static("kept"));
        h.append("x-custom", HeaderValue::from_static("and kept"));
        h.insert("x-api-key", HeaderValue::from_static("sk-agent"));
        h.insert(header::TE, HeaderValue::from_static("trailers"));
        h.insert(header::HOST, HeaderValue::from_static("toolgate.local"));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("12"));
        let u = upstream(AuthMode::Inject);
        let r = u
            .request(
                http::Method::POST,
                "/chat/completions",
                Some("a=1"),
                h.clone(),
                body(),
            )
            .unwrap();
        assert_eq!(
            r.uri().to_string(),
            "https://openrouter.ai/api/v1/chat/completions?a=1"
        );
        let rh = r.headers();
        assert_eq!(rh[header::AUTHORIZATION], "Bearer sk-upstream");
        assert_eq!(rh[header::ACCEPT_ENCODING], "identity");
        assert!(rh.get("x-hop").is_none() && rh.get(header::CONNECTION).is_none());
        assert!(rh.get("x-toolgate-phase").is_none());
        let custom: Vec<_> = rh.get_all("x-custom").iter().collect();
        assert_eq!(custom, ["kept", "and kept"]);
        for gone in ["x-api-key", "te", "host", "content-length"] {
            assert!(rh.get(gone).is_none(), "{gone} went upstream");
        }
        assert_eq!(rh.len(), 4, "{rh:?}");
        let u = upstream(AuthMode::Passthrough);
        let r = u
            .request(http::Method::GET, "/models", None, h, body())
            .unwrap();
        assert_eq!(r.headers()[header::AUTHORIZATION], "Bearer agent");
        assert_eq!(r.headers()["x-api-key"], "sk-agent");
    }

    #[test]
    fn the_messages_upstream_sends_its_key_as_x_api_key() {
        let mut cfg = config::Config::embedded()
            .unwrap()
            .upstream_section(Some("messages"))
            .clone();
        cfg.api_key_env = vec!["TOOLGATE_TEST_MESSAGES_KEY".into()];
        std::env::set_var("TOOLGATE_TEST_MESSAGES_KEY", "sk-ant-upstream");
        let u = Upstream::new(&cfg).unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("client-token"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer c"));
        h.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        h.insert("anthropic-beta", HeaderValue::from_static("b1"));
        let r = u
            .request(http::Method::POST, "/messages", None, h.clone(), body())
            .unwrap();
        assert_eq!(r.uri().to_string(), "https://api.anthropic.com/v1/messages");
        let rh = r.headers();
        assert_eq!(rh["x-api-key"], "sk-ant-upstream");
        assert!(rh.get(header::AUTHORIZATION).is_none());
        assert_eq!(rh["anthropic-version"], "2023-06-01");
        assert_eq!(rh["anthropic-beta"], "b1");
        assert_eq!(u.key_text().as_deref(), Some("sk-ant-upstream"));
        cfg.key_header = KeyHeader::Bearer;
        let u = Upstream::new(&cfg).unwrap();
        let r = u
            .request(http::Method::POST, "/messages", None, h.clone(), body())
            .unwrap();
        assert_eq!(r.headers()[header::AUTHORIZATION], "Bearer sk-ant-upstream");
        assert!(r.headers().get("x-api-key").is_none());
    }

    #[test]
    fn a_sensitive_key_is_not_debug_printed() {
        let u = upstream(AuthMode::Inject);
        let mut v = u.key_header().unwrap().clone();
        v.set_sensitive(true);
        assert!(!format!("{v:?}").contains("sk-upstream"));
    }
}
