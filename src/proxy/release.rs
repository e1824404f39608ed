//! Decides a batch of held calls, audits every decision, and says which may be released.
//!
//! The audit record is written before a call is released; if it could not be
//! (and `[audit] on_error` is not `continue`) the call fails closed.

use std::time::Duration;

use serde::Serialize;

use crate::approval::Ticket;
use crate::call::{Call, Release};
use crate::context::{Context, Left};
use crate::digest::{now_rfc3339, sha256_hex};
use crate::gate::{Decision, Gates};
use crate::metrics::labels::Decided;
use crate::policy::{RewriteMode, Verdict};
use crate::proxy::state::State;

/// Longest tool name written to the audit trail (names are model output).
const MAX_NAME: usize = 256;

fn clip(s: &str) -> &str {
    match s.char_indices().nth(MAX_NAME) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// One line of the audit trail: never the arguments, only their hash and size.
#[derive(Serialize)]
struct Record<'a> {
    ts: String,
    request_id: &'a str,
    /// The provider's id for the answer the call came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream_request_id: Option<&'a str>,
    principal: &'a str,
    protocol: &'static str,
    choice: u32,
    kind: &'a str,
    tool: &'a str,
    call_id: &'a str,
    verdict: &'static str,
    gate: &'static str,
    reason: &'a str,
    rule: Option<&'a str>,
    gates: Vec<StepOut>,
    args_sha256: String,
    args_bytes: usize,
    args_oversized: bool,
    policy: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'static str>,
    /// The follow-up request the call came from (`rewrite = "resume"`).
    #[serde(skip_serializing_if = "is_zero")]
    resume: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    signals: Option<crate::gate::signals::AuditView<'a>>,
    /// Rules whose condition failed at run time (each counted as matched).
    #[serde(skip_serializing_if = "Option::is_none")]
    cel_errors: Option<&'a serde_json::Value>,
    /// An MCP call's: the request whose answer proposed the same call
    /// (`proxy::story`), and that call's id there.
    #[serde(skip_serializing_if = "Option::is_none")]
    proposed_in: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    proposed_call: Option<&'a str>,
}

#[derive(Serialize)]
struct StepOut {
    gate: &'static str,
    verdict: &'static str,
    us: u64,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn record<'a>(ctx: &'a Context, call: &'a Call, d: &'a Decision, policy: &'a str) -> Record<'a> {
    Record {
        ts: now_rfc3339(),
        request_id: &ctx.request_id,
        upstream_request_id: ctx.upstream_request_id.as_deref(),
        principal: &ctx.principal,
        protocol: ctx.protocol,
        choice: call.choice,
        kind: call.kind.as_str(),
        tool: clip(&call.name),
        call_id: clip(&call.id),
        verdict: d.verdict.as_str(),
        gate: d.gate,
        reason: &d.outcome.reason,
        rule: d.outcome.rule.as_deref(),
        gates: d
            .steps
            .iter()
            .map(|s| StepOut {
                gate: s.gate,
                verdict: s.verdict.as_str(),
                us: s.micros,
            })
            .collect(),
        args_sha256: sha256_hex(call.arguments.as_bytes()),
        args_bytes: call.arguments.len(),
        args_oversized: call.oversized,
        policy,
        mode: None,
        resume: ctx.resume,
        signals: d.signals.as_ref().map(|s| s.audit_view()),
        cel_errors: d
            .signals
            .as_ref()
            .and_then(|s| s.get("policy.cel_errors"))
            .map(|s| &s.value),
        proposed_in: None,
        proposed_call: None,
    }
}

/// Gates `calls` concurrently and audits each; one [`Release`] per call, in
/// order. A call decided `ask` waits for a person (`approval`), all of them
/// at once; the batch is released when each is answered. In monitor mode
/// every audited call is released, its verdict only recorded.
pub async fn decide(state: &State, gates: &Gates, ctx: &Context, calls: &[Call]) -> Vec<Release> {
    batch(state, gates, ctx, calls)
        .await
        .answered(&ctx.left)
        .await
}

/// The keys under which the calls of a Responses answer are vouched for
/// (see [`vouch`]); none for other formats, which have no conversations.
pub fn vouch_keys(
    state: &State,
    ctx: &Context,
    protocol: crate::protocol::Protocol,
    calls: &[Call],
) -> Vec<[u8; 32]> {
    if !crate::protocol::conversation::kept_by(protocol) {
        return Vec::new();
    }
    calls
        .iter()
        .map(|c| state.vouch_key(&ctx.principal, c))
        .collect()
}

/// Records the calls that reach the agent (`keys` from [`vouch_keys`], in
/// call order) as ones its principal may read back from a conversation's
/// items.
pub fn vouch(state: &State, keys: &[[u8; 32]], releases: &[Release]) {
    for (key, r) in keys.iter().zip(releases) {
        if matches!(r, Release::Allow) {
            state.vouch(*key);
        }
    }
}

/// A batch whose calls are decided: what each may become, and the calls
/// that wait for a person. Holds neither the calls nor what the gates
/// found, so a batch that waits long keeps only its tickets.
pub struct Batch {
    releases: Vec<Release>,
    asked: Vec<(usize, Ticket)>,
}

impl Batch {
    /// Waits until every asked call is answered (at once when none was asked).
    pub async fn answered(mut self, left: &Left) -> Vec<Release> {
        let approved: Vec<(usize, bool)> = match &mut self.asked[..] {
            [] => Vec::new(),
            // The usual case: one wait, in this future rather than a join's.
            [(i, t)] => vec![(*i, t.wait(left).await)],
            many => {
                futures_util::future::join_all(
                    many.iter_mut()
                        .map(|(i, t)| async move { (*i, t.wait(left).await) }),
                )
                .await
            }
        };
        for (i, yes) in approved {
            if yes {
                self.releases[i] = Release::Allow;
            }
        }
        self.releases
    }
}

/// [`decide`] up to the wait: gates and audits each call, and asks a
/// person about those decided `ask`.
pub async fn batch(state: &State, gates: &Gates, ctx: &Context, calls: &[Call]) -> Batch {
    let decisions = gates.decide_all(calls, ctx).await;
    // What a follow-up by reference sends results back for.
    if let Ok(mut d) = ctx.decided.lock() {
        d.extend(calls.iter().map(|c| crate::context::Source {
            call_id: c.id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        }));
    }
    let version = &gates.policy().version;
    let monitor = state.monitor();
    let mut allowed = Vec::with_capacity(calls.len());
    let mut asked = Vec::new();
    for (i, (call, d)) in calls.iter().zip(&decisions).enumerate() {
        let mut rec = record(ctx, call, d, version);
        if monitor {
            rec.mode = Some("monitor");
        }
        // Joined only where MCP servers are fronted.
        let proposal = match state.config.mcp.is_empty() {
            true => None,
            false => story(state, ctx, call).await,
        };
        if let Some(p) = &proposal {
            rec.proposed_in = Some(&p.request_id);
            rec.proposed_call = Some(&p.call_id);
        }
        // Metrics count the decided verdict (in monitor mode too); a call whose
        // audit record could not be written fails closed and counts as rejected.
        let (allow, counted, audited) = match state.audit.record(&rec).await {
            Ok(()) => (monitor || d.verdict == Verdict::Allow, d.verdict, true),
            Err(e) => {
                tracing::error!(request_id = %ctx.request_id, error = %e, "audit failed; call fails closed");
                (false, d.verdict.max(Verdict::Reject), false)
            }
        };
        count(
            state,
            gates,
            ctx,
            call,
            counted,
            d.gate,
            d.outcome.rule.as_deref(),
        );
        for step in &d.steps {
            state
                .metrics
                .gate_took(step.gate, Duration::from_micros(step.micros));
        }
        tracing::debug!(request_id = %ctx.request_id, tool = %clip(&call.name), verdict = counted.as_str(), gate = d.gate, "gated");
        if let Some(t) = &ctx.trace {
            t.decision(span_of(ctx, call, d, counted.as_str(), monitor));
        }
        if audited && !monitor && d.verdict == Verdict::Ask {
            asked.push((i, state.approvals.ask(ctx, call, d.outcome.rule.as_deref())));
        }
        // An `ask` is withheld unless its answer says otherwise.
        allowed.push(if allow {
            Release::Allow
        } else if audited && rewrite(state, gates, d) == RewriteMode::Resume {
            Release::Resume {
                deny: d.verdict == Verdict::Deny,
            }
        } else {
            Release::Withhold
        });
    }
    Batch {
        releases: allowed,
        asked,
    }
}

/// Counts a decided call in the metrics and in its request's access line.
/// One call, one story (`proxy::story`): a model call is remembered; an
/// MCP call gets the proposal it carries out, if any.
async fn story(state: &State, ctx: &Context, call: &Call) -> Option<crate::proxy::story::Proposal> {
    use crate::proxy::story::{self, Proposal};
    let key = story::key(&ctx.principal, &call.arguments);
    if ctx.protocol == "mcp" {
        let (server, tool) = call.name.split_once('.')?;
        return state.proposal(key, server, tool).await;
    }
    let p = Proposal {
        request_id: ctx.request_id.clone(),
        call_id: clip(&call.id).to_string(),
        tool: clip(&call.name).to_string(),
    };
    state.propose(key, p);
    None
}

fn count(
    state: &State,
    gates: &Gates,
    ctx: &Context,
    call: &Call,
    verdict: Verdict,
    gate: &'static str,
    rule: Option<&str>,
) {
    state.metrics.decided(Decided {
        protocol: ctx.protocol,
        verdict: verdict.as_str(),
        gate,
        rule: rule.unwrap_or_default().to_string(),
        tool: gates.policy().tool_label(&call.name),
    });
    ctx.tally.count(verdict);
}

/// What replaces a withheld call: its deciding rule's `rewrite`, or the
/// configured mode.
fn rewrite(state: &State, gates: &Gates, d: &Decision) -> RewriteMode {
    d.outcome
        .rule
        .as_deref()
        .and_then(|r| gates.policy().rewrite_of(r))
        .unwrap_or(state.config.rewrite.mode)
}

/// Audits calls that were held and dropped without a verdict (stream failure).
pub async fn dropped(
    state: &State,
    gates: &Gates,
    ctx: &Context,
    calls: &[Call],
    reason: &'static str,
) {
    let version = &gates.policy().version;
    for call in calls {
        let d = Decision {
            at: std::time::SystemTime::now(),
            verdict: Verdict::Reject,
            gate: "stream",
            outcome: crate::gate::Outcome::reject(reason),
            steps: Vec::new(),
            signals: None,
        };
        if let Err(e) = state.audit.record(&record(ctx, call, &d, version)).await {
            tracing::error!(request_id = %ctx.request_id, error = %e, "audit failed");
        }
        if let Some(t) = &ctx.trace {
            t.decision(span_of(ctx, call, &d, "reject", false));
        }
        count(state, gates, ctx, call, Verdict::Reject, "stream", None);
    }
}

/// Audits calls the provider ran itself (server tools): they were gated on
/// the request, and the trail shows they ran. Not counted as gated calls.
pub async fn hosted(state: &State, gates: &Gates, ctx: &Context, calls: &[Call]) {
    let version = &gates.policy().version;
    for call in calls {
        let d = Decision {
            at: std::time::SystemTime::now(),
            verdict: Verdict::Allow,
            gate: "provider",
            outcome: crate::gate::Outcome::allow("run by the provider; gated on the request"),
            steps: Vec::new(),
            signals: None,
        };
        let mut rec = record(ctx, call, &d, version);
        rec.verdict = "provider_run";
        if let Err(e) = state.audit.record(&rec).await {
            tracing::error!(request_id = %ctx.request_id, error = %e, "audit failed");
        }
        if let Some(t) = &ctx.trace {
            t.decision(span_of(ctx, call, &d, "provider_run", false));
        }
    }
}

/// What the decision's trace span says (`verdict` as audited).
fn span_of<'a>(
    ctx: &'a Context,
    call: &'a Call,
    d: &'a Decision,
    verdict: &'a str,
    monitor: bool,
) -> crate::telemetry::DecisionSpan<'a> {
    crate::telemetry::DecisionSpan {
        tool: &call.name,
        call_id: &call.id,
        verdict,
        gate: d.gate,
        reason: &d.outcome.reason,
        rule: d.outcome.rule.as_deref(),
        phase: &ctx.phase,
        choice: call.choice,
        resume: ctx.resume,
        monitor,
        at: d.at,
        steps: d.steps.iter().map(|s| (s.gate, s.micros)).collect(),
        sensors: d.signals.as_ref().map_or(&[], |s| s.runs()),
    }
}
