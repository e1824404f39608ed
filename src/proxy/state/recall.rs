//! Records of stored responses and threads shared by replicas (`[state]
//! backend = "redis"`): what one replica remembers of a response (the calls
//! withheld from it, the response a follow-up continued it as) or of a
//! Messages thread (what the gates know of it) is written to Redis too, and
//! a follow-up that lands on another replica reads it from there before it
//! is rewritten. Every record is sealed under a key derived from the fence
//! secret: a thread's facts hold its system text, and a response's records
//! decide what a follow-up continues from and which calls toolgate answers
//! in it, so what else can write to Redis can neither read the one nor
//! forge the others. Every record names its kind and id (the response's,
//! the thread's answer) inside the seal: a sealed record copied under
//! another key does not open.

use std::sync::Arc;

use serde_json::Value;

use super::State;
use crate::config::OnError;
use crate::error::Error;
use crate::protocol::{Protocol, Withheld};

const WITHHELD: &str = "withheld";
const RENAMED: &str = "renamed";
const THREAD: &str = "thread";
/// A stored response's turn of its conversation.
const HISTORY: &str = "history";
/// The most turns a conversation by reference is read back through.
const MAX_TURNS: usize = 512;
/// A thread record's field for an answer id given to two threads.
const REUSED: &str = "reused";

impl State {
    /// The key threads' facts are sealed under: every replica with the same
    /// fence secret derives the same.
    fn thread_key(&self) -> [u8; 32] {
        crate::fence::marker::hmac_sha256(&self.fence_secret, &[b"shared thread facts"])
    }

    /// The key responses' records are sealed under.
    fn records_key(&self) -> [u8; 32] {
        crate::fence::marker::hmac_sha256(&self.fence_secret, &[b"shared response records"])
    }

    /// A response's record of `kind` about `id`, sealed: `None` when it
    /// cannot be (the record then stays this replica's alone).
    pub(super) fn seal_record(&self, kind: &str, id: &str, fields: &[&str]) -> Option<String> {
        seal_record(&self.records_key(), kind, id, fields)
    }

    /// The `n` fields of a record of `kind` about `id`, or `None` for one
    /// that does not open ([`open_record`]), which is counted and logged and
    /// read as no record.
    pub(super) fn open_record(
        &self,
        sealed: &str,
        kind: &str,
        id: &str,
        n: usize,
    ) -> Option<Vec<String>> {
        let opened = open_record(&self.records_key(), sealed, kind, id, n);
        if opened.is_none() {
            self.metrics.state_failed("recall", "ignored");
            tracing::warn!(
                kind,
                "a record shared by replicas did not open (another fence key, or not \
                 written by toolgate): ignored"
            );
        }
        opened
    }

    /// Makes `write` with the shared store in the background (a follow-up
    /// comes a model turn later), counting a failure: the record stays this
    /// replica's alone.
    pub(super) fn write_behind<F, W>(&self, write: W)
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

    /// Writes a thread's facts under the id of an answer in it, sealed
    /// with their kind and that id inside; an id another replica bound to
    /// other facts (or that was given to two threads, `reused`) is written
    /// as given to two threads, so that no replica continues from it.
    pub(super) fn share_thread(
        &self,
        answer: &str,
        facts: &crate::proxy::threads::Facts,
        reused: bool,
    ) {
        if self.parts.shared.is_none() {
            return;
        }
        let key = self.thread_key();
        let plain = facts.to_json().to_string();
        let (Some(sealed), Some(tombstone)) = (
            seal_record(&key, THREAD, answer, &[&plain]),
            seal_record(&key, THREAD, answer, &[REUSED]),
        ) else {
            return;
        };
        let answer = answer.to_string();
        self.write_behind(move |s, ttl| async move {
            if !reused && s.put_new(THREAD, &answer, &sealed, ttl).await? {
                return Ok(());
            }
            if !reused {
                let known = s.get(THREAD, &answer).await?;
                let same = known
                    .and_then(|k| open_record(&key, &k, THREAD, &answer, 1))
                    .is_some_and(|f| f[0] == plain);
                if same {
                    return Ok(());
                }
                tracing::warn!(
                    "the provider gave one answer id to two threads (seen on another replica): \
                     no thread continues from it"
                );
            }
            s.put(THREAD, &answer, &tombstone, ttl).await
        });
    }

    /// The facts of the thread holding answer `id`: `None` when no replica
    /// knows it, which the agent's SDK recovers from by replaying. With
    /// shared state, what Redis holds comes first (another replica may
    /// have found the id given to two threads); this replica's own record
    /// stands when Redis has none or cannot be read. Whose it is, and
    /// whether the id was given to two threads, the caller checks
    /// ([`Facts::belongs_to`]).
    ///
    /// [`Facts::belongs_to`]: crate::proxy::threads::Facts::belongs_to
    pub async fn thread(&self, id: &str) -> Result<Option<crate::proxy::threads::Shared>, Error> {
        use crate::proxy::threads::Facts;
        let local = self.threads.get(id);
        let Some(s) = &self.parts.shared else {
            return Ok(local);
        };
        let sealed = match s.get(THREAD, id).await {
            Ok(Some(v)) => v,
            Ok(None) => return Ok(local),
            Err(_) if local.is_some() => return Ok(local),
            Err(e) => return self.unreadable(s, &e).map(|()| None),
        };
        let Some(mut fields) = open_record(&self.thread_key(), &sealed, THREAD, id, 1) else {
            self.metrics.state_failed("recall", "ignored");
            tracing::warn!(
                kind = THREAD,
                "a record shared by replicas did not open (another fence key, another \
                 record's, or not written by toolgate): ignored"
            );
            return Ok(local);
        };
        let plain = fields.pop().unwrap_or_default();
        let facts = if plain == REUSED {
            Some(Facts::reused())
        } else {
            serde_json::from_str::<Value>(&plain)
                .ok()
                .and_then(|v| Facts::from_json(&v))
        };
        let Some(facts) = facts.map(Arc::new) else {
            return Ok(local);
        };
        self.threads.insert(id.to_string(), facts.clone());
        Ok(Some(facts))
    }

    /// Writes the turn stored response `id` ends, sealed with its kind and
    /// id inside (it holds prompts and tool results).
    pub(super) fn share_history(&self, id: &str, turn: &crate::context::Turn) {
        if self.parts.shared.is_none() {
            return;
        }
        let Some(sealed) = self.seal_record(HISTORY, id, &[&turn.to_json().to_string()]) else {
            return;
        };
        let id = id.to_string();
        self.write_behind(|s, ttl| async move { s.put(HISTORY, &id, &sealed, ttl).await });
    }

    /// Writes the turn `id` ends (this replica's record of it) to the
    /// shared state, and waits for it.
    pub(super) async fn share_history_now(&self, id: &str) {
        let (Some(s), Some(turn)) = (&self.parts.shared, self.history.get(id)) else {
            return;
        };
        let Some(sealed) = self.seal_record(HISTORY, id, &[&turn.to_json().to_string()]) else {
            return;
        };
        let ttl = self.config.responses.remember_ttl;
        if s.put(HISTORY, id, &sealed, ttl).await.is_err() {
            self.metrics.state_failed("remember", "local");
        }
    }

    /// The turn stored response `id` ends: this replica's own record, else
    /// another replica's from the shared state.
    pub(super) async fn turn(&self, id: &str) -> Result<Option<Arc<crate::context::Turn>>, Error> {
        if let Some(t) = self.history.get(id) {
            return Ok(Some(t));
        }
        let Some(s) = &self.parts.shared else {
            return Ok(None);
        };
        let sealed = match s.get(HISTORY, id).await {
            Ok(v) => v,
            Err(e) => return self.unreadable(s, &e).map(|()| None),
        };
        let turn = sealed
            .and_then(|v| self.open_record(&v, HISTORY, id, 1))
            .and_then(|mut f| f.pop())
            .and_then(|plain| serde_json::from_str::<Value>(&plain).ok())
            .and_then(|v| crate::context::Turn::from_json(&v))
            .map(Arc::new);
        if let Some(t) = &turn {
            self.history.insert(id.to_string(), t.clone());
        }
        Ok(turn)
    }

    /// The texts of the conversation stored response `id` ends, its turns
    /// read in order; `None` when a turn of it is not known (expired, or
    /// another replica's without shared state), or it is longer than
    /// [`MAX_TURNS`] (a provider's ids that loop included).
    pub async fn history(&self, id: &str) -> Result<Option<crate::context::Texts>, Error> {
        let mut turns = Vec::new();
        let mut at = id.to_string();
        loop {
            if turns.len() >= MAX_TURNS {
                return Ok(None);
            }
            let Some(t) = self.turn(&at).await? else {
                return Ok(None);
            };
            let prev = t.prev.clone();
            turns.push(t);
            match prev {
                Some(p) => at = p,
                None => break,
            }
        }
        let mut texts = crate::context::Texts::default();
        for t in turns.iter().rev() {
            texts = t.texts.clone().after(&texts);
        }
        Ok(Some(texts))
    }

    /// Shared state that could not be read: an error (`fail_closed`) or
    /// nothing (`local`), counted and logged.
    pub(super) fn unreadable(
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
        let sealed: Option<Vec<String>> = w
            .calls
            .iter()
            .map(|(call, kind)| self.seal_record(WITHHELD, &w.response_id, &[call, kind]))
            .collect();
        let Some(items) = sealed else {
            return;
        };
        let id = w.response_id.clone();
        self.write_behind(|s, ttl| async move { s.append(WITHHELD, &id, &items, ttl).await });
    }

    /// Writes that stored response `first` was continued as `then`.
    pub(super) fn share_renamed(&self, first: &str, then: &str) {
        if self.parts.shared.is_none() {
            return;
        }
        let Some(sealed) = self.seal_record(RENAMED, first, &[then]) else {
            return;
        };
        let first = first.to_string();
        self.write_behind(|s, ttl| async move { s.put(RENAMED, &first, &sealed, ttl).await });
    }

    /// Before a request that continues a stored response (or a thread) is
    /// rewritten: what another replica remembered of that response, read
    /// into this one's records when this one has none. Unreachable shared
    /// state fails the request (`fail_closed`: a withheld call could not be
    /// answered) or is passed over with a warning (`local`).
    pub async fn recall(&self, protocol: Protocol, body: &Value) -> Result<(), Error> {
        match protocol.stored_from(body) {
            Some(prev) => self.recall_response(&prev).await,
            None => Ok(()),
        }
    }

    /// What another replica remembered of stored response `prev` (see
    /// [`State::recall`]).
    pub async fn recall_response(&self, prev: &str) -> Result<(), Error> {
        let Some(s) = &self.parts.shared else {
            return Ok(());
        };
        // This replica served it: its own records are whole.
        if self.renamed.contains_key(prev) || self.withheld.contains_key(prev) {
            return Ok(());
        }
        let read = async {
            let mut id: Arc<str> = Arc::from(prev);
            let renamed = s.get(RENAMED, prev).await?;
            let then = renamed
                .and_then(|v| self.open_record(&v, RENAMED, prev, 1))
                .and_then(|mut f| f.pop());
            if let Some(then) = then {
                let then: Arc<str> = Arc::from(then);
                self.renamed.insert(prev.to_string(), then.clone());
                id = then;
            }
            if self.withheld.get(id.as_ref()).is_none() {
                let calls: Vec<(String, String)> = s
                    .items(WITHHELD, &id)
                    .await?
                    .iter()
                    .filter_map(|item| self.open_record(item, WITHHELD, id.as_ref(), 2))
                    .filter_map(|mut f| Some((f.remove(0), f.pop()?)))
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

/// `fields` of a record of `kind` about `id`, sealed under `key` with the
/// kind and id inside.
pub(super) fn seal_record(key: &[u8; 32], kind: &str, id: &str, fields: &[&str]) -> Option<String> {
    let plain = Value::from([&[kind, id][..], fields].concat()).to_string();
    crate::state::seal::seal(key, plain.as_bytes())
}

/// The `n` fields of a record of `kind` about `id` that [`seal_record`]
/// sealed under `key`; `None` for anything else: another key, a record
/// changed or written by something else, or one of another kind or id
/// (copied from under another key).
pub(super) fn open_record(
    key: &[u8; 32],
    sealed: &str,
    kind: &str,
    id: &str,
    n: usize,
) -> Option<Vec<String>> {
    crate::state::seal::open(key, sealed)
        .and_then(|plain| serde_json::from_slice::<Vec<String>>(&plain).ok())
        .filter(|f| f.len() == n + 2 && f[0] == kind && f[1] == id)
        .map(|mut f| f.split_off(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_opens_only_as_sealed_under_its_key_kind_and_id() {
        let key = [7u8; 32];
        let sealed = seal_record(&key, RENAMED, "resp_A", &["resp_B"]).unwrap_or_default();
        assert!(!sealed.contains("resp_B"), "{sealed}");
        assert_eq!(
            open_record(&key, &sealed, RENAMED, "resp_A", 1),
            Some(vec!["resp_B".to_string()])
        );
        // Another key, another id, another kind, another shape.
        assert_eq!(open_record(&[8u8; 32], &sealed, RENAMED, "resp_A", 1), None);
        assert_eq!(open_record(&key, &sealed, RENAMED, "resp_C", 1), None);
        assert_eq!(open_record(&key, &sealed, WITHHELD, "resp_A", 1), None);
        assert_eq!(open_record(&key, &sealed, RENAMED, "resp_A", 2), None);
        // What was written before records were sealed, or by anything else.
        assert_eq!(open_record(&key, "resp_B", RENAMED, "resp_A", 1), None);
        let plain = r#"["call_X","function"]"#;
        assert_eq!(open_record(&key, plain, WITHHELD, "resp_A", 2), None);
        let call = seal_record(&key, WITHHELD, "resp_A", &["call_X", "function"]);
        assert_eq!(
            call.and_then(|c| open_record(&key, &c, WITHHELD, "resp_A", 2)),
            Some(vec!["call_X".to_string(), "function".to_string()])
        );
    }
}
