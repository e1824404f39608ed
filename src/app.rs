//! The composition root: everything toolgate runs with is built here, once,
//! from a validated [`Config`] — policies, the upstream clients, the audit
//! trail, the LLM sensors, the fence secret and redactor, approvals,
//! telemetry — then handed to [`crate::proxy::state::State`] and served by
//! [`crate::server`]. Any failure here happens before a port is bound.

use std::sync::Arc;

use crate::audit::AuditLog;
use crate::config::Config;
use crate::error::Error;
use crate::fence::redact::Redactor;
use crate::gate::fact_check::FactChecker;
use crate::gate::injection_judge::InjectionJudge;
use crate::gate::sentinel::Sentinel;
use crate::gate::Parts;
use crate::metrics::Metrics;
use crate::policy::PolicySet;
use crate::proxy::state::{Built, State, Upstreams};
use crate::server::Running;
use crate::upstream::judge::Judge;
use crate::upstream::scrub::Scrub;

/// Builds the shared state: loads policies, builds the upstream clients,
/// opens the audit sink, starts the sensors, approvals and telemetry.
pub async fn build(config: Config) -> Result<State, Error> {
    // Before the policies load, so a `[[facts]] file` naming the bridge's output exists.
    if let Some(b) = &config.bridge {
        crate::facts::bridge::import_logged(b);
    }
    let policy = Arc::new(PolicySet::load(config.policy.dir.as_deref())?);
    let upstreams = Upstreams::new(&config)?;
    let mut parts = Parts {
        namespaces: crate::gate::signals::Namespaces::of_config(&config.policy),
        threshold: config
            .judge
            .as_ref()
            .map(|j| j.confidence_threshold)
            .unwrap_or(0.8),
        metrics: Arc::new(Metrics::default()),
        shared: crate::state::Shared::new(&config.state)?.map(Arc::new),
        ..Parts::default()
    };
    let audit = AuditLog::start(&config.audit, parts.metrics.audit_write_failures.clone()).await?;
    if let Some(j) = &config.judge {
        let reason = config.audit.include_judge_reason;
        let sentinel = Sentinel::new(Judge::new(j)?, j.confidence_threshold, reason);
        parts.sensors.push(Arc::new(sentinel));
        let checker = FactChecker::new(
            Judge::new(&j.for_output_check())?,
            j.confidence_threshold,
            reason,
        );
        parts.sensors.push(Arc::new(checker));
        let injection = InjectionJudge::new(Judge::new(j)?, j.confidence_threshold, reason);
        parts.sensors.push(Arc::new(injection));
    }
    let fence_secret = fence_secret(
        &config.fence.key_env,
        config.state.backend == crate::config::Backend::Redis,
    );
    let keys: Vec<String> = upstreams
        .all()
        .iter()
        .filter_map(|u| u.key_text())
        .collect();
    let scrub = Scrub::new(keys.clone());
    let mut exact: Vec<(String, &'static str)> =
        keys.into_iter().map(|k| (k, "upstream_key")).collect();
    exact.extend(
        config
            .clients
            .iter()
            .filter_map(|c| c.token.clone())
            .map(|t| (t, "client_token")),
    );
    // The operator's tokens never reach a model either.
    for (var, kind) in [
        (&config.admin.token_env, "admin_token"),
        (&config.approval.token_env, "approval_token"),
    ] {
        if let Some(t) = std::env::var(var).ok().filter(|t| t.trim().len() >= 8) {
            exact.push((t.trim().to_string(), kind));
        }
    }
    let redactor = Redactor::new(exact);
    let approvals = Arc::new(crate::approval::Approvals::new(
        &config.approval,
        audit.clone(),
        parts.metrics.clone(),
        redactor.clone(),
    )?);
    if let Some(shared) = &parts.shared {
        approvals.share(shared.clone());
    }
    let telemetry = crate::telemetry::Telemetry::start(&config.telemetry)?;
    if let Some(t) = &telemetry {
        tracing::info!(endpoint = %t.endpoint, "traces go to an OTLP collector");
    }
    let built = Built {
        policy,
        parts,
        upstreams,
        audit,
        fence_secret,
        redactor,
        scrub,
        approvals,
        telemetry,
        mcp: crate::proxy::mcp::servers::Servers::new(&config)?,
    };
    Ok(State::new(config, built))
}

/// Builds the state, binds both ports and starts serving. Nothing is bound
/// when the state cannot be built.
pub async fn start(config: Config) -> Result<Running, Error> {
    crate::server::start(build(config).await?).await
}

/// Starts toolgate and serves until SIGTERM or SIGINT, then drains and exits.
pub async fn run(config: Config) -> Result<(), Error> {
    let running = start(config).await?;
    tracing::info!(addr = %running.addr, admin = %running.admin_addr, "toolgate listening");
    crate::server::signal::wait().await;
    running.stop().await;
    Ok(())
}

/// The fence secret from `key_env`, else 32 random bytes (fence ids then
/// change across restarts, which costs provider prompt-cache hits; and
/// replicas sharing state, whose records are sealed under it, cannot read
/// each other's).
fn fence_secret(key_env: &str, replicas: bool) -> Vec<u8> {
    if let Some(v) = std::env::var(key_env).ok().filter(|v| !v.is_empty()) {
        return v.into_bytes();
    }
    if replicas {
        tracing::warn!(
            env = key_env,
            "no fence key set; using a random one, so other replicas cannot open the records \
             this one shares in Redis: give every replica the same key"
        );
    } else {
        tracing::info!(
            env = key_env,
            "no fence key set; using a random one, so fence ids change across restarts"
        );
    }
    crate::digest::random_key().to_vec()
}
