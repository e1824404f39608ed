//! Unit tests of the route table: gated, passed, refused and probed paths
//! of every codec, versions, phases and families.

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
        Some(Route::Pass(Protocol::Responses))
    );
    assert_eq!(
        with(Method::POST, "/v1/responses/input_tokens").ok(),
        Some(Route::Pass(Protocol::Responses))
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

#[test]
fn gemini_routes_keep_their_version_and_follow_googles_key_header() {
    let with = |m: Method, p: &str| route(&m, p).map(|r| (r.route, r.rest));
    for p in [
        "/v1beta/models/gemini-2.5-flash:generateContent",
        "/v1/models/gemini-2.5-flash:generateContent",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        "/v1beta/models/gemini-2.5-flash:STREAMGENERATECONTENT",
        "/phase/x/v1beta/tunedModels/t1:generateContent",
    ] {
        let (r, rest) = with(Method::POST, p).unwrap();
        assert_eq!(r, Route::Gated(Protocol::Gemini), "{p}");
        assert!(p.ends_with(&rest) && rest.starts_with("/v1"), "{p} {rest}");
    }
    assert_eq!(
        with(Method::POST, "/v1beta/models/m:countTokens").ok(),
        Some((
            Route::Pass(Protocol::Gemini),
            "/v1beta/models/m:countTokens".into()
        ))
    );
    assert_eq!(
        with(Method::GET, "/v1beta/models").ok(),
        Some((Route::Pass(Protocol::Gemini), "/v1beta/models".into()))
    );
    let mut google = HeaderMap::new();
    google.insert("x-goog-api-key", "k".parse().unwrap());
    let r = super::route(&Method::GET, "/v1/models/gemini-2.5-pro", &google).unwrap();
    assert_eq!(
        (r.route, r.rest.as_str()),
        (Route::Pass(Protocol::Gemini), "/v1/models/gemini-2.5-pro")
    );
    for p in [
        "/v1beta/models/m:batchGenerateContent",
        "/v1beta/batches/b1",
        "/v1beta/models/m:predict",
        "/v1/models/m:generateAnswer",
    ] {
        assert!(
            matches!(with(Method::POST, p), Err(Error::NotServed(_))),
            "{p}"
        );
    }
    for p in [
        "/models/m:generateContent",
        "/v1beta/chat/completions",
        "/v1beta/messages",
        "/v2/models/m:generateContent",
        "/v1beta/models/:generateContent",
    ] {
        assert!(with(Method::POST, p).is_err(), "{p}");
    }
    assert!(matches!(
        with(Method::GET, "/v1beta/models/m:generateContent"),
        Err(Error::NotServed(_)) | Err(Error::MethodNotAllowed)
    ));
    assert_eq!(
        super::family("/v1beta/whatever", &HeaderMap::new()),
        Protocol::Gemini
    );
}

#[test]
fn mcp_servers_have_their_own_rows() {
    for (m, p) in [
        (Method::POST, "/mcp/crm"),
        (Method::GET, "/mcp/crm"),
        (Method::DELETE, "/v1/mcp/crm"),
        (Method::POST, "/phase/x/mcp/crm"),
    ] {
        assert_eq!(route(&m, p).unwrap().route, Route::Mcp, "{p}");
    }
    assert!(route(&Method::POST, "/mcp").is_err());
    assert!(route(&Method::POST, "/mcp/crm/x").is_err());
    assert_eq!(Route::Mcp.label(), "mcp");
}
