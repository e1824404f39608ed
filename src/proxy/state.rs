//! What every request shares: config, upstream clients, gates (swapped
//! atomically on policy reload), audit log, metrics, the records of stored
//! Responses. Built once by [`crate::app`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::audit::AuditLog;
use crate::config::{Config, PolicyMode};
use crate::fence::redact::Redactor;
use crate::gate::{Gate, Gates, Parts};
use crate::metrics::Metrics;
use crate::policy::PolicySet;
use crate::protocol::{Options, Protocol, Withheld};

pub mod conversations;
mod firsts;
mod proposals;
mod recall;
use crate::upstream::Upstream;

/// The upstream clients: one per upstream section a protocol names
/// ([`Protocol::upstream_section`]), found by protocol.
pub struct Upstreams {
    clients: Vec<Upstream>,
    /// `clients[by_protocol[p as usize]]` serves protocol `p`.
    by_protocol: [usize; Protocol::ALL.len()],
}

impl Upstreams {
    /// One client per section the protocols use, built from `config`.
    pub fn new(config: &Config) -> Result<Upstreams, crate::error::Error> {
        let mut sections: Vec<Option<&'static str>> = Vec::new();
        let mut clients = Vec::new();
        let mut by_protocol = [0; Protocol::ALL.len()];
        for p in Protocol::ALL {
            let section = p.upstream_section();
            let i = match sections.iter().position(|s| *s == section) {
                Some(i) => i,
                None => {
                    clients.push(
                        Upstream::new(config.upstream_section(section))?
                            .keep_idle(config.limits.max_streams),
                    );
                    sections.push(section);
                    clients.len() - 1
                }
            };
            by_protocol[p as usize] = i;
        }
        Ok(Upstreams {
            clients,
            by_protocol,
        })
    }

    /// The client a protocol's requests go to.
    pub fn of(&self, p: Protocol) -> &Upstream {
        // Built for every protocol, so the index is always there.
        &self.clients[self.by_protocol[p as usize]]
    }

    /// Every client once.
    pub fn all(&self) -> &[Upstream] {
        &self.clients
    }
}

/// What the composition root builds for [`State::new`].
pub struct Built {
    pub policy: Arc<PolicySet>,
    /// Metrics, sensors, namespaces and the judge threshold the gates are built with.
    pub parts: Parts,
    pub upstreams: Upstreams,
    pub audit: AuditLog,
    pub fence_secret: Vec<u8>,
    pub redactor: Redactor,
    pub scrub: crate::upstream::scrub::Scrub,
    pub approvals: Arc<crate::approval::Approvals>,
    pub telemetry: Option<crate::telemetry::Telemetry>,
    /// The `[[mcp]]` servers.
    pub mcp: crate::proxy::mcp::servers::Servers,
}

pub struct State {
    pub config: Config,
    /// The upstream clients, one per upstream section, found by protocol.
    pub upstreams: Upstreams,
    gates: RwLock<Arc<Gates>>,
    parts: Parts,
    pub audit: AuditLog,
    pub metrics: Arc<Metrics>,
    /// The deployment secret fence ids are keyed with.
    pub fence_secret: Vec<u8>,
    /// Redacts secrets (and toolgate's own key) from tool results.
    pub redactor: Redactor,
    /// Tool results fenced with this secret and redactor, for the turns
    /// that send them again.
    pub fenced: crate::fence::kept::Kept,
    /// Keeps toolgate's upstream keys out of responses.
    pub scrub: crate::upstream::scrub::Scrub,
    id_prefix: String,
    next_id: AtomicU64,
    /// Wakes the reload loop (`POST /reload` on the admin port).
    pub reload_requested: tokio::sync::Notify,
    /// The reload asked for may drop deny, reject or ask rules
    /// (`POST /reload?drops=apply`); taken by that reload.
    pub reload_drops_asked: std::sync::atomic::AtomicBool,
    /// Body bytes in flight (request bodies, whole response bodies).
    pub budget: crate::proxy::budget::Budget,
    /// Upstream exchanges in flight (`[limits] max_streams`).
    pub streams: Arc<tokio::sync::Semaphore>,
    /// Failed client authentications, for their rate-limited warning.
    pub auth_failures: crate::proxy::auth::Failures,
    /// The key of the ids given to messages that replace withheld calls.
    pub id_key: [u8; 32],
    /// Calls waiting for a person (`ask`), and session approvals.
    pub approvals: Arc<crate::approval::Approvals>,
    /// OpenTelemetry traces (`[telemetry]`); `None` when off.
    pub telemetry: Option<crate::telemetry::Telemetry>,
    /// The `[[mcp]]` servers, their sessions and pinned tools.
    pub mcp: crate::proxy::mcp::servers::Servers,
    /// Calls withheld from stored responses, by response id (`[responses]`).
    withheld: moka::sync::Cache<String, Arc<Vec<(String, String)>>>,
    /// Stored responses the agent knows by one id that a follow-up
    /// (`resume`) continued under another, by the first.
    renamed: moka::sync::Cache<String, Arc<str>>,
    /// What the gates know of each Messages thread, by the id of each
    /// answer in it.
    threads: moka::sync::Cache<String, crate::proxy::threads::Shared>,
    /// The turn each stored response (a Responses id, a thread's answer)
    /// ends, linked to the one before: what the signals read of its
    /// conversation, so that a follow-up by reference is read as though
    /// it had come whole.
    history: moka::sync::Cache<String, Arc<crate::context::Turn>>,
    /// Conversations of the Conversations API, by id.
    conversations: moka::sync::Cache<String, Arc<conversations::Conversation>>,
    /// Calls a principal may read back from a conversation's items.
    vouched: moka::sync::Cache<[u8; 32], ()>,
    /// The digest of each tool's first definition in a session, by
    /// (principal, session, tool) (`proxy::definitions`).
    pub definitions: moka::sync::Cache<[u8; 32], Arc<str>>,
    /// Where recent model calls were proposed, by `proxy::story::key`, for
    /// the MCP call that carries one out.
    pub proposed: moka::sync::Cache<[u8; 32], Arc<[crate::proxy::story::Proposal]>>,
}

impl State {
    /// Assembles the shared state from the parts the composition root
    /// ([`crate::app::build`]) built, and makes what belongs to the
    /// request path alone: the body budget, the stream cap, the records of
    /// stored Responses, the fenced tool results kept, the id prefix.
    pub fn new(config: Config, b: Built) -> State {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let seed = format!("{nanos}-{}", std::process::id());
        let budget = crate::proxy::budget::Budget::new(config.limits.max_body_bytes_in_flight);
        let streams = Arc::new(tokio::sync::Semaphore::new(config.limits.max_streams));
        // Bounded by bytes and by count at once: the conversations' texts
        // have half the bytes, each of the three other records a sixth, and
        // every entry weighs its bytes, and at least its share of them when
        // `remember_max` entries are kept.
        let r = config.responses;
        let third = r.remember_max_bytes / 6;
        let floor = match r.remember_max {
            0 => u64::MAX,
            // Rounded up: `third / floor` entries at most, never more than `n`.
            n => third.div_ceil(n).max(1),
        };
        let weight = move |bytes: usize| -> u32 {
            u32::try_from((bytes as u64).max(floor)).unwrap_or(u32::MAX)
        };
        let capacity = if r.remember_max == 0 { 0 } else { third };
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
        let threads = moka::sync::Cache::builder()
            .max_capacity(capacity)
            .weigher(move |k: &String, v: &crate::proxy::threads::Shared| {
                weight(k.len() + v.weight())
            })
            .time_to_live(r.remember_ttl)
            .build();
        let half = if r.remember_max == 0 {
            0
        } else {
            r.remember_max_bytes / 2
        };
        let history = moka::sync::Cache::builder()
            .max_capacity(half)
            .weigher(move |k: &String, v: &Arc<crate::context::Turn>| {
                u32::try_from(k.len() + v.weight()).unwrap_or(u32::MAX)
            })
            .time_to_live(r.remember_ttl)
            .build();
        // The conversations and the calls vouched for share the withheld
        // calls' sixth: each is small.
        let conversations = moka::sync::Cache::builder()
            .max_capacity(capacity / 2)
            .weigher(move |k: &String, v: &Arc<conversations::Conversation>| {
                weight(k.len() + v.weight())
            })
            .time_to_live(r.remember_ttl)
            .build();
        let definitions = moka::sync::Cache::builder()
            .max_capacity(200_000)
            .time_to_idle(firsts::FIRST_TTL)
            .build();
        let vouched = moka::sync::Cache::builder()
            .max_capacity(capacity / 2)
            .weigher(move |_: &[u8; 32], _: &()| weight(96))
            .time_to_live(r.remember_ttl)
            .build();
        let id_key =
            crate::fence::marker::hmac_sha256(&b.fence_secret, &[b"replacement message ids"]);
        let upstreams: Vec<(&'static str, &'static str)> = crate::protocol::Protocol::ALL
            .iter()
            .map(|p| (p.upstream_section().unwrap_or("default"), p.label()))
            .collect();
        let redactions: Vec<&'static str> = crate::fence::secrets::PATTERNS
            .iter()
            .map(|p| p.0)
            .collect();
        b.parts
            .metrics
            .zero(&crate::policy::SENSORS, &redactions, &upstreams);
        State {
            approvals: b.approvals,
            telemetry: b.telemetry,
            mcp: b.mcp,
            id_key,
            fence_secret: b.fence_secret,
            redactor: b.redactor,
            fenced: crate::fence::kept::Kept::default(),
            scrub: b.scrub,
            streams,
            gates: RwLock::new(Arc::new(Gates::new(b.policy, &b.parts))),
            metrics: b.parts.metrics.clone(),
            parts: b.parts,
            config,
            upstreams: b.upstreams,
            audit: b.audit,
            id_prefix: crate::digest::sha256_hex(seed.as_bytes())[..10].to_string(),
            next_id: AtomicU64::new(1),
            reload_requested: tokio::sync::Notify::new(),
            reload_drops_asked: std::sync::atomic::AtomicBool::new(false),
            budget,
            auth_failures: crate::proxy::auth::Failures::default(),
            withheld,
            renamed,
            threads,
            history,
            conversations,
            vouched,
            definitions,
            proposed: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(proposals::PROPOSAL_TTL)
                .build(),
        }
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
            early: false,
            foresee: false,
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
        self.share_withheld(&w);
        calls.extend(w.calls);
        self.withheld.insert(w.response_id, Arc::new(calls));
    }

    /// Records a thread's facts under the id of an answer in it. An id
    /// already bound to other facts is not rebound: the provider gave it
    /// to two threads, and no thread continues from it.
    pub fn remember_thread(&self, answer: String, facts: crate::proxy::threads::Shared) {
        use crate::proxy::threads::Facts;
        if answer.is_empty() {
            return;
        }
        let mut reused = false;
        self.threads
            .entry(answer.clone())
            .and_upsert_with(|known| match known {
                None => facts.clone(),
                Some(k) if k.value().same_as(&facts) => k.into_value(),
                Some(_) => {
                    reused = true;
                    Arc::new(Facts::reused())
                }
            });
        if reused {
            self.metrics.provider_fault("answer_id_reused");
            tracing::warn!(
                "the provider gave one answer id to two threads: no thread continues from it"
            );
        }
        self.share_thread(&answer, &facts, reused);
    }

    /// Remembers the turn stored response (or thread answer) `id` ends,
    /// with the calls decided in it.
    /// `read_unseen`: a provider-run tool read what toolgate never sees in
    /// the answer, so the turns continuing it do not know it whole.
    pub fn remember_history(
        &self,
        id: &str,
        turn: &crate::context::Turn,
        decided: &[crate::context::Source],
        read_unseen: bool,
    ) {
        if id.is_empty() {
            return;
        }
        let mut texts = turn.texts.clone().answered_with(decided);
        texts.unseen |= read_unseen;
        let remembered = crate::context::Turn {
            prev: turn.prev.clone(),
            texts,
            conversation: None,
        };
        self.share_history(id, &remembered);
        self.history.insert(id.to_string(), Arc::new(remembered));
        if let Some(c) = &turn.conversation {
            self.advance_conversation(c, id, true);
        }
    }

    /// Records that stored response `first` was continued as `then`.
    pub fn remember_renamed(&self, first: String, then: String) {
        if !first.is_empty() && !then.is_empty() && first != then {
            self.share_renamed(&first, &then);
            self.renamed.insert(first, then.into());
        }
    }

    /// The bytes the Responses records take now (after pending evictions).
    pub fn remembered_bytes(&self) -> u64 {
        self.withheld.run_pending_tasks();
        self.renamed.run_pending_tasks();
        self.threads.run_pending_tasks();
        self.history.run_pending_tasks();
        self.conversations.run_pending_tasks();
        self.vouched.run_pending_tasks();
        self.withheld.weighted_size()
            + self.renamed.weighted_size()
            + self.threads.weighted_size()
            + self.history.weighted_size()
            + self.conversations.weighted_size()
            + self.vouched.weighted_size()
    }

    /// The upstream a protocol's requests go to.
    pub fn upstream_for(&self, protocol: Protocol) -> &Upstream {
        self.upstreams.of(protocol)
    }

    pub fn monitor(&self) -> bool {
        self.config.policy.mode == PolicyMode::Monitor
    }
}

impl crate::protocol::Stored for State {
    fn renamed(&self, id: &str) -> Option<Arc<str>> {
        self.renamed.get(id)
    }

    fn withheld(&self, id: &str) -> Option<Arc<Vec<(String, String)>>> {
        self.withheld.get(id)
    }
}
