//! What every request shares: config, upstream client, gates, audit log, metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::audit::AuditLog;
use crate::config::{Config, ErrorMode};
use crate::error::Error;
use crate::gate::Gates;
use crate::metrics::Metrics;
use crate::policy::PolicySet;
use crate::upstream::Upstream;
use crate::wire::stream::Options;

pub struct State {
    pub config: Config,
    pub upstream: Upstream,
    pub gates: Gates,
    pub audit: AuditLog,
    pub metrics: Arc<Metrics>,
    id_prefix: String,
    next_id: AtomicU64,
}

impl State {
    /// Loads policies, builds the upstream client and opens the audit sink.
    /// Any failure here happens before a port is bound.
    pub async fn new(config: Config) -> Result<State, Error> {
        let policy = Arc::new(PolicySet::load(config.policy.dir.as_deref())?);
        let upstream = Upstream::new(&config.upstream)?;
        let audit = AuditLog::start(&config.audit.path).await?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let seed = format!("{nanos}-{}", std::process::id());
        Ok(State {
            config,
            upstream,
            gates: Gates::new(policy),
            audit,
            metrics: Arc::new(Metrics::default()),
            id_prefix: crate::audit::sha256_hex(seed.as_bytes())[..10].to_string(),
            next_id: AtomicU64::new(1),
        })
    }

    /// A request id unique within this process and unlikely to repeat across restarts.
    pub fn request_id(&self) -> String {
        format!(
            "{}-{:x}",
            self.id_prefix,
            self.next_id.fetch_add(1, Ordering::Relaxed)
        )
    }

    pub fn stream_options(&self) -> Options {
        let l = &self.config.limits;
        Options {
            neutral_message: self.config.rewrite.neutral_message.clone(),
            max_event_bytes: l.max_event_bytes,
            max_call_bytes: l.max_tool_args_bytes,
            max_held_bytes: l.max_held_args_bytes,
        }
    }

    pub fn passthrough_errors(&self) -> bool {
        self.config.rewrite.errors == ErrorMode::Passthrough
    }
}
