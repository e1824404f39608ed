//! The one error enum, and the single place where errors become HTTP responses.
//!
//! Each variant knows which side failed ([`Side`]) and which status it maps to.
//! The messages of toolgate's own errors are generic: they never name
//! toolgate, a gate, a rule, a tool or an upstream key. What the provider
//! said in its errors is written again by `proxy::errors`.

use std::fmt;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

/// One `file:line: message` finding from loading config or policy files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    /// The column (in characters, from 1) when the finding points inside a line.
    pub col: Option<usize>,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.col {
            Some(col) => write!(f, "{}:{}:{col}: {}", self.file, self.line, self.message),
            None => write!(f, "{}:{}: {}", self.file, self.line, self.message),
        }
    }
}

/// How an exchange with the upstream broke, below the HTTP status: the
/// `kind` label of `toolgate_upstream_faults_total` (with the status kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The name did not resolve or the TCP connection was refused.
    Refused,
    /// No connection within `[upstream] connect_timeout_secs`.
    ConnectTimeout,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
    /// The connection was reset or closed before the exchange ended.
    Reset,
    /// The HTTP/2 connection was shut down under the exchange (GOAWAY).
    Goaway,
    /// The upstream spoke broken HTTP.
    Protocol,
}

impl Fault {
    pub fn label(self) -> &'static str {
        match self {
            Fault::Refused => "refused",
            Fault::ConnectTimeout => "connect_timeout",
            Fault::Tls => "tls",
            Fault::Reset => "reset",
            Fault::Goaway => "goaway",
            Fault::Protocol => "protocol",
        }
    }
}

/// Which side of the proxy a failure belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The agent sent something we cannot accept.
    Client,
    /// The provider failed or sent something we cannot read.
    Upstream,
    /// toolgate itself (config, audit sink, I/O).
    Proxy,
}

#[derive(Debug)]
pub enum Error {
    /// Config or policy files are invalid; one entry per finding.
    Config(Vec<Diagnostic>),
    /// An I/O failure with what we were doing at the time.
    Io {
        context: String,
        source: std::io::Error,
    },
    /// The agent's request is malformed; the message is about the agent's own input.
    BadRequest(String),
    /// No valid client token (with `[[client]]` configured).
    Unauthorized,
    /// The request body is larger than `[limits] max_request_bytes`.
    PayloadTooLarge { limit: usize },
    /// The client did not send its request body within
    /// `[limits] request_body_timeout_secs`.
    RequestTimeout,
    /// The endpoint can return tool calls in a format toolgate does not gate.
    UnsupportedEndpoint,
    /// The method is not allowed on a gated endpoint.
    MethodNotAllowed,
    /// A known endpoint that toolgate refuses on purpose (it would hand out
    /// ungated tool calls); the message says which and why.
    NotServed(&'static str),
    /// A WebSocket upgrade on a gated endpoint (Codex's Responses WebSocket
    /// transport): 426, which clients take as "use HTTP".
    WebSocketRefused,
    /// A Messages thread continued from an answer toolgate does not know
    /// (expired, another client's, or never seen): answered as the provider
    /// answers a thread it lost, so the SDK replays the conversation.
    ThreadNotFound,
    /// The upstream could not be reached, or the exchange broke before its
    /// response head.
    UpstreamConnect(Fault, String),
    /// The upstream connection broke after the response head.
    UpstreamLost(Fault),
    /// The upstream did not answer within `[upstream] timeout_secs`.
    UpstreamTimeout,
    /// A stream sent nothing for `[upstream] idle_timeout_secs`.
    UpstreamIdle,
    /// The upstream answered with an error status.
    UpstreamStatus {
        status: StatusCode,
        /// The provider's rate-limit headers (`Retry-After`, `x-ratelimit-*`,
        /// …), passed on to the agent.
        limits: Box<http::HeaderMap>,
        body: Bytes,
    },
    /// The upstream answered with a body toolgate could not read or parse.
    UpstreamUnreadable(&'static str),
    /// The upstream sent an error object inside its response (mid-stream or in a
    /// 200 body); the bytes are the upstream's data, shown only in passthrough mode.
    UpstreamEvent(Bytes),
    /// The audit sink is gone; gated calls fail closed.
    AuditUnavailable,
    /// A limit is full (`body_bytes` in flight, upstream `streams`,
    /// `connections`, or `memory` that could not be mapped); retry later.
    Overloaded(&'static str),
    /// State shared by replicas (`[state] backend = "redis"`) could not be
    /// read and `on_error = "fail_closed"`; retry later.
    StateUnavailable,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(diags) => {
                for (i, d) in diags.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{d}")?;
                }
                Ok(())
            }
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::BadRequest(m) => write!(f, "bad request: {m}"),
            Error::Unauthorized => write!(f, "unauthorized"),
            Error::PayloadTooLarge { limit } => write!(f, "request body over {limit} bytes"),
            Error::RequestTimeout => write!(f, "request body not received in time"),
            Error::UnsupportedEndpoint => write!(f, "unsupported endpoint"),
            Error::MethodNotAllowed => write!(f, "method not allowed"),
            Error::NotServed(m) => write!(f, "not served: {m}"),
            Error::ThreadNotFound => write!(f, "thread not found"),
            Error::WebSocketRefused => write!(f, "websocket upgrade refused"),
            Error::UpstreamConnect(k, m) => write!(f, "upstream unreachable ({}): {m}", k.label()),
            Error::UpstreamLost(k) => {
                write!(f, "upstream connection failed mid-body ({})", k.label())
            }
            Error::UpstreamTimeout => write!(f, "upstream timed out"),
            Error::UpstreamIdle => write!(f, "upstream sent nothing within the idle timeout"),
            Error::UpstreamStatus { status, .. } => write!(f, "upstream returned {status}"),
            Error::UpstreamUnreadable(why) => write!(f, "upstream response unreadable: {why}"),
            Error::UpstreamEvent(_) => write!(f, "upstream sent an error object"),
            Error::AuditUnavailable => write!(f, "audit sink unavailable"),
            Error::Overloaded(limit) => write!(f, "overloaded: {limit} full"),
            Error::StateUnavailable => write!(f, "shared state unavailable"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub fn config(file: impl Into<String>, line: usize, message: impl Into<String>) -> Self {
        Error::Config(vec![Diagnostic {
            file: file.into(),
            line,
            col: None,
            message: message.into(),
        }])
    }

    pub fn side(&self) -> Side {
        match self {
            Error::BadRequest(_)
            | Error::Unauthorized
            | Error::PayloadTooLarge { .. }
            | Error::RequestTimeout
            | Error::UnsupportedEndpoint
            | Error::NotServed(_)
            | Error::ThreadNotFound
            | Error::WebSocketRefused
            | Error::MethodNotAllowed => Side::Client,
            Error::UpstreamConnect(..)
            | Error::UpstreamLost(_)
            | Error::UpstreamTimeout
            | Error::UpstreamIdle
            | Error::UpstreamStatus { .. }
            | Error::UpstreamUnreadable(_)
            | Error::UpstreamEvent(_) => Side::Upstream,
            Error::Config(_)
            | Error::Io { .. }
            | Error::AuditUnavailable
            | Error::Overloaded(_)
            | Error::StateUnavailable => Side::Proxy,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::Unauthorized => StatusCode::UNAUTHORIZED,
            Error::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Error::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Error::UnsupportedEndpoint | Error::NotServed(_) | Error::ThreadNotFound => {
                StatusCode::NOT_FOUND
            }
            Error::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Error::WebSocketRefused => StatusCode::UPGRADE_REQUIRED,
            Error::UpstreamConnect(..)
            | Error::UpstreamLost(_)
            | Error::UpstreamUnreadable(_)
            | Error::UpstreamEvent(_) => StatusCode::BAD_GATEWAY,
            Error::UpstreamTimeout | Error::UpstreamIdle => StatusCode::GATEWAY_TIMEOUT,
            Error::Overloaded(_) | Error::StateUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Error::UpstreamStatus { status, .. } if status.is_client_error() => *status,
            Error::UpstreamStatus { .. } => StatusCode::BAD_GATEWAY,
            Error::Config(_) | Error::Io { .. } | Error::AuditUnavailable => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }

    /// The `kind` of `toolgate_upstream_faults_total` this error counts
    /// under, for an upstream failure.
    pub fn fault(&self) -> Option<&'static str> {
        Some(match self {
            Error::UpstreamConnect(k, _) | Error::UpstreamLost(k) => k.label(),
            Error::UpstreamTimeout => "timeout",
            Error::UpstreamIdle => "idle",
            Error::UpstreamStatus { status, .. } if *status == StatusCode::TOO_MANY_REQUESTS => {
                "rate_limited"
            }
            Error::UpstreamStatus { status, .. } if status.is_server_error() => "status_5xx",
            Error::UpstreamStatus { .. } => "status_4xx",
            Error::UpstreamUnreadable(_) => "unreadable",
            Error::UpstreamEvent(_) => "error_event",
            _ => return None,
        })
    }

    /// The OpenAI error `type` and the generic message the agent sees.
    pub fn public_message(&self) -> (&'static str, String) {
        match self {
            Error::BadRequest(m) => ("invalid_request_error", m.clone()),
            Error::Unauthorized => (
                "invalid_request_error",
                "Invalid authentication.".to_string(),
            ),
            Error::RequestTimeout => (
                "invalid_request_error",
                "The request body did not arrive in time.".to_string(),
            ),
            Error::PayloadTooLarge { limit } => (
                "invalid_request_error",
                format!("Request body is larger than the limit of {limit} bytes."),
            ),
            Error::UnsupportedEndpoint => (
                "invalid_request_error",
                "This endpoint is not supported. Use POST /v1/chat/completions, POST /v1/responses or POST /v1/messages."
                    .to_string(),
            ),
            Error::NotServed(m) => ("invalid_request_error", m.to_string()),
            Error::ThreadNotFound => ("not_found_error", "Thread not found.".to_string()),
            Error::WebSocketRefused => (
                "invalid_request_error",
                "The WebSocket transport is not served here: send the request over HTTP (POST)."
                    .to_string(),
            ),
            Error::MethodNotAllowed => (
                "invalid_request_error",
                "Method not allowed on this endpoint.".to_string(),
            ),
            Error::UpstreamStatus { status, .. } if *status == StatusCode::TOO_MANY_REQUESTS => (
                "rate_limit_error",
                "The model provider is rate limiting requests. Retry later.".to_string(),
            ),
            Error::UpstreamStatus { status, .. } if status.is_client_error() => (
                "invalid_request_error",
                "The model provider rejected the request.".to_string(),
            ),
            Error::UpstreamTimeout | Error::UpstreamIdle => (
                "server_error",
                "The model provider did not respond in time.".to_string(),
            ),
            Error::Overloaded(_) => (
                "server_error",
                "The server is busy. Retry later.".to_string(),
            ),
            Error::StateUnavailable => (
                "server_error",
                "The server could not reach the state it shares with its replicas. Retry later."
                    .to_string(),
            ),
            Error::UpstreamConnect(..)
            | Error::UpstreamLost(_)
            | Error::UpstreamStatus { .. }
            | Error::UpstreamUnreadable(_)
            | Error::UpstreamEvent(_) => (
                "server_error",
                "The model provider returned an error.".to_string(),
            ),
            Error::Config(_) | Error::Io { .. } | Error::AuditUnavailable => (
                "server_error",
                "The server had an error while processing the request.".to_string(),
            ),
        }
    }

    /// The OpenAI-shaped JSON error body for this error.
    pub fn json_body(&self) -> Bytes {
        let (kind, message) = self.public_message();
        error_body(kind, &message)
    }

    /// Converts the error into the response the agent receives, its body
    /// written by `render` (the wire format's error shape). With
    /// `passthrough`, an upstream error status keeps the upstream's own body.
    pub fn into_response<B>(
        self,
        passthrough: bool,
        render: impl FnOnce(&Error) -> Bytes,
        into_body: impl FnOnce(Bytes) -> B,
    ) -> Response<B> {
        let status = self.status();
        let (body, headers) = match self {
            Error::UpstreamStatus {
                status: up,
                limits,
                body,
            } if passthrough => {
                let mut resp = Response::new(into_body(body));
                *resp.status_mut() = up;
                set_json(&mut resp);
                resp.headers_mut().extend(*limits);
                return resp;
            }
            Error::UpstreamStatus { ref limits, .. } => (render(&self), (**limits).clone()),
            Error::Overloaded(_) | Error::StateUnavailable => {
                let mut h = http::HeaderMap::new();
                h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                (render(&self), h)
            }
            ref other => (render(other), http::HeaderMap::new()),
        };
        let mut resp = Response::new(into_body(body));
        *resp.status_mut() = status;
        set_json(&mut resp);
        resp.headers_mut().extend(headers);
        resp
    }
}

fn set_json<B>(resp: &mut Response<B>) {
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
}

/// `{"error":{"message":…,"type":…,"param":null,"code":null}}`
pub fn error_body(kind: &str, message: &str) -> Bytes {
    let v = serde_json::json!({
        "error": {"message": message, "type": kind, "param": null, "code": null}
    });
    Bytes::from(v.to_string())
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
