//! Records of stored responses and threads shared by replicas (`[state]
//! backend = "redis"`): what one replica remembers of a response (the calls
//! withheld from it, the response a follow-up continued it as) or of a
//! Messages thread (what the gates know of it) is written to Redis too, and
//! a follow-up that lands on another replica reads it from there before it
//! is rewritten. Responses' records are ids only; a thread's facts hold its
//! system text and are sealed under a key derived from the fence secret.

use std::sync::Arc;

use serde_json::Value;

use super::State;
use crate::config::OnError;
use crate::error::Error;
use crate::protocol::{Protocol, Withheld};

const WITHHELD: &str = "withheld";
const RENAMED: &str = "renamed";
const THREAD: &str = "thread";

impl State {
    /// The key threads' facts are sealed under: every replica with the same
    /// fence secret derives the same.
    fn thread_key(&self) -> [u8; 32] {
        crate::fence::marker::hmac_sha256(&self.fence_secret, &[b"shared thread facts"])
    }

    /// Makes `write` with the shared store in the background (a follow-up
    /// comes a model turn later), counting a failure: the record stays this
    /// replica's alone.
    fn write_behind<F, W>(&self, write: W)
    where
        W: FnOnce(Arc<crate::state::Shared>, std::time::Duration) -> F,
        F: std::future::Future<Output = Result<(), crate::state::Unavailable>> + Send + 'static,
    {
        let Some(s) = self.parts.shared.clone() else {
            return;
        };
        let (written, metrics) = (
            write(s, self.config.responses.remember_ttl),
            self.metrics.clone(),
        );
        tokio::spawn(async move {
            if written.await.is_err() {
                metrics.state_failed("remember", "local");
            }
        });
    }

    /// Writes a thread's facts under the id of an answer in it.
    pub(super) fn share_thread(&self, answer: &str, facts: &crate::proxy::threads::Facts) {
        if self.parts.shared.is_none() {
            return;
        }
        let Some(sealed) =
            crate::state::seal::seal(&self.thread_key(), facts.to_json().to_string().as_bytes())
        else {
            return;
        };
        let answer = answer.to_string();
        self.write_behind(|s, ttl| async move { s.put(THREAD, &answer, &sealed, ttl).await });
    }

    /// The facts of a thread another replica holds, continued from answer
    /// `id` by `principal`: `None` when no replica knows it (or it is
    /// another client's), which the agent's SDK recovers from by replaying.
    pub async fn recall_thread(
        &self,
        id: &str,
        principal: &str,
    ) -> Result<Option<crate::proxy::threads::Shared>, Error> {
        let Some(s) = &self.parts.shared else {
            return Ok(None);
        };
        let sealed = match s.get(THREAD, id).await {
            Ok(v) => v,
            Err(e) => return self.unreadable(s, &e).map(|()| None),
        };
        let facts = sealed
            .and_then(|v| crate::state::seal::open(&self.thread_key(), &v))
            .and_then(|plain| serde_json::from_slice::<Value>(&plain).ok())
            .and_then(|v| crate::proxy::threads::Facts::from_json(&v))
            .map(Arc::new);
        let Some(facts) = facts else {
            return Ok(None);
        };
        self.threads.insert(id.to_string(), facts.clone());
        Ok(facts.belongs_to(principal).then_some(facts))
    }

    /// Shared state that could not be read: an error (`fail_closed`) or
    /// nothing (`local`), counted and logged.
    fn unreadable(
        &self,
        s: &crate::state::Shared,
        e: &crate::state::Unavailable,
    ) -> Result<(), Error> {
        let then = s.on_error.as_str();
        self.metrics.state_failed("recall", then);
        tracing::warn!(error = %e, then, "records shared by replicas could not be read");
        match s.on_error {
            OnError::FailClosed => Err(Error::StateUnavailable),
            OnError::Local => Ok(()),
        }
    }

    /// Writes calls withheld from a stored response to the shared records
    /// (in the background: a follow-up comes a model turn later).
    pub(super) fn share_withheld(&self, w: &Withheld) {
        if self.parts.shared.is_none() {
            return;
        }
        let items: Vec<String> = w
            .calls
            .iter()
            .map(|(id, kind)| Value::from(vec![id.as_str(), kind.as_str()]).to_string())
            .collect();
        let id = w.response_id.clone();
        self.write_behind(|s, ttl| async move { s.append(WITHHELD, &id, &items, ttl).await });
    }

    /// Writes that stored response `first` was continued as `then`.
    pub(super) fn share_renamed(&self, first: &str, then: &str) {
        let (first, then) = (first.to_string(), then.to_string());
        self.write_behind(|s, ttl| async move { s.put(RENAMED, &first, &then, ttl).await });
    }

    /// Before a request that continues a stored response (or a thread) is
    /// rewritten: what another replica remembered of that response, read
    /// into this one's records when this one has none. Unreachable shared
    /// state fails the request (`fail_closed`: a withheld call could not be
    /// answered) or is passed over with a warning (`local`).
    pub async fn recall(&self, protocol: Protocol, body: &Value) -> Result<(), Error> {
        let Some(s) = &self.parts.shared else {
            return Ok(());
        };
        let Some(prev) = protocol.stored_from(body) else {
            return Ok(());
        };
        let prev = prev.as_str();
        // This replica served it: its own records are whole.
        if self.renamed.contains_key(prev) || self.withheld.contains_key(prev) {
            return Ok(());
        }
        let read = async {
            let mut id: Arc<str> = Arc::from(prev);
            if let Some(then) = s.get(RENAMED, prev).await? {
                let then: Arc<str> = Arc::from(then);
                self.renamed.insert(prev.to_string(), then.clone());
                id = then;
            }
            if self.withheld.get(id.as_ref()).is_none() {
                let calls: Vec<(String, String)> = s
                    .items(WITHHELD, &id)
                    .await?
                    .iter()
                    .filter_map(|item| serde_json::from_str::<(String, String)>(item).ok())
                    .collect();
                if !calls.is_empty() {
                    self.withheld.insert(id.to_string(), Arc::new(calls));
                }
            }
            Ok::<(), crate::state::Unavailable>(())
        };
        match read.await {
            Ok(()) => Ok(()),
            Err(e) => self.unreadable(s, &e),
        }
    }
}
