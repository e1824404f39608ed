//! The raw TOML mirror of `toolgate.toml`: every table with
//! `deny_unknown_fields` and its defaults. [`super::Config::from_toml`] checks it.

use serde::Deserialize;
use toml::Spanned;

use super::named::{self, Defaults, RawNamed};
use super::{AuthMode, ErrorMode, LogFormat, PolicyMode};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawConfig {
    pub(crate) listen: RawListen,
    pub(crate) upstream: RawUpstream,
    pub(crate) policy: RawPolicy,
    pub(crate) audit: RawAudit,
    pub(crate) rewrite: RawRewrite,
    pub(crate) limits: RawLimits,
    pub(crate) stream: RawStream,
    pub(crate) gate: RawGate,
    pub(crate) responses: RawResponses,
    pub(crate) fence: RawFence,
    pub(crate) judge: Option<RawJudge>,
    pub(crate) client: Vec<Spanned<RawClient>>,
    pub(crate) facts: RawFactsConfig,
    pub(crate) log: RawLog,
    pub(crate) telemetry: super::telemetry::RawTelemetry,
    pub(crate) approval: super::approval::RawApproval,
    pub(crate) admin: RawAdmin,
    pub(crate) state: super::state::RawState,
    pub(crate) mcp: Vec<super::mcp::RawMcp>,
}

/// `[admin]`: who may change state through the admin port, and which
/// `Host` names it answers to.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawAdmin {
    pub(crate) token_env: String,
    pub(crate) hosts: Vec<String>,
    pub(crate) max_connections: Spanned<usize>,
}

impl Default for RawAdmin {
    fn default() -> Self {
        RawAdmin {
            token_env: "TOOLGATE_ADMIN_TOKEN".into(),
            hosts: Vec::new(),
            max_connections: Spanned::new(0..0, 64),
        }
    }
}

/// `[log]`: how log lines are written on stderr.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawLog {
    pub(crate) format: LogFormat,
}

/// `[facts]` in the config: the trace-to-facts bridge (facts themselves live in policy files).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawFactsConfig {
    pub(crate) bridge: Option<RawBridge>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBridge {
    pub(crate) dir: String,
    pub(crate) out: String,
    #[serde(default = "default_bridge_interval")]
    pub(crate) interval_secs: u64,
}

fn default_bridge_interval() -> u64 {
    300
}

/// `[judge.output]`: the output fact-checker's own limits.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawOutputCheck {
    pub(crate) model: Option<String>,
    pub(crate) max_tokens: u32,
    pub(crate) timeout_ms: u64,
}

impl Default for RawOutputCheck {
    fn default() -> Self {
        RawOutputCheck {
            model: None,
            max_tokens: 500,
            timeout_ms: 5000,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClient {
    pub(crate) name: String,
    pub(crate) token_env: Option<String>,
    pub(crate) token_sha256: Option<String>,
    pub(crate) cert_cn: Option<String>,
    pub(crate) cert_uri: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawJudge {
    pub(crate) base_url: Option<Spanned<String>>,
    pub(crate) model: String,
    pub(crate) api_key_env: Option<OneOrMany>,
    pub(crate) timeout_ms: u64,
    pub(crate) max_tokens: u32,
    pub(crate) confidence_threshold: f64,
    pub(crate) cache_ttl_secs: u64,
    pub(crate) cache_capacity: usize,
    pub(crate) max_concurrent: usize,
    pub(crate) output: RawOutputCheck,
}

impl Default for RawJudge {
    fn default() -> Self {
        RawJudge {
            base_url: None,
            model: "openai/gpt-5-mini".into(),
            api_key_env: None,
            timeout_ms: 5000,
            max_tokens: 150,
            confidence_threshold: 0.8,
            cache_ttl_secs: 3600,
            cache_capacity: 10_000,
            max_concurrent: 1024,
            output: RawOutputCheck::default(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawFence {
    pub(crate) enabled: bool,
    pub(crate) key_env: String,
    pub(crate) max_tool_result_bytes: usize,
}

impl Default for RawFence {
    fn default() -> Self {
        RawFence {
            enabled: true,
            key_env: "TOOLGATE_FENCE_KEY".into(),
            max_tool_result_bytes: 0,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawListen {
    pub(crate) addr: Spanned<String>,
    pub(crate) admin: Spanned<String>,
    pub(crate) drain_secs: u64,
    pub(crate) allow_anonymous: bool,
    pub(crate) tls: Option<RawTls>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub(crate) cert: String,
    pub(crate) key: String,
    pub(crate) client_ca: Option<String>,
}

impl Default for RawListen {
    fn default() -> Self {
        RawListen {
            addr: Spanned::new(0..0, "127.0.0.1:8080".into()),
            admin: Spanned::new(0..0, "127.0.0.1:9090".into()),
            drain_secs: 30,
            allow_anonymous: false,
            tls: None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub(crate) fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawUpstream {
    pub(crate) base_url: Spanned<String>,
    pub(crate) api_key_env: OneOrMany,
    pub(crate) auth: AuthMode,
    pub(crate) timeout_secs: u64,
    pub(crate) connect_timeout_secs: u64,
    /// Longest silence between a streamed response's bytes; 0: none.
    pub(crate) idle_timeout_secs: u64,
    pub(crate) ca_file: Option<String>,
    pub(crate) http2: bool,
    /// `[upstream.messages]`: where `/v1/messages` goes.
    pub(crate) messages: RawNamed,
    /// `[upstream.gemini]`: where Gemini's `generateContent` goes.
    pub(crate) gemini: RawNamed,
}

impl RawUpstream {
    /// The named sections as written, each with its defaults.
    pub(crate) fn named(&mut self) -> [(&'static Defaults, RawNamed); 2] {
        [
            (&named::MESSAGES, std::mem::take(&mut self.messages)),
            (&named::GEMINI, std::mem::take(&mut self.gemini)),
        ]
    }
}

impl Default for RawUpstream {
    fn default() -> Self {
        RawUpstream {
            base_url: Spanned::new(0..0, "https://openrouter.ai/api/v1".into()),
            api_key_env: OneOrMany::Many(vec![
                "OPENROUTER_API_KEY".into(),
                "OPENAI_API_KEY".into(),
            ]),
            auth: AuthMode::Inject,
            timeout_secs: 600,
            connect_timeout_secs: 10,
            idle_timeout_secs: 300,
            ca_file: None,
            http2: true,
            messages: RawNamed::default(),
            gemini: RawNamed::default(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawPolicy {
    pub(crate) dir: Option<String>,
    pub(crate) default_phase: Option<String>,
    pub(crate) hide_denied_tools: bool,
    pub(crate) mode: PolicyMode,
    pub(crate) namespace_separators: Vec<String>,
    pub(crate) namespace_prefixes: Vec<String>,
    pub(crate) reload_secs: u64,
    pub(crate) reload: super::ReloadMode,
    pub(crate) settle_ms: u64,
    pub(crate) reload_drops: super::ReloadDrops,
}

impl Default for RawPolicy {
    fn default() -> Self {
        RawPolicy {
            dir: None,
            default_phase: None,
            hide_denied_tools: true,
            mode: PolicyMode::Enforce,
            namespace_separators: vec![".".into(), "__".into(), "/".into()],
            namespace_prefixes: vec!["comm".into()],
            reload_secs: 2,
            reload: super::ReloadMode::Watch,
            settle_ms: 1000,
            reload_drops: super::ReloadDrops::Refuse,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawAudit {
    pub(crate) path: String,
    pub(crate) include_judge_reason: bool,
    pub(crate) on_error: super::AuditOnError,
    /// Rotate a file sink past this size; 0: never.
    pub(crate) max_bytes: u64,
    pub(crate) keep: usize,
    pub(crate) key_env: String,
}

impl Default for RawAudit {
    fn default() -> Self {
        RawAudit {
            max_bytes: 0,
            keep: 5,
            key_env: "TOOLGATE_AUDIT_KEY".into(),
            path: "-".into(),
            include_judge_reason: false,
            on_error: super::AuditOnError::FailClosed,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawRewrite {
    pub(crate) neutral_message: Spanned<String>,
    pub(crate) errors: ErrorMode,
    pub(crate) mode: crate::call::RewriteMode,
    pub(crate) max_resumes: Spanned<u32>,
    pub(crate) neutral_result: Spanned<String>,
}

impl Default for RawRewrite {
    fn default() -> Self {
        RawRewrite {
            neutral_message: Spanned::new(0..0, "I wasn't able to complete that action.".into()),
            errors: ErrorMode::Provider,
            mode: crate::call::RewriteMode::Drop,
            max_resumes: Spanned::new(0..0, 2),
            neutral_result: Spanned::new(0..0, "The action could not be completed.".into()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawLimits {
    pub(crate) max_request_bytes: usize,
    pub(crate) max_response_bytes: usize,
    pub(crate) max_tool_args_bytes: usize,
    pub(crate) max_held_args_bytes: usize,
    pub(crate) max_event_bytes: usize,
    pub(crate) max_body_bytes_in_flight: usize,
    pub(crate) max_connections: usize,
    pub(crate) max_streams: usize,
    pub(crate) header_read_timeout_secs: u64,
    pub(crate) request_body_timeout_secs: u64,
}

impl Default for RawLimits {
    fn default() -> Self {
        RawLimits {
            max_connections: 4096,
            max_streams: 1024,
            header_read_timeout_secs: 30,
            request_body_timeout_secs: 60,
            max_body_bytes_in_flight: 512 << 20,
            max_request_bytes: 16 << 20,
            max_response_bytes: 64 << 20,
            max_tool_args_bytes: 1 << 20,
            max_held_args_bytes: 8 << 20,
            max_event_bytes: 16 << 20,
        }
    }
}

/// `[gate]`: what is read as a tool call.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawGate {
    /// Tool calls written as text (`<tool_call>`, `<|python_tag|>`,
    /// `[TOOL_CALLS]`) are held and gated (Chat Completions).
    pub(crate) text_tool_calls: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawStream {
    pub(crate) keepalive_ms: u64,
}

impl Default for RawStream {
    fn default() -> Self {
        RawStream { keepalive_ms: 5000 }
    }
}

/// `[responses]`: what toolgate remembers of stored Responses-API answers.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawResponses {
    pub(crate) remember_max: u64,
    pub(crate) remember_max_bytes: u64,
    pub(crate) remember_ttl_secs: u64,
}

impl Default for RawResponses {
    fn default() -> Self {
        RawResponses {
            remember_max: 10_000,
            remember_max_bytes: 64 << 20,
            remember_ttl_secs: 24 * 3600,
        }
    }
}
