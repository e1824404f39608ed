//! The route table: `(method, path)` → gated by a protocol, passed through, or refused.
//!
//! Paths are matched after an optional `/phase/{name}` and `/v1`, segment by
//! segment (ASCII case aside). Only listed endpoints reach the provider: a
//! gated one through its protocol's codec, a pass-through one (which cannot
//! return a tool call) as it is; every other path is refused, so no spelling
//! (`;x`, `.json`, `:suffix`, a new API) reaches the provider ungated.

use http::{HeaderMap, Method};

use crate::error::Error;
use crate::protocol::Protocol;

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
}

impl Route {
    /// The route label in metrics.
    pub fn label(self) -> &'static str {
        match self {
            Route::Gated(p) => p.label(),
            Route::Pass(_) => "passthrough",
            Route::Probe(_) => "probe",
            Route::Conversations => "conversations",
        }
    }

    /// The protocol family: its upstream, and the shape of its errors.
    pub fn protocol(self) -> Protocol {
        match self {
            Route::Gated(p) | Route::Pass(p) | Route::Probe(p) => p,
            Route::Conversations => Protocol::Responses,
        }
    }
}

/// The protocol family a refused path most likely belongs to, for the shape
/// of its error: Messages when a segment is `messages`, else OpenAI's.
pub fn family(path: &str) -> Protocol {
    if path.split('/').any(|s| s.eq_ignore_ascii_case("messages")) {
        Protocol::Messages
    } else {
        Protocol::Chat
    }
}

/// What a table row does with a request.
#[derive(Debug, Clone, Copy)]
enum Target {
    Go(Route),
    /// Refused with this message: the endpoint would hand out ungated tool calls.
    Refuse(&'static str),
    /// Passed to the upstream of the client's family: the Messages upstream
    /// when the request carries `anthropic-version` (every anthropic SDK
    /// request does), else the OpenAI-style one.
    Family,
    /// Answered here (see [`Route::Probe`]).
    Probe,
}

const STORED: &str =
    "Stored responses are not served here: they hold tool calls that were not checked. \
    Use the response returned by POST /v1/responses.";
const CANCEL: &str =
    "Background responses are not served here, so there is none to cancel: its answer would \
    be a whole response whose tool calls were not checked.";
const CONVERSATIONS: &str =
    "This Conversations API endpoint is not served here: use the conversation and its items.";
const BATCHES: &str =
    "Message batches are not served here: their results hold tool calls that were not checked. \
    Use POST /v1/messages.";

/// The class of a refused request's path, for its access line (a
/// client's start-up probe told from a refused batch, say).
pub fn refused_class(e: &Error) -> &'static str {
    match e {
        Error::NotServed(m) if *m == BATCHES => "batches",
        Error::NotServed(m) if *m == STORED => "stored_response",
        Error::NotServed(m) if *m == CONVERSATIONS => "conversations",
        Error::NotServed(m) if *m == CANCEL => "response_cancel",
        Error::NotServed(_) => "not_served",
        Error::UnsupportedEndpoint => "unknown_path",
        Error::MethodNotAllowed => "method_not_allowed",
        Error::WebSocketRefused => "websocket",
        Error::Unauthorized => "unauthenticated",
        Error::BadRequest(_) => "bad_path",
        _ => "other",
    }
}

/// Passed to the OpenAI-style upstream.
const PASS: Target = Target::Go(Route::Pass(Protocol::Chat));
/// Served by the Conversations API.
const CONVERSATION: Target = Target::Go(Route::Conversations);

/// `(method, path pattern, target)`, path after `/v1`, each segment matched
/// exactly (ASCII case aside); `+` is any one segment, a final `*` one or
/// more segments; method `*` is any method. The first matching row wins.
const TABLE: &[(&str, &str, Target)] = &[
    (
        "POST",
        "chat/completions",
        Target::Go(Route::Gated(Protocol::Chat)),
    ),
    (
        "POST",
        "responses",
        Target::Go(Route::Gated(Protocol::Responses)),
    ),
    ("POST", "responses/input_tokens", PASS),
    (
        "POST",
        "messages",
        Target::Go(Route::Gated(Protocol::Messages)),
    ),
    (
        "POST",
        "messages/count_tokens",
        Target::Go(Route::Pass(Protocol::Messages)),
    ),
    ("*", "messages/batches", Target::Refuse(BATCHES)),
    ("*", "messages/batches/*", Target::Refuse(BATCHES)),
    ("*", "responses/+/cancel", Target::Refuse(CANCEL)),
    ("DELETE", "responses/+", PASS),
    ("GET", "responses/+", Target::Refuse(STORED)),
    ("GET", "responses/+/input_items", Target::Refuse(STORED)),
    ("POST", "conversations", CONVERSATION),
    ("GET", "conversations/+", CONVERSATION),
    ("POST", "conversations/+", CONVERSATION),
    ("DELETE", "conversations/+", CONVERSATION),
    ("GET", "conversations/+/items", CONVERSATION),
    ("POST", "conversations/+/items", CONVERSATION),
    ("GET", "conversations/+/items/+", CONVERSATION),
    ("DELETE", "conversations/+/items/+", CONVERSATION),
    ("*", "conversations", Target::Refuse(CONVERSATIONS)),
    ("*", "conversations/*", Target::Refuse(CONVERSATIONS)),
    ("GET", "models", Target::Family),
    ("GET", "models/*", Target::Family),
    ("HEAD", "models", Target::Family),
    ("POST", "embeddings", PASS),
    ("POST", "moderations", PASS),
    ("POST", "completions", PASS),
    ("POST", "audio/speech", PASS),
    ("POST", "audio/transcriptions", PASS),
    ("POST", "audio/translations", PASS),
    ("POST", "images/generations", PASS),
    ("POST", "images/edits", PASS),
    ("POST", "images/variations", PASS),
    ("GET", "files", PASS),
    // Claude Code's reachability probes.
    ("GET", "api/hello", Target::Probe),
    ("HEAD", "api/hello", Target::Probe),
];

fn matches(pattern: &str, segs: &[&str]) -> bool {
    let mut i = 0;
    for p in pattern.split('/') {
        if p == "*" {
            return i < segs.len();
        }
        match segs.get(i) {
            Some(s) if p == "+" || s.eq_ignore_ascii_case(p) => i += 1,
            _ => return false,
        }
    }
    i == segs.len()
}

/// The row for `(method, segs)`: a path that only a gated row's pattern
/// matches, with another method, is a 405; an unknown path a 404.
fn lookup(method: &Method, segs: &[&str], anthropic: bool) -> Result<Route, Error> {
    let row = TABLE
        .iter()
        .find(|(m, p, _)| (*m == "*" || method.as_str() == *m) && matches(p, segs));
    match row {
        Some((_, _, Target::Go(r))) => Ok(*r),
        Some((_, _, Target::Family)) if anthropic => Ok(Route::Pass(Protocol::Messages)),
        Some((_, _, Target::Family)) => Ok(Route::Pass(Protocol::Chat)),
        Some((_, _, Target::Probe)) if anthropic => Ok(Route::Probe(Protocol::Messages)),
        Some((_, _, Target::Probe)) => Ok(Route::Probe(Protocol::Chat)),
        // `HEAD /` (or `/v1`): is anyone there?
        None if segs.is_empty() && method == Method::HEAD => Ok(Route::Probe(if anthropic {
            Protocol::Messages
        } else {
            Protocol::Chat
        })),
        Some((_, _, Target::Refuse(m))) => Err(Error::NotServed(m)),
        None if TABLE
            .iter()
            .any(|(_, p, t)| matches!(t, Target::Go(Route::Gated(_))) && matches(p, segs)) =>
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
    let segs = match segs.first() {
        Some(s) if s.eq_ignore_ascii_case("v1") => &segs[1..],
        _ => segs,
    };
    let rest: String = segs.iter().flat_map(|s| ["/", s]).collect();
    let route = match lookup(method, segs, headers.contains_key("anthropic-version")) {
        // A WebSocket upgrade where a gated request goes (Codex opens the
        // Responses WebSocket transport first): 426 tells the client to use
        // HTTP at once, where every call is gated.
        Err(Error::MethodNotAllowed) if method == Method::GET && websocket(headers) => {
            Err(Error::WebSocketRefused)
        }
        r => r,
    }?;
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
mod tests {
    use super::*;

    /// A request without headers.
    fn route(method: &Method, path: &str) -> Result<Routed, Error> {
        super::route(method, path, &HeaderMap::new())
    }

    #[test]
    fn a_reachability_probe_is_answered_here_and_nothing_else_is() {
        for (m, p) in [
            (Method::HEAD, "/"),
            (Method::HEAD, "/v1"),
            (Method::HEAD, "/api/hello"),
            (Method::GET, "/api/hello"),
        ] {
            let r = route(&m, p).unwrap();
            assert!(matches!(r.route, Route::Probe(_)), "{m} {p}");
            assert_eq!(r.route.label(), "probe");
        }
        for (m, p) in [
            (Method::GET, "/"),
            (Method::POST, "/"),
            (Method::POST, "/api/hello"),
            (Method::HEAD, "/api/hello/x"),
            (Method::HEAD, "/v1/batches"),
        ] {
            assert!(route(&m, p).is_err(), "{m} {p}");
        }
    }

    #[test]
    fn the_model_list_goes_to_the_upstream_of_the_clients_family() {
        let mut anthropic = HeaderMap::new();
        anthropic.insert("anthropic-version", "2023-06-01".parse().unwrap());
        for p in ["/v1/models", "/v1/models/claude-x"] {
            let r = super::route(&Method::GET, p, &anthropic).unwrap();
            assert_eq!(r.route, Route::Pass(Protocol::Messages), "{p}");
            let r = route(&Method::GET, p).unwrap();
            assert_eq!(r.route, Route::Pass(Protocol::Chat), "{p}");
        }
        // Only the model list follows the client: a gated path does not.
        let r = super::route(&Method::POST, "/v1/chat/completions", &anthropic).unwrap();
        assert_eq!(r.route, Route::Gated(Protocol::Chat));
    }

    #[test]
    fn routes_by_canonical_path() {
        let post = Method::POST;
        let ok = |p: &str| route(&post, p).ok().map(|r| (r.route, r.rest));
        assert_eq!(
            ok("/v1/chat/completions"),
            Some((Route::Gated(Protocol::Chat), "/chat/completions".into()))
        );
        assert_eq!(
            ok("/v1//chat/completions/"),
            Some((Route::Gated(Protocol::Chat), "/chat/completions".into()))
        );
        assert_eq!(
            ok("/V1/Chat/Completions").map(|r| r.0),
            Some(Route::Gated(Protocol::Chat))
        );
        assert_eq!(
            ok("/chat/completions").map(|r| r.0),
            Some(Route::Gated(Protocol::Chat))
        );
        let get = |p: &str| route(&Method::GET, p).ok().map(|r| (r.route, r.rest));
        assert_eq!(
            get("/v1/models"),
            Some((Route::Pass(Protocol::Chat), "/models".into()))
        );
        assert_eq!(
            get("/v1/models/openai/gpt-4.1:free").map(|r| r.0),
            Some(Route::Pass(Protocol::Chat))
        );
        assert_eq!(
            ok("/v1/embeddings").map(|r| r.0),
            Some(Route::Pass(Protocol::Chat))
        );
        let r = route(&post, "/phase/execution/v1/chat/completions").unwrap();
        assert_eq!(
            (r.route, r.rest.as_str(), r.phase.as_deref()),
            (
                Route::Gated(Protocol::Chat),
                "/chat/completions",
                Some("execution")
            )
        );
        assert!(matches!(
            route(&post, "/phase/exe:cution/v1/chat/completions"),
            Err(Error::BadRequest(_))
        ));
        assert_eq!(
            route(&post, "/phase/x/v1/responses")
                .map(|r| (r.route, r.phase))
                .ok(),
            Some((Route::Gated(Protocol::Responses), Some("x".into())))
        );
        let with = |m: Method, p: &str| route(&m, p).map(|r| r.route);
        assert!(matches!(
            with(Method::POST, "/v1/responses/resp_1/cancel"),
            Err(Error::NotServed(_))
        ));
        assert_eq!(
            with(Method::DELETE, "/v1/responses/resp_1").ok(),
            Some(Route::Pass(Protocol::Chat))
        );
        assert_eq!(
            with(Method::POST, "/v1/responses/input_tokens").ok(),
            Some(Route::Pass(Protocol::Chat))
        );
        for (m, p) in [
            (Method::GET, "/v1/responses/resp_1"),
            (Method::GET, "/v1/responses/resp_1/input_items"),
            (Method::GET, "/v1/conversations"),
            (Method::PUT, "/v1/conversations/c/items"),
            (Method::GET, "/v1/conversations/c/items/i/x"),
        ] {
            assert!(matches!(with(m, p), Err(Error::NotServed(_))), "{p}");
        }
        for (m, p) in [
            (Method::POST, "/v1/conversations"),
            (Method::GET, "/v1/conversations/c"),
            (Method::DELETE, "/v1/conversations/c"),
            (Method::GET, "/v1/conversations/c/items"),
            (Method::POST, "/v1/conversations/c/items"),
            (Method::GET, "/v1/conversations/c/items/i"),
            (Method::DELETE, "/v1/conversations/c/items/i"),
        ] {
            assert_eq!(with(m, p).ok(), Some(Route::Conversations), "{p}");
        }
        assert!(matches!(
            with(Method::GET, "/v1/responses"),
            Err(Error::MethodNotAllowed)
        ));
        for p in [
            "/v1/responses/resp_1",
            "/v1/responses/resp_1/input_items",
            "/v1/messages/abc",
            "/v1/threads/t/runs",
            "/v1/chat/completions/abc",
            "/v1/files/f/content",
            "/v1/v1/chat/completions",
            "/openai/deployments/d/chat/completions",
            "/api/v1/Responses",
            "/v1/chat/completions;",
            "/v1/chat;x/completions",
            "/v1/chat/completions.json",
            "/v1/chat/completions:stream",
            "/v1/responses;",
            "/v1/embeddings;x",
            "/v1/embeddings.json",
            "/v1/models",
            "/v1/something-new",
        ] {
            assert!(
                matches!(route(&post, p), Err(Error::UnsupportedEndpoint)),
                "{p}"
            );
        }
        for p in [
            "/v1/chat%2Fcompletions",
            "/v1/./chat/completions",
            "/v1/x/../responses",
            "/v1\\chat",
        ] {
            assert!(matches!(route(&post, p), Err(Error::BadRequest(_))), "{p}");
        }
        assert!(matches!(
            route(&Method::GET, "/v1/chat/completions"),
            Err(Error::MethodNotAllowed)
        ));
    }

    #[test]
    fn messages_routes() {
        let with = |m: Method, p: &str| route(&m, p).map(|r| (r.route, r.rest, r.phase));
        assert_eq!(
            with(Method::POST, "/v1/messages").ok(),
            Some((Route::Gated(Protocol::Messages), "/messages".into(), None))
        );
        assert_eq!(
            with(Method::POST, "/phase/execution/v1/messages").ok(),
            Some((
                Route::Gated(Protocol::Messages),
                "/messages".into(),
                Some("execution".into())
            ))
        );
        assert_eq!(
            with(Method::POST, "/v1/messages/count_tokens").ok(),
            Some((
                Route::Pass(Protocol::Messages),
                "/messages/count_tokens".into(),
                None
            ))
        );
        for (m, p) in [
            (Method::POST, "/v1/messages/batches"),
            (Method::GET, "/v1/messages/batches/b1/results"),
            (Method::GET, "/v1/messages/batches"),
        ] {
            assert!(matches!(route(&m, p), Err(Error::NotServed(_))), "{p}");
        }
        assert!(matches!(
            route(&Method::GET, "/v1/messages"),
            Err(Error::MethodNotAllowed)
        ));
        assert!(matches!(
            route(&Method::POST, "/v1/messages;x"),
            Err(Error::UnsupportedEndpoint)
        ));
    }
}
