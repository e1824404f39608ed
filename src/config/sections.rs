//! The validated sections of [`Config`](super::Config): what the rest of
//! toolgate reads, with every value checked and every default applied.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, Clone)]
pub struct Listen {
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    pub drain: Duration,
    /// Serve without client authentication on a non-loopback address.
    pub allow_anonymous: bool,
    /// Serve TLS on the data port (`[listen.tls]`).
    pub tls: Option<Tls>,
}

/// `[admin]`: the admin port's token, `Host` names and connection cap.
#[derive(Debug, Clone)]
pub struct Admin {
    /// The environment variable holding the bearer token that `POST
    /// /reload` needs (without it set, `/reload` is refused).
    pub token_env: String,
    /// `Host` names the admin port answers to besides IP addresses and
    /// `localhost` (a DNS name a browser was rebound to is refused).
    pub hosts: Vec<String>,
    /// Admin connections served at once; more are closed at once.
    pub max_connections: usize,
}

impl Default for Admin {
    fn default() -> Self {
        Admin {
            token_env: "TOOLGATE_ADMIN_TOKEN".into(),
            hosts: Vec::new(),
            max_connections: 64,
        }
    }
}

/// `[listen.tls]`: PEM files, resolved against the config file's directory.
#[derive(Debug, Clone)]
pub struct Tls {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Require a client certificate signed by one of these CAs (mutual TLS).
    pub client_ca: Option<PathBuf>,
}

/// One `[[client]]`: a principal and how it proves it is that principal,
/// by the SHA-256 of its token or by a name in its TLS client certificate.
#[derive(Debug, Clone)]
pub struct Client {
    pub name: String,
    /// Set for a client that sends a token.
    pub token_sha256: Option<[u8; 32]>,
    /// The token itself when it came from the environment (for redaction).
    pub token: Option<String>,
    /// Set for a client known by its certificate (mutual TLS).
    pub cert: Option<CertName>,
}

/// The name a client certificate must carry: its subject's common name, or
/// a URI among its subject alternative names (a SPIFFE id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertName {
    Cn(String),
    Uri(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Strip the agent's credentials and inject the upstream key.
    Inject,
    /// Forward the agent's `Authorization` header as it is.
    Passthrough,
}

/// `[upstream.NAME] auth`: how a named upstream gets its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamedAuth {
    /// The key in the section's own header (`x-api-key` for Anthropic's
    /// API, `x-goog-api-key` for Google's), each name also accepted.
    #[serde(alias = "x-api-key", alias = "x-goog-api-key")]
    Header,
    /// The key as `Authorization: Bearer` (gateways that want it).
    Bearer,
    /// The agent's own key headers (and a `?key=`) forwarded as they are.
    Passthrough,
}

/// How an injected upstream key is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHeader {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// `<name>: <key>` (`x-api-key`, `x-goog-api-key`).
    Named(&'static str),
}

#[derive(Debug, Clone)]
pub struct Upstream {
    /// Scheme and authority, e.g. `https://openrouter.ai`.
    pub origin: http::uri::Uri,
    /// The path the request path (after `/v1`) is appended to, e.g. `/api/v1`.
    pub path_prefix: String,
    pub api_key_env: Vec<String>,
    pub auth: AuthMode,
    /// The header an injected key goes in.
    pub key_header: KeyHeader,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Longest silence between a streamed response's bytes (keep-alive
    /// comments count); past it the stream fails closed. `None`: no limit.
    pub idle_timeout: Option<Duration>,
    pub ca_file: Option<PathBuf>,
    /// Offer HTTP/2 to a TLS upstream (ALPN), as well as HTTP/1.1: its
    /// streams then share connections. `false`: HTTP/1.1, a connection per
    /// stream in flight.
    pub http2: bool,
}

#[derive(Debug, Clone)]
pub struct Policy {
    /// Directory of `*.toml` policy files; `None` = the embedded default policy.
    pub dir: Option<PathBuf>,
    /// The phase when the request names none (`None` = `unknown`, treated as planning).
    pub default_phase: Option<String>,
    /// Remove tools the rules deny whatever the arguments from the upstream request.
    pub hide_denied_tools: bool,
    pub mode: PolicyMode,
    /// Separators between a tool's namespace and its name.
    pub namespace_separators: Vec<String>,
    /// Namespaces written as a prefix and `_` or `-` (`comm_send`).
    pub namespace_prefixes: Vec<String>,
    /// How often policy files are checked for changes.
    pub reload: Duration,
    /// Whether changed files are picked up by themselves or only on request.
    pub reload_mode: ReloadMode,
    /// How long the policy files must stay unchanged before a change is loaded.
    pub settle: Duration,
    /// What a reload that would drop deny, reject or ask rules does.
    pub reload_drops: ReloadDrops,
}

/// `[policy] reload_drops`: a reload that would drop blocking rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReloadDrops {
    /// Refused (the default): the last policy stays, and the refusal is
    /// logged and counted. A file caught half-written must not release
    /// what it denied; `POST /reload?drops=apply` applies one such reload.
    Refuse,
    /// Loaded, with a warning naming the rules (`warn`, its older name).
    #[serde(alias = "warn")]
    Apply,
}

impl Policy {}

/// `[policy] reload`: how policy changes are picked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReloadMode {
    /// Watch the policy files; a change is loaded once it has settled (and on SIGHUP).
    Watch,
    /// Only on SIGHUP or `POST /reload` on the admin port.
    Signal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyMode {
    /// Verdicts are applied.
    Enforce,
    /// Verdicts are computed and audited; every call is released.
    Monitor,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditPath {
    Stdout,
    File(PathBuf),
}

/// What a failed audit write does to the call it records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditOnError {
    /// The call is not released (the default).
    FailClosed,
    /// The call is released and the failure logged.
    Continue,
}

#[derive(Debug, Clone)]
pub struct Audit {
    pub path: AuditPath,
    pub on_error: AuditOnError,
    /// Persist the judge's one-line reason (off by default: it may quote arguments).
    pub include_judge_reason: bool,
    /// Rotate a file sink past this many bytes (`None`: never).
    pub max_bytes: Option<u64>,
    /// Rotated files kept (`audit.jsonl.1` … `.keep`).
    pub keep: usize,
    /// The environment variable holding the chain's HMAC key (unset: the
    /// chain is SHA-256, which anyone who can write the file can redo).
    pub key_env: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorMode {
    /// The provider's errors reach the agent as it said them (status,
    /// type, code, param, message, details; redacted and bounded) in the
    /// route's error shape; toolgate's own errors are generic.
    Provider,
    /// Every error is generic: the provider's words are only logged.
    Generic,
    /// Upstream error bodies reach the agent as they are.
    Passthrough,
}

#[derive(Debug, Clone)]
pub struct Rewrite {
    pub neutral_message: std::sync::Arc<str>,
    pub errors: ErrorMode,
    /// What replaces withheld calls unless their rule says otherwise.
    pub mode: crate::call::RewriteMode,
    /// Follow-up requests at most per response; past it, `drop`.
    pub max_resumes: u32,
    /// The tool result a follow-up answers each withheld call with.
    pub neutral_result: std::sync::Arc<str>,
}

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// All request and whole-response bodies held at once; over it: 503.
    pub max_body_bytes_in_flight: usize,
    pub max_request_bytes: usize,
    pub max_response_bytes: usize,
    pub max_tool_args_bytes: usize,
    pub max_held_args_bytes: usize,
    pub max_event_bytes: usize,
    /// Client connections served at once (lowered at start to what the
    /// open-file limit allows); over it a new connection is answered 503.
    pub max_connections: usize,
    /// Upstream exchanges (gated or passed) at once; over it: 503.
    pub max_streams: usize,
    /// How long a client may take to send a request's head, and how long an
    /// idle keep-alive connection stays open.
    pub header_read_timeout: Duration,
    /// How long a client may take to send a request's body.
    pub request_body_timeout: Duration,
}

/// The LLM judge shared by the sentinel and the fact-checker. Present only when
/// `[judge]` is in the config: without it no judging happens.
#[derive(Debug, Clone)]
pub struct Judge {
    /// An upstream description of the judge's endpoint and key.
    pub upstream: Upstream,
    pub model: String,
    pub max_tokens: u32,
    /// Answers below this confidence are discarded (the rule's `fail` decides).
    pub confidence_threshold: f64,
    pub cache_ttl: Duration,
    pub cache_capacity: usize,
    /// Questions asked upstream at once; one over it fails (`busy`).
    pub max_concurrent: usize,
    /// The output fact-checker's model, answer size and timeout (`[judge.output]`).
    pub output: OutputCheck,
}

#[derive(Debug, Clone)]
pub struct OutputCheck {
    pub model: String,
    pub max_tokens: u32,
    pub timeout: Duration,
}

impl Judge {
    /// The same judge with the output fact-checker's model, answer size and timeout.
    pub fn for_output_check(&self) -> Judge {
        let mut j = self.clone();
        j.model = self.output.model.clone();
        j.max_tokens = self.output.max_tokens;
        j.upstream.timeout = self.output.timeout;
        j
    }
}

#[derive(Debug, Clone)]
pub struct Fence {
    pub enabled: bool,
    /// The environment variable holding the fence secret.
    pub key_env: String,
    /// Longer tool results are truncated with a visible marker (`None` = off).
    pub max_tool_result_bytes: Option<usize>,
}

/// `[log] format` (and `--log-format`): how log lines are written on stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One human-readable line per event (coloured only on a terminal
    /// without NO_COLOR).
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

#[derive(Debug, Clone, Copy)]
pub struct Stream {
    pub keepalive: Duration,
}

/// `[responses]`: the record of withheld calls per stored response, so a
/// request continuing from one (`previous_response_id`) can answer them.
#[derive(Debug, Clone, Copy)]
pub struct Responses {
    /// How many responses are remembered (0 = none).
    pub remember_max: u64,
    /// How many bytes all records may take, ids included.
    pub remember_max_bytes: u64,
    /// How long a record is kept.
    pub remember_ttl: Duration,
}
