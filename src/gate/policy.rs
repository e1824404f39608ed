//! The policy gate: deterministic signals → rules → (required sensors → assisted
//! signals → rules again). The final verdict is the most severe of both passes:
//! assisted signals can only raise risk.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::json;

use super::kept::Kept;
use super::plan::{Plan, Plans};
use super::schema::SchemaCache;
use super::sensor::{Sensor, SensorRun};
use super::signals::{self, Namespaces, Needs, Signals};
use super::{BoxFuture, Gate, Outcome};

/// The signal a rule reads to decide a call whose tool changed under its pin.
const CHANGED: &str = "tool.definition_changed";
use crate::call::Call;
use crate::context::Context;
use crate::metrics::Metrics;
use crate::policy::expr::Bindings;
use crate::policy::{FailMode, PolicySet, Rule, Verdict};

mod ahead;
mod hidden;
mod rate;

pub struct PolicyGate {
    pub policy: Arc<PolicySet>,
    /// Compute every signal, read or not (for `explain`).
    pub explain: bool,
    namespaces: Namespaces,
    schemas: Arc<SchemaCache>,
    sensors: Vec<Arc<dyn Sensor>>,
    threshold: f64,
    metrics: Arc<Metrics>,
    /// Rate-limit buckets shared by replicas, when configured.
    shared: Option<Arc<crate::state::Shared>>,
    hidden_memo: Kept<u64, bool>,
    /// Which of the caller's static variables (phase, principal, session,
    /// agent) a `deny` rule reads: only those key `hidden_memo`.
    deny_reads: [bool; 4],
    /// First-pass results by the tool and the values of what its rules read
    /// (see [`PolicyGate::first_pass`]).
    pass_memo: Kept<Vec<u8>, Memo>,
    plans: Plans,
}

/// A remembered first pass: the verdict's rule and the rules that matched,
/// as positions in the tool's applicable rules.
#[derive(Clone)]
struct Memo {
    verdict: Verdict,
    rule: Option<usize>,
    matched: Vec<usize>,
    errored: Vec<usize>,
}

/// How many first passes are remembered (the map is cleared when full), and
/// the longest key kept: a key that long holds text from the arguments
/// (schema errors, detector findings) and is not worth keeping.
const PASS_MEMO_ENTRIES: usize = 4096;
const PASS_MEMO_KEY_BYTES: usize = 1024;

/// The rules that apply to a call and the variables they read (`None` = all).
#[derive(Clone, Copy)]
struct Scope<'a> {
    rules: &'a [&'a Rule],
    only: Option<&'a [&'a str]>,
}

/// The result of one pass over the rules.
struct Pass<'a> {
    verdict: Verdict,
    rule: Option<&'a Rule>,
    matched: Vec<&'a Rule>,
    /// Rules whose condition failed at run time (counted as matched).
    errored: Vec<&'a Rule>,
}

/// Names the rules whose condition failed at run time, in the signal
/// `policy.cel_errors` (audited as `cel_errors`, shown by `explain`).
fn note_errors(sig: &mut Signals, errored: &[&Rule]) {
    if errored.is_empty() {
        return;
    }
    let mut names: Vec<&str> = match sig.get("policy.cel_errors") {
        Some(s) => s
            .value
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    names.extend(errored.iter().map(|r| r.name.as_str()));
    names.sort_unstable();
    names.dedup();
    let value = json!(names);
    sig.set("policy.cel_errors", value);
}

/// One pass over `rules`; a CEL error at run time counts its rule as
/// matched, and is logged and counted unless `metrics` is `None` (a pass
/// made ahead of the decision, which counts it itself).
fn evaluate<'a>(
    rules: &[&'a Rule],
    vars: &Bindings,
    default: Verdict,
    tool: &str,
    metrics: Option<&Metrics>,
) -> Pass<'a> {
    let mut matched = Vec::new();
    let mut errored = Vec::new();
    for r in rules {
        let hit = match &r.when {
            None => true,
            Some(c) => c.eval(vars).unwrap_or_else(|e| {
                if let Some(metrics) = metrics {
                    tracing::warn!(rule = %r.name, origin = %r.origin, tool = %tool, error = %e, "CEL error at run time; the rule counts as matched");
                    metrics.cel_failed(&r.name);
                }
                errored.push(*r);
                true
            }),
        };
        if hit {
            matched.push(*r);
        }
    }
    let best = matched.iter().copied().fold(None::<&Rule>, |b, r| match b {
        Some(b) if b.verdict >= r.verdict => Some(b),
        _ => Some(r),
    });
    Pass {
        verdict: best.map(|r| r.verdict).unwrap_or(default),
        rule: best,
        matched,
        errored,
    }
}

impl PolicyGate {
    /// Whether the sensor `name` is configured.
    pub fn senses(&self, name: &str) -> bool {
        self.sensors.iter().any(|s| s.name() == name)
    }

    pub fn new(
        policy: Arc<PolicySet>,
        namespaces: Namespaces,
        schemas: Arc<SchemaCache>,
        sensors: Vec<Arc<dyn Sensor>>,
        threshold: f64,
        metrics: Arc<Metrics>,
    ) -> PolicyGate {
        PolicyGate {
            deny_reads: hidden::deny_reads(&policy),
            policy,
            explain: false,
            namespaces,
            schemas,
            sensors,
            threshold,
            metrics,
            shared: None,
            hidden_memo: Kept::new(hidden::HIDDEN_MEMO_ENTRIES),
            pass_memo: Kept::new(PASS_MEMO_ENTRIES),
            plans: Plans::default(),
        }
    }

    /// The same gate counting `[[limit]]`s in shared buckets.
    pub fn sharing(mut self, shared: Option<Arc<crate::state::Shared>>) -> PolicyGate {
        self.shared = shared;
        self
    }

    /// The rules that apply to `plan`'s tool, in order.
    fn rules_of(&self, plan: &Plan) -> Vec<&Rule> {
        plan.rules
            .iter()
            .filter_map(|&i| self.policy.rules.get(i))
            .collect()
    }

    /// The deterministic signals of a call: what `plan`'s rules read, or
    /// everything for `explain`.
    fn signals_of(&self, call: &Call, ctx: &Context, plan: &Plan) -> Signals {
        let needs = if self.explain { Needs::ALL } else { plan.needs };
        signals::deterministic(
            call,
            ctx,
            &self.policy,
            &self.namespaces,
            &self.schemas,
            needs,
        )
    }

    async fn evaluate(&self, call: &Call, ctx: &Context) -> Outcome {
        let plan = self.plans.get(&self.policy, &call.name);
        let rules = self.rules_of(&plan);
        // The top-level variables the applicable rules read (all for `explain`).
        let used: Vec<&str> = plan.used.iter().map(AsRef::as_ref).collect();
        let only = (!self.explain).then_some(used.as_slice());
        let mut sig = self.signals_of(call, ctx, &plan);
        let rated = self.rate(call, ctx).await;
        sig.set("rate.exceeded", json!(rated.over.is_some()));
        if let Some(e) = &rated.error {
            sig.set("rate.error", json!(e));
        }
        let first = self.first_pass(&rules, &sig, only, &call.name);
        note_errors(&mut sig, &first.errored);
        let mut out = Outcome {
            verdict: first.verdict,
            reason: Cow::Borrowed(if first.rule.is_some() {
                "rule"
            } else {
                "default"
            }),
            rule: first.rule.map(|r| r.name.clone()),
            signals: None,
        };
        // A tool changed under its pin is released (or asked about) only by
        // a rule of the verdict reached that decided with the change in view.
        let vouched = (first.matched.iter()).any(|r| r.verdict == out.verdict && r.reads(CHANGED));
        if ctx.pin_changed && !vouched && out.verdict < Verdict::Reject {
            out = Outcome {
                verdict: Verdict::Reject,
                reason: Cow::Borrowed("tool_definition_changed"),
                rule: None,
                signals: None,
            };
        }
        let limited = [
            (rated.over, "rate_limited"),
            (rated.unavailable, "state_unavailable"),
        ];
        for (limit, reason) in limited {
            if let (Some(limit), true) = (limit, out.verdict < Verdict::Reject) {
                out = Outcome {
                    verdict: Verdict::Reject,
                    reason: Cow::Borrowed(reason),
                    rule: Some(limit),
                    signals: None,
                };
            }
        }
        // Sensors may still raise an `ask` (a person is not asked about a
        // call they would reject).
        if out.verdict <= Verdict::Ask {
            let scope = Scope {
                rules: &rules,
                only,
            };
            self.assisted(call, ctx, scope, &first.matched, &mut sig, &mut out)
                .await;
        }
        out.signals = Some(sig);
        out
    }

    /// The first pass over the rules. Rules are pure functions of the
    /// variables they read, so a pass is remembered by the tool's name and the
    /// values of those variables, unless they include the arguments
    /// themselves (or `explain` wants every signal computed anyway). A CEL
    /// error at run time is then logged once per distinct input, not per call.
    fn first_pass<'a>(
        &self,
        rules: &[&'a Rule],
        sig: &Signals,
        only: Option<&[&str]>,
        tool: &str,
    ) -> Pass<'a> {
        let run = || {
            evaluate(
                rules,
                &Bindings::new(sig.vars_only(only)),
                self.policy.default_verdict,
                tool,
                Some(&self.metrics),
            )
        };
        let key = only
            .filter(|o| !o.contains(&"args"))
            .and_then(|o| sig.memo_key(tool, o, PASS_MEMO_KEY_BYTES));
        let Some(key) = key else {
            return run();
        };
        if let Some(m) = self.pass_memo.get(&key) {
            return Pass {
                verdict: m.verdict,
                rule: m.rule.and_then(|i| rules.get(i).copied()),
                matched: m
                    .matched
                    .iter()
                    .filter_map(|&i| rules.get(i).copied())
                    .collect(),
                errored: m
                    .errored
                    .iter()
                    .filter_map(|&i| rules.get(i).copied())
                    .collect(),
            };
        }
        let pass = run();
        let at = |r: &Rule| rules.iter().position(|x| std::ptr::eq(*x, r));
        let memo = Memo {
            verdict: pass.verdict,
            rule: pass.rule.and_then(at),
            matched: pass.matched.iter().filter_map(|r| at(r)).collect(),
            errored: pass.errored.iter().filter_map(|r| at(r)).collect(),
        };
        self.pass_memo.insert(key, memo);
        pass
    }

    /// Runs the sensors the matched rules require, then the rules again.
    async fn assisted(
        &self,
        call: &Call,
        ctx: &Context,
        scope: Scope<'_>,
        matched: &[&Rule],
        sig: &mut Signals,
        out: &mut Outcome,
    ) {
        let required = ahead::required(matched);
        if required.is_empty() {
            return;
        }
        let mut names: Vec<&str> = required.iter().map(|r| r.0).collect();
        names.dedup();
        let mut failed: Vec<&str> = Vec::new();
        for name in names {
            let Some(sensor) = self.sensors.iter().find(|s| s.name() == name) else {
                tracing::debug!(sensor = name, "sensor not configured; skipped");
                continue;
            };
            let (at, started) = (std::time::SystemTime::now(), std::time::Instant::now());
            let sensed = sensor.sense(call, ctx, sig).await;
            let took = started.elapsed();
            self.metrics.sensor_took(sensor.name(), took);
            // A sensor that had nothing to ask (no external text) made no call.
            let (asked, cached) = match &sensed {
                Ok(found) => (
                    !found.is_empty(),
                    found
                        .iter()
                        .any(|a| a.name.ends_with(".cache_hit") && a.value == json!(true)),
                ),
                Err(_) => (true, false),
            };
            if asked {
                sig.ran(SensorRun {
                    sensor: sensor.name(),
                    model: sensor.model().to_string(),
                    at,
                    micros: u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
                    cached,
                    failure: sensed.as_ref().err().map(|e| e.kind),
                });
            }
            match sensed {
                Ok(found) => {
                    for a in found {
                        let offer = sig.offer(&a.name, a.value, a.confidence, self.threshold);
                        tracing::debug!(sensor = name, signal = %a.name, ?offer, "assisted signal");
                    }
                }
                Err(e) => {
                    tracing::warn!(sensor = name, tool = %call.name, error = %e, "sensor failed");
                    self.metrics.sensor_failed(sensor.name(), e.kind);
                    // A fact about this decision, audited (the error text names no argument).
                    sig.set(format!("{name}.error"), json!(e.message));
                    failed.push(name);
                }
            }
        }
        for (name, fail, rule) in &required {
            if failed.contains(name) && *fail == FailMode::Closed && out.verdict < Verdict::Reject {
                *out = Outcome {
                    verdict: Verdict::Reject,
                    reason: Cow::Borrowed("sensor_failed"),
                    rule: Some(rule.to_string()),
                    signals: None,
                };
            }
        }
        let second = evaluate(
            scope.rules,
            &Bindings::new(sig.vars_only(scope.only)),
            self.policy.default_verdict,
            &call.name,
            Some(&self.metrics),
        );
        note_errors(sig, &second.errored);
        if second.verdict > out.verdict {
            *out = Outcome {
                verdict: second.verdict,
                reason: Cow::Borrowed("assisted"),
                rule: second.rule.map(|r| r.name.clone()),
                signals: None,
            };
        }
    }
}

impl Gate for PolicyGate {
    fn name(&self) -> &'static str {
        "policy"
    }

    fn check<'a>(&'a self, call: &'a Call, ctx: &'a Context) -> BoxFuture<'a, Outcome> {
        Box::pin(self.evaluate(call, ctx))
    }
}
