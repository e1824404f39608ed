//! `toolgate explain`: the decision for one call, with every signal and the
//! deciding rule, without any upstream; with `--trail`, the decisions an
//! audit trail recorded (`recorded`).

pub mod recorded;

use std::sync::Arc;

use serde_json::{json, Value};

use crate::call::Call;
use crate::config::Config;
use crate::context::{Context, Declared};
use crate::error::Error;
use crate::gate::{Gates, Parts};
use crate::policy::PolicySet;

/// What `explain` is asked about.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub tool: String,
    pub args: String,
    pub phase: Option<String>,
    pub request: Option<String>,
    pub mission: Option<String>,
    pub principal: Option<String>,
    /// The wire format the call came in.
    pub protocol: crate::protocol::Protocol,
    /// A request body in that format whose conversation the call answers:
    /// its texts feed provenance and taint, its tools are the declared ones.
    pub conversation: Option<std::path::PathBuf>,
}

/// Decides `q` under `config`'s policy; returns `{verdict, rule, gate, reason, signals}`.
pub async fn explain(config: &Config, q: &Query) -> Result<Value, Error> {
    if !q.args.trim().is_empty() {
        serde_json::from_str::<Value>(&q.args)
            .map_err(|e| Error::BadRequest(format!("--args is not JSON: {e}")))?;
    }
    let policy = Arc::new(PolicySet::load(config.policy.dir.as_deref())?);
    let parts = Parts {
        namespaces: crate::gate::signals::Namespaces::of_config(&config.policy),
        threshold: 0.8,
        ..Parts::default()
    };
    let mut gates = Gates::new(policy.clone(), &parts);
    gates.policy_gate.explain = true;
    let principal = q.principal.clone().unwrap_or_else(|| "anonymous".into());
    let mut ctx = Context {
        request_id: "explain".into(),
        protocol: q.protocol.label(),
        phase: q
            .phase
            .clone()
            .or_else(|| config.policy.default_phase.clone())
            .unwrap_or_else(|| "unknown".into()),
        session: "explain".into(),
        agent: principal.clone(),
        principal,
        mission: q.mission.clone(),
        original_request: q.request.clone(),
        user_text: q.request.clone().unwrap_or_default(),
        ..Context::default()
    };
    match &q.conversation {
        Some(path) => conversation(&mut ctx, q.protocol, path, &q.tool)?,
        None => {
            ctx.declared
                .insert(q.tool.clone(), Declared { parameters: None });
        }
    }
    let call = Call {
        id: "explain".into(),
        name: q.tool.clone(),
        arguments: q.args.clone(),
        kind: crate::call::Kind::Function,
        ..Call::default()
    };
    let d = gates.decide(&call, &ctx).await;
    let rule = d.outcome.rule.as_deref().map(|name| {
        let origin = policy
            .rules
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.origin.clone());
        json!({"name": name, "origin": origin})
    });
    let cel_errors = d
        .signals
        .as_ref()
        .and_then(|s| s.get("policy.cel_errors"))
        .map(|s| s.value.clone());
    Ok(json!({
        "cel_errors": cel_errors,
        "protocol": ctx.protocol,
        "verdict": d.verdict.as_str(),
        "rule": rule,
        "gate": d.gate,
        "reason": d.outcome.reason,
        "policy": policy.version,
        "signals": d.signals.map(|s| s.to_json()).unwrap_or(Value::Null),
    }))
}

/// Reads `--conversation`: the request's texts (all of them) and declared
/// tools go into `ctx`, as the proxy would fill them.
fn conversation(
    ctx: &mut Context,
    protocol: crate::protocol::Protocol,
    path: &std::path::Path,
    tool: &str,
) -> Result<(), Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    let parsed = protocol
        .parse(&bytes)
        .map_err(|e| Error::BadRequest(format!("--conversation {}: {e}", path.display())))?;
    let t = protocol.texts(&parsed.body, true);
    if ctx.original_request.is_none() {
        ctx.original_request = t.last_user.clone();
    }
    if ctx.mission.is_none() && !t.system.is_empty() {
        ctx.mission = Some(t.system.clone());
    }
    crate::context::take_texts(ctx, t);
    ctx.declared = parsed.declared;
    protocol.write_request(&parsed.body, &mut ctx.declared, |marks| {
        let mut out = Vec::new();
        let places = crate::json::to_writer_marking(&mut out, &parsed.body, marks)
            .map_err(|e| Error::BadRequest(format!("--conversation {}: {e}", path.display())))?;
        Ok((out, places))
    })?;
    if ctx.declared.is_empty() {
        ctx.declared
            .insert(tool.to_string(), Declared { parameters: None });
    }
    Ok(())
}

/// The human-readable form of [`explain`]'s answer.
pub fn render(v: &Value) -> String {
    let mut out = format!("verdict: {}\n", v["verdict"].as_str().unwrap_or("?"));
    match v["rule"].as_object() {
        Some(r) => out.push_str(&format!(
            "rule:    {} ({})\n",
            r["name"].as_str().unwrap_or("?"),
            r["origin"].as_str().unwrap_or("?")
        )),
        None => out.push_str("rule:    none matched (default verdict)\n"),
    }
    out.push_str(&format!(
        "gate:    {} (reason: {})\n",
        v["gate"].as_str().unwrap_or("?"),
        v["reason"].as_str().unwrap_or("?")
    ));
    if let Some(rules) = v["cel_errors"].as_array() {
        let names: Vec<&str> = rules.iter().filter_map(Value::as_str).collect();
        out.push_str(&format!(
            "errors:  the condition of {} failed at run time (counted as matched)\n",
            names.join(", ")
        ));
    }
    out.push_str(&format!(
        "policy:  {}\nroute:   {}\nsignals:\n",
        v["policy"].as_str().unwrap_or("?"),
        v["protocol"].as_str().unwrap_or("?")
    ));
    if let Some(m) = v["signals"].as_object() {
        for (k, s) in m {
            out.push_str(&format!(
                "  {k} = {} ({})\n",
                s["value"],
                s["method"].as_str().unwrap_or("?")
            ));
        }
    }
    out
}
