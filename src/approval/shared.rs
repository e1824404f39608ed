//! Approvals across replicas (`[state] backend = "redis"`): each waiting
//! question is published (its arguments redacted as on the page, without
//! the user's message), so any replica lists it; an answer given on
//! another replica is left in Redis for the replica that holds the call,
//! which looks every [`POLL`] for answers and session approvals to its
//! questions. Each replica keeps a heartbeat: a question whose replica
//! stopped beating died with its connection and leaves the list.
//! Unreachable Redis leaves every replica deciding its own questions.
//!
//! Questions, answers and session approvals left in Redis are signed with
//! the approvals API's token (every replica has it): what else can write to
//! Redis can neither show a person another call than the one held nor
//! approve one. A question that does not verify is not listed, and an
//! answer carries the digest of the question it answered, which the
//! replica holding the call checks against that call.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{json, Value};

use super::{Answer, Approvals, Channel, Refused};
use crate::digest::{hex, hmac_sha256};
use crate::state::Shared;

/// How often a replica looks for answers given elsewhere.
const POLL: Duration = Duration::from_millis(200);
/// How often a replica beats, and how long a beat lasts.
const BEAT: Duration = Duration::from_secs(1);
const BEAT_TTL: Duration = Duration::from_secs(4);

const QUESTION: &str = "approval";
const DECISION: &str = "decision";
const GRANT: &str = "grant";
const REPLICA: &str = "replica";
const INDEX: &str = "approvals";
/// A question settled on its replica (answered, timed out, abandoned):
/// another answer to it is a conflict there, so here too, for an hour.
const SETTLED: &str = "settled";
const SETTLED_TTL: Duration = Duration::from_secs(3600);

/// The store, this replica's name in it, and the queue of its writes.
pub(super) struct Sharing {
    store: Arc<Shared>,
    replica: String,
    writes: tokio::sync::mpsc::UnboundedSender<Write>,
}

/// A write to the shared questions. One task makes them in order, so a
/// question settled at once is never published after it was taken off.
enum Write {
    Publish {
        id: String,
        record: String,
        ttl: Duration,
    },
    Unpublish {
        id: String,
    },
    Grant {
        key: String,
        signed: String,
        ttl: Duration,
    },
}

/// Makes the writes in the order they were queued.
async fn write(store: Arc<Shared>, mut writes: tokio::sync::mpsc::UnboundedReceiver<Write>) {
    while let Some(w) = writes.recv().await {
        match w {
            Write::Publish { id, record, ttl } => {
                let _ = store.put(QUESTION, &id, &record, ttl).await;
                let _ = store.index_add(INDEX, &id, ttl).await;
            }
            Write::Unpublish { id } => {
                let _ = store.put(SETTLED, &id, "1", SETTLED_TTL).await;
                let _ = store.remove(QUESTION, &id).await;
                let _ = store.index_remove(INDEX, &id).await;
            }
            Write::Grant { key, signed, ttl } => {
                let _ = store.put(GRANT, &key, &signed, ttl).await;
            }
        }
    }
}

impl Approvals {
    /// A signature of `what` about `id` under the API's token (none
    /// without one: then no answer is taken through the API at all).
    fn sign(&self, kind: &str, id: &str, what: &str) -> Option<String> {
        let key = self.token.as_ref()?;
        let parts: [&[u8]; 5] = [
            kind.as_bytes(),
            &[0xff],
            id.as_bytes(),
            &[0xff],
            what.as_bytes(),
        ];
        Some(hex(&hmac_sha256(key, &parts)))
    }

    /// `signed` (`signature.what`) when its signature holds: `what`.
    fn verified(&self, kind: &str, id: &str, signed: &str) -> Option<String> {
        let (sig, what) = signed.split_once('.')?;
        let want = self.sign(kind, id, what)?;
        crate::digest::same(sig.as_bytes(), want.as_bytes()).then(|| what.to_string())
    }

    /// Shares this replica's questions through `store` and starts its
    /// heartbeat and its look for answers (both end with the approvals).
    pub fn share(self: &Arc<Self>, store: Arc<Shared>) {
        let replica = hex(&crate::digest::random_key())[..16].to_string();
        let (writes, queued) = tokio::sync::mpsc::unbounded_channel();
        let sharing = Sharing {
            store: store.clone(),
            replica,
            writes,
        };
        if self.shared.set(sharing).is_err() {
            return;
        }
        // Ends when the approvals (and with them the sender) are dropped.
        tokio::spawn(write(store, queued));
        let weak = Arc::downgrade(self);
        tokio::spawn(beat(weak.clone()));
        tokio::spawn(look(weak));
    }

    /// Publishes a waiting question, signed (without the API's token no
    /// replica could answer it, so it is not published).
    pub(super) fn publish(&self, q: &super::Question) {
        let Some(s) = self.shared.get() else { return };
        let mut shown = json!(q);
        shown["request"] = Value::Null;
        let record = json!({"replica": s.replica, "question": shown}).to_string();
        let Some(sig) = self.sign(QUESTION, &q.id, &record) else {
            return;
        };
        let ttl = self.timeout() + BEAT_TTL;
        let _ = s.writes.send(Write::Publish {
            id: q.id.clone(),
            record: format!("{sig}.{record}"),
            ttl,
        });
    }

    /// A published question's record, when its signature holds.
    fn question_record(&self, id: &str, signed: &str) -> Option<Value> {
        let record = self.verified(QUESTION, id, signed)?;
        serde_json::from_str::<Value>(&record)
            .ok()
            .filter(|r| r["replica"].is_string() && r["question"]["id"] == id)
    }

    /// Takes a settled question off the shared list.
    pub(super) fn unpublish(&self, id: &str) {
        let Some(s) = self.shared.get() else { return };
        let _ = s.writes.send(Write::Unpublish { id: id.to_string() });
    }

    /// Shares a session approval with every replica.
    pub(super) fn share_grant(&self, grant: &[u8; 32], by: &str) {
        let Some(s) = self.shared.get() else { return };
        let key = hex(grant);
        let Some(sig) = self.sign(GRANT, &key, by) else {
            return;
        };
        let _ = s.writes.send(Write::Grant {
            key,
            signed: format!("{sig}.{by}"),
            ttl: self.cfg.session_ttl,
        });
    }

    /// The questions waiting on every replica: this one's first, then the
    /// others' (a question whose replica no longer beats is dropped).
    pub async fn list_all(&self) -> Vec<Value> {
        let local = self.list();
        let mut out: Vec<Value> = local.iter().map(|q| json!(q)).collect();
        let Some(s) = self.shared.get() else {
            return out;
        };
        let Ok(ids) = s.store.index(INDEX).await else {
            return out;
        };
        let ids: Vec<String> = ids.into_iter().filter(|id| !self.is_open(id)).collect();
        let Ok(records) = s.store.get_many(QUESTION, &ids).await else {
            return out;
        };
        let mut remote = Vec::new();
        for (id, record) in ids.iter().zip(records) {
            let written = record.is_some();
            match record.and_then(|r| self.question_record(id, &r)) {
                Some(r) => remote.push((id.clone(), r)),
                // Expired, unreadable or not signed by a replica: off the list.
                None => {
                    if written {
                        tracing::warn!(id = %id, "an unsigned question in the shared state was not listed");
                    }
                    let _ = s.store.index_remove(INDEX, id).await;
                }
            }
        }
        let replicas: Vec<String> = remote
            .iter()
            .map(|(_, r)| r["replica"].as_str().unwrap_or_default().to_string())
            .collect();
        let Ok(alive) = s.store.get_many(REPLICA, &replicas).await else {
            return out;
        };
        for ((id, r), beat) in remote.into_iter().zip(alive) {
            if beat.is_some() {
                out.push(r["question"].clone());
                continue;
            }
            // Its replica died, and the call with its connection.
            tracing::info!(id = %id, "a question whose replica is gone expired");
            self.metrics.approval_decided("expired", "none");
            let _ = s.store.remove(QUESTION, &id).await;
            let _ = s.store.index_remove(INDEX, &id).await;
        }
        out
    }

    /// Answers question `id` here, or, when another replica holds it,
    /// leaves the answer for that replica.
    pub async fn answer_anywhere(
        &self,
        id: &str,
        a: Answer,
        digest: Option<&str>,
    ) -> Result<(), Refused> {
        let local = self.answer(id, a.clone(), digest);
        let (Err(Refused::Unknown), Some(s)) = (local, self.shared.get()) else {
            return local;
        };
        let record = match s.store.get(QUESTION, id).await {
            Ok(Some(r)) => self.question_record(id, &r).ok_or(Refused::Unknown)?,
            Ok(None) if matches!(s.store.get(SETTLED, id).await, Ok(Some(_))) => {
                return Err(Refused::Settled)
            }
            _ => return Err(Refused::Unknown),
        };
        // A question whose replica died went with its call.
        let holder = record["replica"].as_str().unwrap_or_default();
        if !matches!(s.store.get(REPLICA, holder).await, Ok(Some(_))) {
            return Err(Refused::Unknown);
        }
        let q = &record["question"];
        if digest.is_some_and(|d| {
            !q["digest"]
                .as_str()
                .is_some_and(|h| h.eq_ignore_ascii_case(d))
        }) {
            return Err(Refused::Mismatch);
        }
        if a.approve && a.session && q["principal"] == crate::context::ANONYMOUS {
            return Err(Refused::Anonymous);
        }
        // The digest of the question the person was shown: the holder
        // takes the answer only for the call with that digest.
        let Some(shown) = q["digest"].as_str() else {
            return Err(Refused::Unknown);
        };
        let answer = json!({"approve": a.approve, "by": a.by, "channel": a.channel.as_str(), "session": a.session, "digest": shown}).to_string();
        let Some(sig) = self.sign(DECISION, id, &answer) else {
            return Err(Refused::Unknown);
        };
        let signed = format!("{sig}.{answer}");
        match s
            .store
            .put_new(DECISION, id, &signed, Duration::from_secs(60))
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(Refused::Settled),
            Err(_) => Err(Refused::Unknown),
        }
    }

    /// Answers this replica's questions from what other replicas left:
    /// answers given there and session approvals of the same call.
    async fn take_answers(&self, s: &Sharing) {
        let open: Vec<(String, [u8; 32], [u8; 32])> = {
            let p = self.lock();
            p.open
                .iter()
                .map(|(id, e)| (id.clone(), e.grant, e.digest))
                .collect()
        };
        if open.is_empty() {
            return;
        }
        let ids: Vec<String> = open.iter().map(|(id, _, _)| id.clone()).collect();
        let grants: Vec<String> = open.iter().map(|(_, g, _)| hex(g)).collect();
        let digests: Vec<String> = open.iter().map(|(_, _, d)| hex(d)).collect();
        let (Ok(answers), Ok(granted)) = (
            s.store.get_many(DECISION, &ids).await,
            s.store.get_many(GRANT, &grants).await,
        ) else {
            return;
        };
        let tries = ids
            .iter()
            .zip(grants.iter().zip(&digests))
            .zip(answers.into_iter().zip(granted));
        for ((id, (key, digest)), (answer, grant)) in tries {
            // Unsigned, forged, or given to another call than the one held
            // here: not an answer, and removed so that it does not stand in
            // the way of a real one.
            let written = answer.is_some();
            let answer = answer
                .and_then(|a| self.verified(DECISION, id, &a))
                .and_then(|a| serde_json::from_str::<Value>(&a).ok())
                .filter(|a| {
                    a["digest"]
                        .as_str()
                        .is_some_and(|d| crate::digest::same(d.as_bytes(), digest.as_bytes()))
                });
            if written && answer.is_none() {
                tracing::warn!(id = %id, "an answer in the shared state that is unsigned or about another call was ignored");
                let _ = s.store.remove(DECISION, id).await;
            }
            let grant = grant.and_then(|g| self.verified(GRANT, key, &g));
            let a = match (answer, grant) {
                (Some(a), _) => Answer {
                    approve: a["approve"] == true,
                    by: a["by"].as_str().unwrap_or_default().to_string(),
                    channel: a["channel"]
                        .as_str()
                        .and_then(Channel::named)
                        .unwrap_or(Channel::Api),
                    session: a["session"] == true,
                },
                (None, Some(by)) => Answer {
                    approve: true,
                    by,
                    channel: Channel::Session,
                    session: false,
                },
                (None, None) => continue,
            };
            let _ = self.answer(id, a, None);
            let _ = s.store.remove(DECISION, id).await;
        }
    }
}

/// This replica's heartbeat, while its approvals live.
async fn beat(weak: Weak<Approvals>) {
    loop {
        let Some(a) = weak.upgrade() else { return };
        if let Some(s) = a.shared.get() {
            let _ = s.store.put(REPLICA, &s.replica, "1", BEAT_TTL).await;
        }
        drop(a);
        tokio::time::sleep(BEAT).await;
    }
}

/// Looks for answers given on other replicas, while the approvals live.
async fn look(weak: Weak<Approvals>) {
    loop {
        tokio::time::sleep(POLL).await;
        let Some(a) = weak.upgrade() else { return };
        if let Some(s) = a.shared.get() {
            a.take_answers(s).await;
        }
    }
}
