//! The LLM judge shared by the sentinel and the output fact-checker: one
//! non-streaming chat completion with a strict `json_schema` response format,
//! temperature 0, `max_tokens` and a timeout. The answer must validate against
//! the schema; anything else is a sensor failure. Answers are cached by key
//! (moka: TTL and capacity); concurrent identical questions share one upstream
//! call; errors are not cached. At most `max_concurrent` questions are in
//! flight: one over the bound fails at once (`busy`), and the rule's `fail`
//! decides, as for any other judge failure.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method};
use http_body_util::{BodyExt, Full};
use serde::Serialize;
use serde_json::Value;

use crate::config;
use crate::error::Error;
use crate::upstream::Upstream;

/// Why a judge (or a sensor reading its answer) failed: a bounded kind for
/// the metrics and a message for the log and the audit trail. The message
/// never holds the call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `timeout`, `connect`, `status`, `unreadable`, `schema`,
    /// `low_confidence`, `busy` or `other`.
    pub kind: &'static str,
    pub message: String,
}

impl Failure {
    pub fn new(kind: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }

    /// A failure of toolgate's own upstream client.
    fn upstream(e: &Error) -> Failure {
        let kind = match e {
            Error::UpstreamConnect(..) => "connect",
            Error::UpstreamTimeout | Error::UpstreamIdle => "timeout",
            _ => "other",
        };
        Failure::new(kind, e.to_string())
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// `data` as a JSON block after `intro`, which nothing in the data can close:
/// `<` and `>` only occur inside JSON strings, where `\u` escapes mean the same.
pub fn data_block(intro: &str, data: &Value) -> String {
    let block = serde_json::to_string_pretty(data)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e");
    format!("{intro}\n\n<data>\n{block}\n</data>")
}

/// A cache key over `parts` (each one delimited, so no two lists collide).
pub fn key(parts: &[&str]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in parts {
        h.update(part.as_bytes());
        h.update([0xff]);
    }
    h.finalize().into()
}

/// What a judge is asked: a strict schema and two messages.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub schema_name: &'static str,
    pub schema: Arc<Value>,
    pub system: String,
    pub user: String,
}

/// The question as it goes to the judge (OpenAI's Chat Completions, an
/// answer held to the schema).
#[derive(Serialize)]
struct Question<'a> {
    model: &'a str,
    temperature: u8,
    max_tokens: u32,
    messages: [Message<'a>; 2],
    response_format: Format<'a>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct Format<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    json_schema: Schema<'a>,
}

#[derive(Serialize)]
struct Schema<'a> {
    name: &'a str,
    strict: bool,
    schema: &'a Value,
}

/// A judged answer and whether it came from the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub value: Value,
    pub cached: bool,
    pub latency: Duration,
}

pub struct Judge {
    upstream: Upstream,
    model: String,
    max_tokens: u32,
    /// Answers by question key; a loader shared by concurrent askers; errors not kept.
    cache: moka::future::Cache<[u8; 32], Value>,
    validators: Mutex<HashMap<&'static str, Arc<jsonschema::Validator>>>,
    /// Questions in flight upstream (cache hits and shared loads take none).
    in_flight: tokio::sync::Semaphore,
    max_concurrent: usize,
}

impl Judge {
    pub fn new(cfg: &config::Judge) -> Result<Arc<Judge>, crate::error::Error> {
        Ok(Arc::new(Judge {
            // As many connections kept as questions may be in flight.
            upstream: Upstream::new(&cfg.upstream)?.keep_idle(cfg.max_concurrent),
            model: cfg.model.clone(),
            max_tokens: cfg.max_tokens,
            cache: moka::future::Cache::builder()
                .max_capacity(cfg.cache_capacity as u64)
                .time_to_live(cfg.cache_ttl)
                .build(),
            validators: Mutex::new(HashMap::new()),
            in_flight: tokio::sync::Semaphore::new(cfg.max_concurrent),
            max_concurrent: cfg.max_concurrent,
        }))
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// Asks (or answers from the cache). `key` identifies the question;
    /// `q` writes it, and is called only when it goes upstream (a call's
    /// decision usually finds the answer its question asked ahead left in
    /// the cache, and writing the prompt again would be for nothing).
    pub async fn ask(
        &self,
        key: [u8; 32],
        q: impl FnOnce() -> Prompt + Send,
    ) -> Result<Reply, Failure> {
        let started = Instant::now();
        if let Some(value) = self.cache.get(&key).await {
            return Ok(Reply {
                value,
                cached: true,
                latency: started.elapsed(),
            });
        }
        let load = async {
            let Ok(_permit) = self.in_flight.try_acquire() else {
                return Err(Failure::new(
                    "busy",
                    format!(
                        "judge busy: {} questions already in flight ([judge] max_concurrent)",
                        self.max_concurrent
                    ),
                ));
            };
            let q = q();
            match tokio::time::timeout(self.upstream.timeout, self.call(&q)).await {
                Ok(r) => r,
                Err(_) => Err(Failure::new("timeout", "judge timed out")),
            }
        };
        let value = self
            .cache
            .try_get_with(key, load)
            .await
            .map_err(|e| (*e).clone())?;
        Ok(Reply {
            value,
            cached: false,
            latency: started.elapsed(),
        })
    }

    /// The compiled answer schema (compiled once per schema name).
    fn validator(&self, q: &Prompt) -> Result<Arc<jsonschema::Validator>, Failure> {
        let mut m = self
            .validators
            .lock()
            .map_err(|_| Failure::new("other", "judge validators poisoned"))?;
        if let Some(v) = m.get(q.schema_name) {
            return Ok(v.clone());
        }
        let v = Arc::new(
            jsonschema::validator_for(&q.schema)
                .map_err(|e| Failure::new("other", format!("judge schema: {e}")))?,
        );
        m.insert(q.schema_name, v.clone());
        Ok(v)
    }

    /// One upstream call, validated against the schema.
    async fn call(&self, q: &Prompt) -> Result<Value, Failure> {
        // Written from borrowed parts: a tree of the question would copy the
        // prompt and the schema for every question.
        let body = Question {
            model: &self.model,
            temperature: 0,
            max_tokens: self.max_tokens,
            messages: [
                Message {
                    role: "system",
                    content: &q.system,
                },
                Message {
                    role: "user",
                    content: &q.user,
                },
            ],
            response_format: Format {
                kind: "json_schema",
                json_schema: Schema {
                    name: q.schema_name,
                    strict: true,
                    schema: &q.schema,
                },
            },
        };
        let body = serde_json::to_vec(&body)
            .map_err(|e| Failure::new("other", format!("judge question: {e}")))?;
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let req_body = Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed();
        let req = self
            .upstream
            .request(Method::POST, "/chat/completions", None, headers, req_body)
            .map_err(|e| Failure::upstream(&e))?;
        let resp = self
            .upstream
            .send(req)
            .await
            .map_err(|e| Failure::upstream(&e))?;
        let status = resp.status();
        let collected = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| Failure::new("unreadable", format!("judge body: {e}")))?
            .to_bytes();
        if !status.is_success() {
            return Err(Failure::new("status", format!("judge returned {status}")));
        }
        let v: Value = serde_json::from_slice(&collected)
            .map_err(|_| Failure::new("unreadable", "judge response is not JSON"))?;
        let content = v
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| Failure::new("unreadable", "judge response has no message content"))?;
        let answer: Value = serde_json::from_str(content.trim())
            .map_err(|_| Failure::new("unreadable", "judge answer is not JSON"))?;
        if !self.validator(q)?.is_valid(&answer) {
            return Err(Failure::new(
                "schema",
                "judge answer does not match the schema",
            ));
        }
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn a_question_answered_from_the_cache_writes_no_prompt() {
        // Nothing listens on a port just let go: a question that goes
        // upstream fails.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cfg = crate::Config::from_toml(
            &format!("[judge]\nbase_url = \"http://127.0.0.1:{port}/v1\"\n"),
            "t",
            std::path::Path::new("."),
        )
        .unwrap();
        let judge = Judge::new(cfg.judge.as_ref().unwrap()).unwrap();
        let written = AtomicUsize::new(0);
        let q = || {
            written.fetch_add(1, Ordering::Relaxed);
            Prompt {
                schema_name: "t",
                schema: Arc::new(json!({"type": "object"})),
                system: String::new(),
                user: String::new(),
            }
        };
        let asked = key(&["asked ahead"]);
        judge
            .cache
            .insert(asked, json!({"decision": "approve"}))
            .await;
        let r = judge.ask(asked, q).await.unwrap();
        assert!(r.cached);
        assert_eq!(r.value["decision"], "approve");
        assert_eq!(
            written.load(Ordering::Relaxed),
            0,
            "a cached answer writes no prompt"
        );
        assert!(judge.ask(key(&["new"]), q).await.is_err());
        assert_eq!(
            written.load(Ordering::Relaxed),
            1,
            "a question asked upstream is written"
        );
    }

    #[test]
    fn upstream_failures_have_a_kind_and_keep_their_message() {
        let connect = Failure::upstream(&Error::UpstreamConnect(
            crate::error::Fault::Refused,
            "refused".into(),
        ));
        assert_eq!(connect.kind, "connect");
        assert_eq!(
            connect.to_string(),
            "upstream unreachable (refused): refused"
        );
        assert_eq!(Failure::upstream(&Error::UpstreamTimeout).kind, "timeout");
        assert_eq!(
            Failure::upstream(&Error::Overloaded("streams")).kind,
            "other"
        );
    }
}
