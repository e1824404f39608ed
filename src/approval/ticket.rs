//! One call waiting for a person: how its wait ends (answered, timed out,
//! the agent left, shut down, too many waiting), the audit record of that
//! ending, and its metrics. A ticket dropped while waiting (the agent went
//! away mid-request) withdraws its question and is audited as `left`.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tokio::sync::oneshot;

use super::{Answer, Approvals};
use crate::call::Call;
use crate::context::{Context, Left};
use crate::digest::{now_rfc3339, sha256_hex};

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Answered(Answer),
    Timeout,
    Left,
    Shutdown,
    /// `[approval] max_pending` calls were waiting already.
    Full,
}

impl Ending {
    fn decision(&self) -> &'static str {
        match self {
            Ending::Answered(a) if a.approve => "approve",
            Ending::Answered(_) => "deny",
            Ending::Timeout => "timeout",
            Ending::Left => "left",
            Ending::Shutdown => "shutdown",
            Ending::Full => "full",
        }
    }

    fn approved(&self) -> bool {
        matches!(self, Ending::Answered(a) if a.approve)
    }
}

/// What the audit record says of the call (never its arguments).
#[derive(Debug, Clone, Serialize)]
struct About {
    request_id: String,
    principal: String,
    protocol: &'static str,
    tool: String,
    call_id: String,
    rule: Option<String>,
    args_sha256: String,
}

#[derive(Serialize)]
struct Record<'a> {
    ts: String,
    #[serde(flatten)]
    about: &'a About,
    /// What the call became: `allow` when approved, else `reject`.
    verdict: &'static str,
    gate: &'static str,
    approval: Detail<'a>,
}

#[derive(Serialize)]
struct Detail<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    decision: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channel: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<&'static str>,
    waited_ms: u64,
}

enum Wait {
    /// Not yet asked, or settled at once.
    Now(Ending),
    On {
        id: String,
        rx: oneshot::Receiver<Answer>,
    },
    Done,
}

/// A call's wait for a person.
pub struct Ticket {
    approvals: Arc<Approvals>,
    wait: Wait,
    about: About,
    started: Instant,
    /// The request's trace, and when the wait began, for its span.
    trace: Option<(crate::telemetry::RequestTrace, std::time::SystemTime)>,
}

impl Ticket {
    pub(super) fn new(
        approvals: Arc<Approvals>,
        ctx: &Context,
        call: &Call,
        rule: Option<&str>,
    ) -> Ticket {
        let clip = |s: &str| s.chars().take(256).collect::<String>();
        Ticket {
            approvals,
            wait: Wait::Done,
            about: About {
                request_id: ctx.request_id.clone(),
                principal: ctx.principal.clone(),
                protocol: ctx.protocol,
                tool: clip(&call.name),
                call_id: clip(&call.id),
                rule: rule.map(str::to_string),
                args_sha256: sha256_hex(call.arguments.as_bytes()),
            },
            started: Instant::now(),
            trace: ctx.trace.clone().map(|t| (t, std::time::SystemTime::now())),
        }
    }

    pub(super) fn settle_now(&mut self, e: Ending) {
        self.wait = Wait::Now(e);
    }

    pub(super) fn wait_for(&mut self, id: String, rx: oneshot::Receiver<Answer>) {
        self.wait = Wait::On { id, rx };
    }

    /// Waits for the answer (or the time-out, or the agent leaving), audits
    /// how it ended, and says whether the call is approved. A record that
    /// could not be written fails the call closed. The ticket is borrowed,
    /// not moved in: a waiting call's future then holds no second copy of it.
    pub async fn wait(&mut self, left: &Left) -> bool {
        let timeout = self.approvals.timeout();
        // The wait stays in `self` while it runs: a ticket dropped mid-wait
        // withdraws its question (`Drop`).
        let ending = match &mut self.wait {
            Wait::Now(e) => e.clone(),
            Wait::Done => Ending::Shutdown,
            Wait::On { id, rx } => {
                let ending = tokio::select! {
                    a = &mut *rx => match a {
                        Ok(a) => Ending::Answered(a),
                        Err(_) => Ending::Shutdown,
                    },
                    _ = tokio::time::sleep(timeout) => Ending::Timeout,
                    _ = left.wait() => Ending::Left,
                };
                // An answer that came as the wait ended still counts.
                match ending {
                    Ending::Timeout | Ending::Left if !self.approvals.withdraw(id) => {
                        match rx.try_recv() {
                            Ok(a) => Ending::Answered(a),
                            Err(_) => ending,
                        }
                    }
                    e => e,
                }
            }
        };
        let id = match std::mem::replace(&mut self.wait, Wait::Done) {
            Wait::On { id, .. } => Some(id),
            _ => None,
        };
        let approved = ending.approved();
        // Boxed: the record's future would otherwise widen every waiting
        // call's state by its size (a thousand may wait).
        let written = Box::pin(record(
            &self.approvals,
            &self.about,
            id.as_deref(),
            &ending,
            self.started,
        ))
        .await;
        self.traced(&ending);
        approved && written
    }
}

impl Ticket {
    /// The wait's span, when the request is traced.
    fn traced(&self, ending: &Ending) {
        if let Some((t, at)) = &self.trace {
            let channel = match ending {
                Ending::Answered(a) => Some(a.channel.as_str()),
                _ => None,
            };
            t.approval(
                &self.about.tool,
                &self.about.call_id,
                *at,
                ending.decision(),
                channel,
            );
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Wait::On { id, .. } = std::mem::replace(&mut self.wait, Wait::Done) else {
            return;
        };
        self.approvals.withdraw(&id);
        self.traced(&Ending::Left);
        let (approvals, about, started) =
            (self.approvals.clone(), self.about.clone(), self.started);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                record(&approvals, &about, Some(&id), &Ending::Left, started).await;
            });
        }
    }
}

/// Audits and counts how a wait ended; false when the record was not written.
async fn record(
    approvals: &Approvals,
    about: &About,
    id: Option<&str>,
    ending: &Ending,
    started: Instant,
) -> bool {
    let answer = match ending {
        Ending::Answered(a) => Some(a),
        _ => None,
    };
    let channel = answer.map(|a| a.channel.as_str());
    let rec = Record {
        ts: now_rfc3339(),
        about,
        verdict: if ending.approved() { "allow" } else { "reject" },
        gate: "approval",
        approval: Detail {
            id,
            decision: ending.decision(),
            by: answer.map(|a| a.by.as_str()),
            channel,
            scope: answer.map(|a| if a.session { "session" } else { "call" }),
            waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        },
    };
    approvals
        .metrics
        .approval_decided(ending.decision(), channel.unwrap_or("none"));
    match approvals.audit.record(&rec).await {
        Ok(()) => true,
        Err(e) => {
            tracing::error!(request_id = %about.request_id, error = %e, "audit failed; the approved call fails closed");
            false
        }
    }
}
