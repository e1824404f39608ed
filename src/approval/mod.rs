//! Human approval: a call with the `ask` verdict waits here until a person
//! answers it (the admin API, its web page, the CLI, or a webhook), it times
//! out, the agent leaves or toolgate shuts down. Only an answer approves;
//! everything else is a neutral failure. A waiting call costs a map entry
//! and a sleeping future: nothing polls.
//!
//! An answer is bound to one call: the question's id is random and answered
//! once, and its digest (tool, canonical arguments, call id, session) may be
//! required to match. A `session` approval lets the same tool with the same
//! arguments through for the rest of the session, for `[approval]
//! session_ttl_secs`.

pub mod question;
mod shared;
mod ticket;
mod webhook;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::oneshot;

use crate::audit::AuditLog;
use crate::call::Call;
use crate::config::Approval;
use crate::context::Context;
use crate::digest::{hex, sha256};
use crate::error::Error;
use crate::fence::redact::Redactor;
use crate::metrics::Metrics;
use question::{Asking, Question};
pub use ticket::Ticket;

/// Where an answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Api,
    Ui,
    Cli,
    Webhook,
    /// An earlier `scope: "session"` approval.
    Session,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Api => "api",
            Channel::Ui => "ui",
            Channel::Cli => "cli",
            Channel::Webhook => "webhook",
            Channel::Session => "session",
        }
    }

    /// A channel a caller of the API may name (`webhook` and `session` are toolgate's own).
    pub fn named(s: &str) -> Option<Channel> {
        match s {
            "api" => Some(Channel::Api),
            "ui" => Some(Channel::Ui),
            "cli" => Some(Channel::Cli),
            _ => None,
        }
    }
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub approve: bool,
    pub by: String,
    pub channel: Channel,
    /// The approval holds for the same tool and arguments for the rest of the session.
    pub session: bool,
}

/// Why an answer was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No question has this id.
    Unknown,
    /// The question was answered, timed out or abandoned.
    Settled,
    /// The digest given is not the question's.
    Mismatch,
    /// A session approval for an unauthenticated agent: its session is a
    /// header any agent may send, so the approval could be taken by another.
    Anonymous,
}

struct Entry {
    question: Arc<Question>,
    digest: [u8; 32],
    grant: [u8; 32],
    tx: oneshot::Sender<Answer>,
    seq: u64,
}

#[derive(Default)]
struct Pending {
    open: HashMap<String, Entry>,
    closed: bool,
}

/// The calls waiting for a person, and the session approvals given.
pub struct Approvals {
    cfg: Approval,
    pending: Mutex<Pending>,
    /// Ids answered, timed out or abandoned (a second answer is a conflict).
    settled: moka::sync::Cache<String, ()>,
    /// Session approvals: grant key → who approved.
    grants: moka::sync::Cache<[u8; 32], Arc<str>>,
    /// SHA-256 of the API's bearer token; `None`: the API refuses everyone.
    token: Option<[u8; 32]>,
    hook: Option<webhook::Hook>,
    audit: AuditLog,
    metrics: Arc<Metrics>,
    redactor: Redactor,
    key: [u8; 32],
    next: AtomicU64,
    /// Questions shared with other replicas (`[state] backend = "redis"`).
    shared: std::sync::OnceLock<shared::Sharing>,
}

impl Approvals {
    /// Reads the token and the webhook's key from the environment.
    pub fn new(
        cfg: &Approval,
        audit: AuditLog,
        metrics: Arc<Metrics>,
        redactor: Redactor,
    ) -> Result<Approvals, Error> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let hook = match &cfg.webhook {
            None => None,
            Some(url) => {
                let Some(secret) = env(&cfg.secret_env) else {
                    return Err(Error::config(
                        "<approval>",
                        1,
                        format!(
                            "approval.webhook is set but its signing key is not: set {}",
                            cfg.secret_env
                        ),
                    ));
                };
                Some(webhook::Hook::new(
                    url,
                    cfg.webhook_ca_file.as_deref(),
                    secret.into_bytes(),
                )?)
            }
        };
        Ok(Approvals {
            pending: Mutex::default(),
            settled: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(Duration::from_secs(3600))
                .build(),
            grants: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(cfg.session_ttl)
                .build(),
            token: env(&cfg.token_env).map(|t| sha256(t.as_bytes())),
            hook,
            audit,
            metrics,
            redactor,
            key: crate::digest::random_key(),
            next: AtomicU64::new(1),
            shared: std::sync::OnceLock::new(),
            cfg: cfg.clone(),
        })
    }

    /// Whether `Authorization: Bearer …` carries the API's token.
    pub fn authorized(&self, header: Option<&http::HeaderValue>) -> bool {
        let (Some(want), Some(given)) = (&self.token, header.and_then(|h| h.to_str().ok())) else {
            return false;
        };
        let Some(t) = given.strip_prefix("Bearer ") else {
            return false;
        };
        // Hashes compared, so the time taken says nothing about the token.
        sha256(t.trim().as_bytes()) == *want
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks about `call` (decided `ask` by `rule`): the ticket to wait on.
    pub fn ask(self: &Arc<Self>, ctx: &Context, call: &Call, rule: Option<&str>) -> Ticket {
        let canonical = question::canonical(&call.arguments);
        let grant = question::grant_key(ctx, &call.name, &canonical);
        let mut ticket = Ticket::new(self.clone(), ctx, call, rule);
        if let Some(by) = self.grants.get(&grant) {
            ticket.settle_now(ticket::Ending::Answered(Answer {
                approve: true,
                by: by.to_string(),
                channel: Channel::Session,
                session: true,
            }));
            return ticket;
        }
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let id = hex(&crate::fence::marker::hmac_sha256(
            &self.key,
            &[&seq.to_be_bytes()],
        ))[..32]
            .to_string();
        let digest = question::call_digest(call, &canonical, &ctx.session);
        let now = SystemTime::now();
        let q = Arc::new(
            Asking {
                id: &id,
                call,
                ctx,
                rule,
                digest: &digest,
                created: now,
                expires: now + self.cfg.timeout,
            }
            .question(&self.redactor),
        );
        let (tx, rx) = oneshot::channel();
        let refused = {
            let mut p = self.lock();
            if p.closed {
                Some(ticket::Ending::Shutdown)
            } else if p.open.len() >= self.cfg.max_pending {
                Some(ticket::Ending::Full)
            } else {
                p.open.insert(
                    id.clone(),
                    Entry {
                        question: q.clone(),
                        digest,
                        grant,
                        tx,
                        seq,
                    },
                );
                self.metrics.approvals_pending.set(p.open.len() as i64);
                None
            }
        };
        match refused {
            Some(e) => ticket.settle_now(e),
            None => {
                ticket.wait_for(id, rx);
                self.publish(&q);
                if let Some(h) = &self.hook {
                    h.send(self.clone(), q);
                }
            }
        }
        ticket
    }

    /// The questions waiting, oldest first.
    pub fn list(&self) -> Vec<Arc<Question>> {
        let p = self.lock();
        let mut open: Vec<(u64, Arc<Question>)> = p
            .open
            .values()
            .map(|e| (e.seq, e.question.clone()))
            .collect();
        drop(p);
        open.sort_by_key(|(s, _)| *s);
        open.into_iter().map(|(_, q)| q).collect()
    }

    /// Whether `id` is still waiting.
    pub fn is_open(&self, id: &str) -> bool {
        self.lock().open.contains_key(id)
    }

    /// Answers question `id`; `digest`, when given, must be its digest.
    pub fn answer(&self, id: &str, a: Answer, digest: Option<&str>) -> Result<(), Refused> {
        let e = {
            let mut p = self.lock();
            match p.open.get(id) {
                None if self.settled.contains_key(id) => return Err(Refused::Settled),
                None => return Err(Refused::Unknown),
                Some(e) if digest.is_some_and(|d| !d.eq_ignore_ascii_case(&hex(&e.digest))) => {
                    return Err(Refused::Mismatch)
                }
                Some(e)
                    if a.approve
                        && a.session
                        && e.question.principal == crate::context::ANONYMOUS =>
                {
                    return Err(Refused::Anonymous)
                }
                Some(_) => {}
            }
            let e = p.open.remove(id).ok_or(Refused::Unknown)?;
            self.metrics.approvals_pending.set(p.open.len() as i64);
            e
        };
        self.settled.insert(id.to_string(), ());
        self.unpublish(id);
        if a.approve && a.session {
            self.grants.insert(e.grant, Arc::from(a.by.as_str()));
            self.share_grant(&e.grant, &a.by);
        }
        // The waiter left in between: it settles the id as abandoned itself.
        e.tx.send(a).map_err(|_| Refused::Settled)
    }

    /// Takes `id` off the pending list (timed out, abandoned); false when an
    /// answer took it first.
    fn withdraw(&self, id: &str) -> bool {
        let mut p = self.lock();
        let gone = p.open.remove(id).is_some();
        self.metrics.approvals_pending.set(p.open.len() as i64);
        drop(p);
        self.settled.insert(id.to_string(), ());
        self.unpublish(id);
        gone
    }

    /// Shutting down: every waiting call ends (a neutral failure), and
    /// later questions are refused.
    pub fn close(&self) {
        let mut p = self.lock();
        p.closed = true;
        // Dropping the senders wakes every waiter with "shut down".
        let n = p.open.len();
        let ids: Vec<String> = p.open.keys().cloned().collect();
        p.open.clear();
        self.metrics.approvals_pending.set(0);
        drop(p);
        for id in &ids {
            self.unpublish(id);
        }
        if n > 0 {
            tracing::info!(pending = n, "shutting down: calls waiting for approval end");
        }
    }

    fn timeout(&self) -> Duration {
        self.cfg.timeout
    }
}
