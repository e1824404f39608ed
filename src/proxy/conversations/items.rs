//! A conversation's items both ways: what the agent writes into one is read
//! (its texts, for the signals of later turns), its tool outputs fenced and
//! redacted, its calls vouched for as the agent's own; what the provider
//! returns of one has every call the agent did not get from toolgate
//! replaced by the neutral message, and toolgate's own fences taken off the
//! tool outputs the agent wrote (it sent them unfenced, and fences them
//! again when it sends them back).

use serde_json::{json, Value};

use crate::context::Texts;
use crate::error::Error;
use crate::fence;
use crate::gate::Gates;
use crate::protocol::conversation::{ReadBack, Written};
use crate::proxy::state::State;

/// What a write to a conversation said: its items' texts (read before
/// they are fenced), and how many items it had.
pub struct Wrote {
    pub texts: Texts,
    pub items: usize,
}

/// Reads, vouches for and fences the `items` of a request body (a new
/// conversation's, or items added to one) in place.
pub async fn write(
    state: &State,
    gates: &Gates,
    principal: &str,
    request_id: &str,
    body: &mut Value,
) -> Result<Wrote, Error> {
    let Some(mut items) = Written::take(body)? else {
        return Ok(Wrote {
            texts: Texts::default(),
            items: 0,
        });
    };
    let texts = items.texts();
    for call in items.calls(state.config.limits.max_tool_args_bytes)? {
        state.vouch(state.vouch_key(principal, &call));
    }
    if state.config.fence.enabled {
        let settings = super::super::gated::fence_settings(
            state,
            gates,
            fence::kept::Digests::new(Vec::new()),
        );
        let report = fence::apply(items.tool_results(), &settings);
        let who = (request_id, principal, "conversations");
        super::super::gated::fenced(state, who, &report).await?;
    }
    let n = items.len();
    items.put(body);
    Ok(Wrote { texts, items: n })
}

/// The provider's answer `raw` about a conversation as the agent may read
/// it: `None` when it goes on unchanged. A list's `data`, or a single item,
/// is read; a conversation object or a deletion passes.
pub async fn read_back(
    state: &State,
    principal: &str,
    request_id: &str,
    raw: &[u8],
) -> Result<Option<Vec<u8>>, Error> {
    let mut rb = ReadBack::parse(raw)?;
    let mut changed = false;
    for found in rb.calls(state.config.limits.max_tool_args_bytes)? {
        let call = &found.call;
        if state.vouched(principal, call).await? {
            continue;
        }
        let record = json!({
            "ts": crate::digest::now_rfc3339(),
            "request_id": request_id,
            "principal": principal,
            "protocol": "conversations",
            "event": "read_back",
            "kind": call.kind.as_str(),
            "tool": call.name,
            "call_id": call.id,
            "verdict": "withheld",
            "reason": "a call in a conversation that toolgate did not release to this client",
            "args_sha256": crate::digest::sha256_hex(call.arguments.as_bytes()),
        });
        state.audit.record(&record).await?;
        // Counted as a rejection by the read-back: a call in a conversation
        // that toolgate never released to this client is worth an alert.
        state.metrics.decided(crate::metrics::labels::Decided {
            protocol: "conversations",
            verdict: crate::call::Verdict::Reject.as_str(),
            gate: "read_back",
            rule: String::new(),
            tool: state.gates().policy().tool_label(&call.name),
        });
        rb.withhold(&found, &state.id_key, &state.config.rewrite.neutral_message);
        changed = true;
    }
    let secret = &state.fence_secret;
    changed |= rb.unwrap_outputs(|call_id, text| fence::marker::unwrap(secret, call_id, text));
    Ok(changed.then(|| rb.into_bytes()))
}
