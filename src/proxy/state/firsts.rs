//! The first definition of each tool a session declared
//! (`proxy::definitions`): kept by this replica and, with `[state] backend
//! = "redis"`, shared (sealed as the response records are; the first
//! replica to write it wins), so a session that redefines a tool on
//! another replica than the one that saw it first is caught all the same.

use std::sync::Arc;
use std::time::Duration;

use super::State;
use crate::error::Error;

const FIRST: &str = "definition";
/// How long a session's first definitions are kept without use.
pub const FIRST_TTL: Duration = Duration::from_secs(24 * 3600);

impl State {
    /// The first digest of each offered `(key, digest)`, the offered one
    /// where none is known yet. A shared store that cannot be read fails
    /// the request when `strict` (a rule reads the signal) and `[state]
    /// on_error` says so; otherwise this replica's record serves.
    pub async fn first_definitions(
        &self,
        offered: &[([u8; 32], String)],
        strict: bool,
    ) -> Result<Vec<Arc<str>>, Error> {
        let mut firsts: Vec<Option<Arc<str>>> = offered
            .iter()
            .map(|(k, _)| self.definitions.get(k))
            .collect();
        let unknown: Vec<usize> = (0..offered.len())
            .filter(|&i| firsts[i].is_none())
            .collect();
        if let (Some(s), false) = (&self.parts.shared, unknown.is_empty()) {
            match self.shared_firsts(s, offered, &unknown).await {
                Ok(found) => {
                    for (i, f) in unknown.iter().zip(found) {
                        firsts[*i] = Some(f.into());
                    }
                }
                Err(e) if strict => self.unreadable(s, &e)?,
                Err(e) => {
                    self.metrics.state_failed("recall", "local");
                    tracing::warn!(error = %e, "first tool definitions shared by replicas could not be read: this replica's serve");
                }
            }
        }
        let out = offered
            .iter()
            .zip(firsts)
            .map(|((key, digest), first)| match first {
                Some(f) => {
                    self.definitions.insert(*key, f.clone());
                    f
                }
                None => self.definitions.get_with(*key, || digest.as_str().into()),
            })
            .collect();
        Ok(out)
    }

    /// The shared first digests of `offered[unknown]`, writing the offered
    /// one where there is none.
    async fn shared_firsts(
        &self,
        s: &crate::state::Shared,
        offered: &[([u8; 32], String)],
        unknown: &[usize],
    ) -> Result<Vec<String>, crate::state::Unavailable> {
        let ids: Vec<String> = unknown
            .iter()
            .map(|&i| crate::digest::hex(&offered[i].0))
            .collect();
        let found = s.get_many(FIRST, &ids).await?;
        let mut out = Vec::with_capacity(ids.len());
        for ((id, &i), sealed) in ids.iter().zip(unknown).zip(found) {
            let opened = |sealed: &str| {
                self.open_record(sealed, FIRST, id, 1)
                    .and_then(|mut f| f.pop())
            };
            if let Some(first) = sealed.as_deref().and_then(opened) {
                out.push(first);
                continue;
            }
            let digest = &offered[i].1;
            let Some(mine) = self.seal_record(FIRST, id, &[digest]) else {
                out.push(digest.clone());
                continue;
            };
            // Another replica may write it first: then its digest is the first.
            let first = match s.put_new(FIRST, id, &mine, FIRST_TTL).await? {
                true => None,
                false => s.get(FIRST, id).await?.as_deref().and_then(opened),
            };
            out.push(first.unwrap_or_else(|| digest.clone()));
        }
        Ok(out)
    }
}
