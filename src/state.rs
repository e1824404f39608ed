//! What every request shares: config, upstream client, gates (swapped atomically
//! on policy reload), audit log, metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::audit::AuditLog;
use crate::config::{Config, ErrorMode, PolicyMode};
use crate::error::Error;
use crate::fence::redact::Redactor;
use crate::gate::fact_check::FactChecker;
use crate::gate::injection_judge::InjectionJudge;
use crate::gate::sentinel::Sentinel;
use crate::gate::{Gate, Gates, Parts};
use crate::metrics::Metrics;
use crate::policy::PolicySet;
use crate::protocol::{Options, Withheld};
use crate::upstream::Upstream;

pub struct State {
    pub config: Config,
    pub upstream: Upstream,
    /// Where `/v1/messages` goes (`[upstream.messages]`).
    pub messages_upstream: Upstream,
    gates: RwLock<Arc<Gates>>,
    parts: Parts,
    pub audit: AuditLog,
    pub metrics: Arc<Metrics>,
    /// The deployment secret fence ids are keyed with.
    pub fence_secret: Vec<u8>,
    /// Redacts secrets (and toolgate's own key) from tool results.
    pub redactor: Redactor,
    /// Keeps toolgate's upstream keys out of responses.
    pub scrub: crate::scrub::Scrub,
    id_prefix: String,
    next_id: AtomicU64,
    /// Wakes the reload loop (`POST /reload` on the admin port).
    pub reload_requested: tokio::sync::Notify,
    /// Body bytes in flight (request bodies, whole response bodies).
    pub budget: crate::budget::Budget,
    /// Upstream exchanges in flight (`[limits] max_streams`).
    pub streams: Arc<tokio::sync::Semaphore>,
    /// Failed client authentications, for their rate-limited warning.
    pub auth_failures: crate::auth::Failures,
    /// The key of the ids given to messages that replace withheld calls.
    pub id_key: [u8; 32],
    /// Calls waiting for a person (`ask`), and session approvals.
    pub approvals: Arc<crate::approval::Approvals>,
    /// OpenTelemetry traces (`[telemetry]`); `None` when off.
    pub telemetry: Option<crate::telemetry::Telemetry>,
    /// Calls withheld from stored responses, by response id (`[responses]`).
    withheld: moka::sync::Cache<String, Arc<Vec<(String, String)>>>,
    /// Stored responses the agent knows by one id that a follow-up
    /// (`resume`) continued under another, by the first.
    renamed: moka::sync::Cache<String, Arc<str>>,
}

impl State {
    /// Loads policies, builds the upstream client and opens the audit sink.
    /// Any failure here happens before a port is bound.
    pub async fn new(config: Config) -> Result<State, Error> {
        // Before the policies load, so a `[[facts]] file` naming the bridge's output exists.
        if let Some(b) = &config.bridge {
            crate::facts::bridge::import_logged(b);
        }
        let policy = Arc::new(PolicySet::load(config.policy.dir.as_deref())?);
        let upstream = Upstream::new(&config.upstream)?;
        let messages_upstream = Upstream::new(&config.messages_upstream)?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let seed = format!("{nanos}-{}", std::process::id());
        let mut parts = Parts {
            namespaces: crate::gate::signals::Namespaces::of_config(&config.policy),
            threshold: config
                .judge
                .as_ref()
                .map(|j| j.confidence_threshold)
                .unwrap_or(0.8),
            metrics: Arc::new(Metrics::default()),
            ..Parts::default()
        };
        let audit =
            AuditLog::start(&config.audit, parts.metrics.audit_write_failures.clone()).await?;
        if let Some(j) = &config.judge {
            let judge = crate::judge::Judge::new(j)?;
            let sentinel = Sentinel::new(
                judge,
                j.confidence_threshold,
                config.audit.include_judge_reason,
            );
            parts.sensors.push(Arc::new(sentinel));
            let checker = FactChecker::new(
                crate::judge::Judge::new(&j.for_output_check())?,
                j.confidence_threshold,
                config.audit.include_judge_reason,
            );
            parts.sensors.push(Arc::new(checker));
            let injection = InjectionJudge::new(
                crate::judge::Judge::new(j)?,
                j.confidence_threshold,
                config.audit.include_judge_reason,
            );
            parts.sensors.push(Arc::new(injection));
        }
        let fence_secret = fence_secret(&config.fence.key_env);
        let keys: Vec<String> = [&upstream, &messages_upstream]
            .iter()
            .filter_map(|u| u.key_text())
            .collect();
        let scrub = crate::scrub::Scrub::new(keys.clone());
        let mut exact: Vec<(String, &'static str)> =
            keys.into_iter().map(|k| (k, "upstream_key")).collect();
        exact.extend(
            config
                .clients
                .iter()
                .filter_map(|c| c.token.clone())
                .map(|t| (t, "client_token")),
        );
        let redactor = Redactor::new(exact);
        let budget = crate::budget::Budget::new(config.limits.max_body_bytes_in_flight);
        let streams = Arc::new(tokio::sync::Semaphore::new(config.limits.max_streams));
        // Bounded by bytes and by count at once: each of the two records
        // has half the bytes, and every entry weighs its bytes, and at
        // least its share of them when `remember_max` entries are kept.
        let r = config.responses;
        let half = r.remember_max_bytes / 2;
        let floor = match r.remember_max {
            0 => u64::MAX,
            n => (half / n).max(1),
        };
        let weight = move |bytes: usize| -> u32 {
            u32::try_from((bytes as u64).max(floor)).unwrap_or(u32::MAX)
        };
        let capacity = if r.remember_max == 0 { 0 } else { half };
        let withheld = moka::sync::Cache::builder()
            .max_capacity(capacity)
            .weigher(move |k: &String, v: &Arc<Vec<(String, String)>>| {
                let calls: usize = v.iter().map(|(a, b)| a.len() + b.len() + 48).sum();
                weight(k.len() + calls + 64)
            })
            .time_to_live(r.remember_ttl)
            .build();
        let renamed = moka::sync::Cache::builder()
            .max_capacity(capacity)
            .weigher(move |k: &String, v: &Arc<str>| weight(k.len() + v.len() + 64))
            .time_to_live(r.remember_ttl)
            .build();
        let id_key =
            crate::fence::marker::hmac_sha256(&fence_secret, &[b"replacement message ids"]);
        let metrics = parts.metrics.clone();
        let approvals = Arc::new(crate::approval::Approvals::new(
            &config.approval,
            audit.clone(),
            metrics.clone(),
            redactor.clone(),
        )?);
        let telemetry = crate::telemetry::Telemetry::start(&config.telemetry)?;
        if let Some(t) = &telemetry {
            tracing::info!(endpoint = %t.endpoint, "traces go to an OTLP collector");
        }
        Ok(State {
            approvals,
            telemetry,
            id_key,
            fence_secret,
            redactor,
            scrub,
            streams,
            gates: RwLock::new(Arc::new(Gates::new(policy, &parts))),
            parts,
            config,
            upstream,
            messages_upstream,
            audit,
            metrics,
            id_prefix: crate::digest::sha256_hex(seed.as_bytes())[..10].to_string(),
            next_id: AtomicU64::new(1),
            reload_requested: tokio::sync::Notify::new(),
            budget,
            auth_failures: crate::auth::Failures::default(),
            withheld,
            renamed,
        })
    }

    /// The current gate pipeline. A request takes it once and keeps it, so a
    /// reload never splits one request across two policy versions.
    pub fn gates(&self) -> Arc<Gates> {
        match self.gates.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Installs a newly loaded policy set.
    pub fn swap_policy(&self, mut policy: PolicySet) {
        let old = self.gates().policy().clone();
        for l in &mut policy.limits {
            l.keep_buckets_of(&old.limits);
        }
        let g = Arc::new(Gates::new(Arc::new(policy), &self.parts));
        match self.gates.write() {
            Ok(mut w) => *w = g,
            Err(poisoned) => *poisoned.into_inner() = g,
        }
    }

    /// Adds a gate after the built-in ones (LLM sensors' gates, tests).
    pub fn add_gate(&mut self, gate: Arc<dyn Gate>) {
        self.parts.extra.push(gate);
        let policy = self.gates().policy().clone();
        self.gates = RwLock::new(Arc::new(Gates::new(policy, &self.parts)));
    }

    /// Adds an LLM sensor that rules can `require`.
    pub fn add_sensor(&mut self, sensor: Arc<dyn crate::gate::sensor::Sensor>) {
        self.parts.sensors.push(sensor);
        let policy = self.gates().policy().clone();
        self.gates = RwLock::new(Arc::new(Gates::new(policy, &self.parts)));
    }

    /// A request id unique within this process and unlikely to repeat across restarts.
    pub fn request_id(&self) -> String {
        use std::fmt::Write;
        // Sized for the longest id: `format!` guessed short and grew it.
        let mut id = String::with_capacity(self.id_prefix.len() + 17);
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let _ = write!(id, "{}-{n:x}", self.id_prefix);
        id
    }

    pub fn stream_options(&self) -> Options {
        let l = &self.config.limits;
        Options {
            neutral_message: self.config.rewrite.neutral_message.clone(),
            max_event_bytes: l.max_event_bytes,
            max_call_bytes: l.max_tool_args_bytes,
            max_held_bytes: l.max_held_args_bytes,
            id_key: self.id_key,
            resume: false,
            neutral_result: self.config.rewrite.neutral_result.clone(),
            refusal: false,
            text_calls: self.config.text_tool_calls,
        }
    }

    /// Records calls withheld from a stored response (added to what was
    /// already recorded for it).
    pub fn remember_withheld(&self, w: Withheld) {
        if w.calls.is_empty() || w.response_id.is_empty() {
            return;
        }
        let mut calls = self
            .withheld
            .get(&w.response_id)
            .map(|c| c.as_ref().clone())
            .unwrap_or_default();
        calls.extend(w.calls);
        self.withheld.insert(w.response_id, Arc::new(calls));
    }

    /// Records that stored response `first` was continued as `then`.
    pub fn remember_renamed(&self, first: String, then: String) {
        if !first.is_empty() && !then.is_empty() && first != then {
            self.renamed.insert(first, then.into());
        }
    }

    /// The bytes the Responses records take now (after pending evictions).
    pub fn remembered_bytes(&self) -> u64 {
        self.withheld.run_pending_tasks();
        self.renamed.run_pending_tasks();
        self.withheld.weighted_size() + self.renamed.weighted_size()
    }

    /// The response that continued stored response `id`, if any.
    pub fn renamed(&self, id: &str) -> Option<Arc<str>> {
        self.renamed.get(id)
    }

    /// The calls withheld from stored response `id`, if toolgate remembers it.
    pub fn withheld(&self, id: &str) -> Option<Arc<Vec<(String, String)>>> {
        self.withheld.get(id)
    }

    /// The upstream a protocol's requests go to.
    pub fn upstream_for(&self, protocol: crate::protocol::Protocol) -> &Upstream {
        match protocol {
            crate::protocol::Protocol::Messages => &self.messages_upstream,
            _ => &self.upstream,
        }
    }

    pub fn passthrough_errors(&self) -> bool {
        self.config.rewrite.errors == ErrorMode::Passthrough
    }

    pub fn monitor(&self) -> bool {
        self.config.policy.mode == PolicyMode::Monitor
    }
}

/// The fence secret from `key_env`, else 32 random bytes (fence ids then
/// change across restarts, which costs provider prompt-cache hits).
fn fence_secret(key_env: &str) -> Vec<u8> {
    if let Some(v) = std::env::var(key_env).ok().filter(|v| !v.is_empty()) {
        return v.into_bytes();
    }
    tracing::info!(
        env = key_env,
        "no fence key set; using a random one, so fence ids change across restarts"
    );
    crate::digest::random_key().to_vec()
}
