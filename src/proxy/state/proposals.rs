//! The model calls recently proposed, for the MCP call that carries one
//! out (`proxy::story`): kept by this replica and, with `[state] backend =
//! "redis"`, shared with the others (sealed as the response records are),
//! so the join holds whichever replica the agent's MCP call lands on. The
//! join only names a decision in the trail: a store that cannot be read
//! leaves the MCP call's record without it, and never fails the call.

use std::time::Duration;

use super::State;
use crate::proxy::story::{find, Proposal, KEPT};

const PROPOSED: &str = "proposed";
/// How long a proposal waits for its MCP call.
pub const PROPOSAL_TTL: Duration = Duration::from_secs(600);

impl State {
    /// Remembers a model call under its story key.
    pub fn propose(&self, key: [u8; 32], p: Proposal) {
        let mut all: Vec<Proposal> = (self.proposed.get(&key))
            .map(|k| k.to_vec())
            .unwrap_or_default();
        if all.len() >= KEPT {
            all.remove(0);
        }
        let shared = self.parts.shared.clone().and_then(|s| {
            let id = crate::digest::hex(&key);
            let sealed = self.seal_record(PROPOSED, &id, &[&p.request_id, &p.call_id, &p.tool])?;
            Some((s, id, sealed))
        });
        all.push(p);
        self.proposed.insert(key, all.into());
        let Some((s, id, sealed)) = shared else {
            return;
        };
        let metrics = self.metrics.clone();
        tokio::spawn(async move {
            let written = s.append_last(PROPOSED, &id, &sealed, KEPT, PROPOSAL_TTL);
            if written.await.is_err() {
                metrics.state_failed("remember", "local");
            }
        });
    }

    /// The newest proposal under a story key that names `server`'s
    /// `tool`: this replica's, else the shared store's (none when it cannot
    /// be read).
    pub async fn proposal(&self, key: [u8; 32], server: &str, tool: &str) -> Option<Proposal> {
        if let Some(p) = (self.proposed.get(&key)).and_then(|k| find(&k, server, tool).cloned()) {
            return Some(p);
        }
        let s = self.parts.shared.as_ref()?;
        let id = crate::digest::hex(&key);
        let items = match s.items(PROPOSED, &id).await {
            Ok(items) => items,
            Err(e) => {
                self.metrics.state_failed("recall", "local");
                tracing::warn!(error = %e, "proposals shared by replicas could not be read: the MCP call's record names none");
                return None;
            }
        };
        let shared: Vec<Proposal> = items
            .iter()
            .filter_map(|sealed| self.open_record(sealed, PROPOSED, &id, 3))
            .map(|mut f| Proposal {
                tool: f.pop().unwrap_or_default(),
                call_id: f.pop().unwrap_or_default(),
                request_id: f.pop().unwrap_or_default(),
            })
            .collect();
        find(&shared, server, tool).cloned()
    }
}
