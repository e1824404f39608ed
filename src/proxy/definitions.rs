//! The tool definitions each session declared first, by digest: a request
//! that declares a tool again with another definition (a description
//! changed under the agent, a rug pull) raises `tool.definition_changed`
//! for that tool's calls, and the audit trail records both digests. Kept
//! when a rule reads the signal or MCP servers are fronted (the pins of
//! both sides); otherwise nothing is hashed on the request path.

use crate::context::Context;
use crate::digest::{now_rfc3339, sha256, sha256_hex};
use crate::error::Error;
use crate::protocol::Protocol;
use crate::proxy::state::State;

/// Notes the request's definitions against the session's first ones.
pub async fn note(
    state: &State,
    policy: &crate::policy::PolicySet,
    ctx: &mut Context,
    protocol: Protocol,
    body: &serde_json::Value,
) -> Result<(), Error> {
    if state.config.mcp.is_empty() && !policy.reading.definitions {
        return Ok(());
    }
    let declared: Vec<(String, ([u8; 32], String))> = protocol
        .definitions(body)
        .into_iter()
        .map(|(name, def)| {
            let digest = sha256_hex(&serde_json::to_vec(def).unwrap_or_default());
            let key = sha256(format!("{}\n{}\n{name}", ctx.principal, ctx.session).as_bytes());
            (name, (key, digest))
        })
        .collect();
    let offered: Vec<([u8; 32], String)> = declared.iter().map(|(_, o)| o.clone()).collect();
    let firsts = state
        .first_definitions(&offered, policy.reading.definitions)
        .await?;
    for ((name, (_, digest)), first) in declared.into_iter().zip(firsts) {
        if *first != *digest && !ctx.redefined.contains(&name) {
            let record = serde_json::json!({
                "ts": now_rfc3339(),
                "request_id": ctx.request_id,
                "principal": ctx.principal,
                "protocol": ctx.protocol,
                "event": "tool_definition_changed",
                "tool": name.chars().take(256).collect::<String>(),
                "pinned_sha256": &*first,
                "seen_sha256": digest,
            });
            state.audit.record(&record).await?;
            ctx.redefined.push(name);
        }
    }
    Ok(())
}
