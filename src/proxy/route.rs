//! The route table: `(method, path)` → gated by a protocol, passed through, or refused.
//!
//! Paths are matched after an optional `/phase/{name}` and `/v1`, segment by
//! segment (ASCII case aside). Only listed endpoints reach the provider: a
//! gated one through its protocol's codec, a pass-through one (which cannot
//! return a tool call) as it is; every other path is refused, so no spelling
//! (`;x`, `.json`, `:suffix`, a new API) reaches the provider ungated.

use http::{HeaderMap, Method};

use crate::error::Error;
use crate::protocol::{Protocol, Refusal, Serve};

/// Which way a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Gated through this protocol's codec.
    Gated(Protocol),
    /// Passed through as it is (the endpoint cannot return a tool call), to
    /// the upstream of this protocol's family.
    Pass(Protocol),
    /// A client's reachability probe (`HEAD /`, `/api/hello`), answered
    /// here with an empty 200: no model output, nothing forwarded.
    Probe(Protocol),
    /// The Conversations API, served by `proxy::conversations` (to the
    /// Responses upstream, with its errors).
    Conversations,
    /// An MCP server of `[[mcp]]`, served by `proxy::mcp`.
    Mcp,
}

impl Route {
    /// The route label in metrics.
    pub fn label(self) -> &'static str {
        match self {
            Route::Gated(p) => p.label(),
            Route::Pass(_) => "passthrough",
            Route::Probe(_) => "probe",
            Route::Conversations => "conversations",
            Route::Mcp => "mcp",
        }
    }

    /// The protocol family: its upstream, and the shape of its errors.
    pub fn protocol(self) -> Protocol {
        match self {
            Route::Gated(p) | Route::Pass(p) | Route::Probe(p) => p,
            Route::Conversations => crate::protocol::conversation::SERVED_BY,
            // toolgate's own errors on an MCP path: the OpenAI shape.
            Route::Mcp => Protocol::default(),
        }
    }
}

/// The protocol family a request's headers or path name (the first codec
/// that claims it, else Chat Completions'): the upstream of a family row
/// and the shape of a refused path's error.
pub fn family(path: &str, headers: &HeaderMap) -> Protocol {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    Protocol::ALL
        .into_iter()
        .find(|p| p.codec().claims(headers, &segs))
        .unwrap_or_default()
}

const CONVERSATIONS: Refusal = Refusal {
    class: "conversations",
    message:
        "This Conversations API endpoint is not served here: use the conversation and its items.",
};

/// The class of a refused request's path, for its access line (a
/// client's start-up probe told from a refused batch, say).
pub fn refused_class(e: &Error) -> &'static str {
    match e {
        Error::NotServed(m) => refusals()
            .find(|r| r.message == *m)
            .map_or("not_served", |r| r.class),
        Error::UnsupportedEndpoint => "unknown_path",
        Error::MethodNotAllowed => "method_not_allowed",
        Error::WebSocketRefused => "websocket",
        Error::Unauthorized => "unauthenticated",
        Error::BadRequest(_) => "bad_path",
        _ => "other",
    }
}

/// Every refusal a row may give.
fn refusals() -> impl Iterator<Item = Refusal> {
    let own = OWN.iter().filter_map(|r| match r.2 {
        Own::Refuse(r) => Some(r),
        _ => None,
    });
    let codecs = Protocol::ALL
        .into_iter()
        .flat_map(|p| p.codec().routes().iter())
        .filter_map(|r| match r.2 {
            Serve::Refuse(r) => Some(r),
            _ => None,
        });
    own.chain(codecs)
}

/// What one of toolgate's own rows does.
#[derive(Debug, Clone, Copy)]
enum Own {
    /// Served by the Conversations API.
    Conversation,
    /// An MCP server (`/mcp/{name}`).
    Mcp,
    /// Answered here (see [`Route::Probe`]).
    Probe,
    Refuse(Refusal),
}

/// The rows toolgate serves itself, before any codec's (path after an
/// optional `/v1`; patterns as [`crate::protocol::Row`]'s).
const OWN: &[(&str, &str, Own)] = &[
    ("POST", "conversations", Own::Conversation),
    ("GET", "conversations/+", Own::Conversation),
    ("POST", "conversations/+", Own::Conversation),
    ("DELETE", "conversations/+", Own::Conversation),
    ("GET", "conversations/+/items", Own::Conversation),
    ("POST", "conversations/+/items", Own::Conversation),
    ("GET", "conversations/+/items/+", Own::Conversation),
    ("DELETE", "conversations/+/items/+", Own::Conversation),
    ("*", "conversations", Own::Refuse(CONVERSATIONS)),
    ("*", "conversations/*", Own::Refuse(CONVERSATIONS)),
    ("*", "mcp/+", Own::Mcp),
    // Claude Code's reachability probes.
    ("GET", "api/hello", Own::Probe),
    ("HEAD", "api/hello", Own::Probe),
];

fn matches(pattern: &str, segs: &[&str]) -> bool {
    let mut i = 0;
    for p in pattern.split('/') {
        if p == "*" {
            return i < segs.len();
        }
        let Some(s) = segs.get(i) else {
            return false;
        };
        let hit = match p.strip_prefix("+:") {
            // `name:verb`, the verb in any case, a name before it.
            Some(verb) => s
                .rsplit_once(':')
                .is_some_and(|(name, v)| !name.is_empty() && v.eq_ignore_ascii_case(verb)),
            None if p == "{name}" => !s.contains(':'),
            None => p == "+" || s.eq_ignore_ascii_case(p),
        };
        if !hit {
            return false;
        }
        i += 1;
    }
    i == segs.len()
}

fn method_ok(row: &str, method: &Method) -> bool {
    row == "*" || method.as_str() == row
}

/// A version segment (`v1`, `v1beta`, `v2alpha`).
fn is_version(s: &str) -> bool {
    let l = s.to_ascii_lowercase();
    let rest = l.strip_prefix('v').unwrap_or("");
    let digits = rest.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && matches!(&rest[digits.len()..], "" | "alpha" | "beta")
}

/// Whether a codec's paths may start with `version` (`None`: no version).
fn version_ok(p: Protocol, version: Option<&str>) -> bool {
    match (p.codec().versions(), version) {
        (None, None) => true,
        (None, Some(v)) => v.eq_ignore_ascii_case("v1"),
        (Some(list), Some(v)) => list.iter().any(|l| l.eq_ignore_ascii_case(v)),
        (Some(_), None) => false,
    }
}

/// The route for `(method, segs)` and the protocol whose rows matched: a
/// path that only a gated row's pattern matches, with another method, is
/// a 405; an unknown path a 404.
fn lookup(
    method: &Method,
    version: Option<&str>,
    segs: &[&str],
    headers: &HeaderMap,
) -> Result<Route, Error> {
    let family = || {
        let all: Vec<&str> = version.into_iter().chain(segs.iter().copied()).collect();
        Protocol::ALL
            .into_iter()
            .find(|p| p.codec().claims(headers, &all))
            .unwrap_or_default()
    };
    if version.is_none_or(|v| v.eq_ignore_ascii_case("v1")) {
        let own = OWN
            .iter()
            .find(|(m, p, _)| method_ok(m, method) && matches(p, segs));
        match own {
            Some((_, _, Own::Conversation)) => return Ok(Route::Conversations),
            Some((_, _, Own::Mcp)) => return Ok(Route::Mcp),
            Some((_, _, Own::Probe)) => return Ok(Route::Probe(family())),
            Some((_, _, Own::Refuse(r))) => return Err(Error::NotServed(r.message)),
            None if segs.is_empty() && method == Method::HEAD => {
                // `HEAD /` (or `/v1`): is anyone there?
                return Ok(Route::Probe(family()));
            }
            None => {}
        }
    }
    let codecs = || {
        Protocol::ALL
            .into_iter()
            .filter(|p| version_ok(*p, version))
    };
    let row = codecs().find_map(|p| {
        (p.codec().routes().iter())
            .find(|(m, pat, _)| method_ok(m, method) && matches(pat, segs))
            .map(|r| (p, r.2))
    });
    match row {
        Some((p, Serve::Gated)) => Ok(Route::Gated(p)),
        Some((p, Serve::Pass)) => Ok(Route::Pass(p)),
        Some((_, Serve::Family)) => Ok(Route::Pass(family())),
        Some((_, Serve::Refuse(r))) => Err(Error::NotServed(r.message)),
        None if codecs().any(|p| {
            (p.codec().routes().iter()).any(|(_, pat, s)| *s == Serve::Gated && matches(pat, segs))
        }) =>
        {
            Err(Error::MethodNotAllowed)
        }
        None => Err(Error::UnsupportedEndpoint),
    }
}

/// A classified request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub route: Route,
    /// The path to forward, after `/phase/{name}` and `/v1`.
    pub rest: String,
    /// The phase named by a `/phase/{name}/…` prefix.
    pub phase: Option<String>,
}

/// Classifies a request by its method, path and (for the rows that follow
/// the client's family) its headers. Paths that could be read two ways
/// (percent escapes, dot segments, backslashes) are refused so that no
/// spelling reaches an ungated endpoint.
pub fn route(method: &Method, path: &str, headers: &HeaderMap) -> Result<Routed, Error> {
    if path.contains(['%', '\\']) {
        return Err(Error::BadRequest("The request path is not valid.".into()));
    }
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segs.iter().any(|s| *s == "." || *s == "..") {
        return Err(Error::BadRequest("The request path is not valid.".into()));
    }
    let (phase, segs) = match segs.as_slice() {
        [p, name, rest @ ..] if p.eq_ignore_ascii_case("phase") => {
            if !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(Error::BadRequest(
                    "The phase in the path is not valid.".into(),
                ));
            }
            (Some(name.to_string()), rest)
        }
        s => (None, s),
    };
    let (version, segs) = match segs.split_first() {
        Some((v, rest)) if is_version(v) => (Some(*v), rest),
        _ => (None, segs),
    };
    let route = match lookup(method, version, segs, headers) {
        // A WebSocket upgrade where a gated request goes (Codex opens the
        // Responses WebSocket transport first): 426 tells the client to use
        // HTTP at once, where every call is gated.
        Err(Error::MethodNotAllowed) if method == Method::GET && websocket(headers) => {
            Err(Error::WebSocketRefused)
        }
        r => r,
    }?;
    // A codec whose paths carry their version keeps it in the path sent on.
    let kept = version.filter(|_| route.protocol().codec().versions().is_some());
    let rest: String = kept.iter().chain(segs).flat_map(|s| ["/", *s]).collect();
    Ok(Routed { route, rest, phase })
}

/// Whether the request asks to upgrade to WebSocket.
fn websocket(h: &HeaderMap) -> bool {
    h.get_all(http::header::UPGRADE).iter().any(|v| {
        v.to_str()
            .is_ok_and(|s| s.to_ascii_lowercase().contains("websocket"))
    })
}

#[cfg(test)]
mod tests;
