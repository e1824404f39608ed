//! The LLM judge shared by the sentinel and the output fact-checker: one
//! non-streaming chat completion with a strict `json_schema` response format,
//! temperature 0, `max_tokens` and a timeout. The answer must validate against
//! the schema; anything else is a sensor failure. Answers are cached by key
//! (moka: TTL and capacity); concurrent identical questions share one upstream
//! call; errors are not cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

use crate::config;
use crate::upstream::Upstream;

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
pub struct Question {
    pub schema_name: &'static str,
    pub schema: Arc<Value>,
    pub system: String,
    pub user: String,
}

/// A judged answer and whether it came from the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
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
}

impl Judge {
    pub fn new(cfg: &config::Judge) -> Result<Arc<Judge>, crate::error::Error> {
        Ok(Arc::new(Judge {
            upstream: Upstream::new(&cfg.upstream)?,
            model: cfg.model.clone(),
            max_tokens: cfg.max_tokens,
            cache: moka::future::Cache::builder()
                .max_capacity(cfg.cache_capacity as u64)
                .time_to_live(cfg.cache_ttl)
                .build(),
            validators: Mutex::new(HashMap::new()),
        }))
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// Asks (or answers from the cache). `key` identifies the question.
    pub async fn ask(&self, key: [u8; 32], q: Question) -> Result<Answer, String> {
        let started = Instant::now();
        if let Some(value) = self.cache.get(&key).await {
            return Ok(Answer {
                value,
                cached: true,
                latency: started.elapsed(),
            });
        }
        let load = async {
            match tokio::time::timeout(self.upstream.timeout, self.call(&q)).await {
                Ok(r) => r,
                Err(_) => Err("judge timed out".to_string()),
            }
        };
        let value = self
            .cache
            .try_get_with(key, load)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Answer {
            value,
            cached: false,
            latency: started.elapsed(),
        })
    }

    /// The compiled answer schema (compiled once per schema name).
    fn validator(&self, q: &Question) -> Result<Arc<jsonschema::Validator>, String> {
        let mut m = self
            .validators
            .lock()
            .map_err(|_| "judge validators poisoned".to_string())?;
        if let Some(v) = m.get(q.schema_name) {
            return Ok(v.clone());
        }
        let v = Arc::new(
            jsonschema::validator_for(&q.schema).map_err(|e| format!("judge schema: {e}"))?,
        );
        m.insert(q.schema_name, v.clone());
        Ok(v)
    }

    /// One upstream call, validated against the schema.
    async fn call(&self, q: &Question) -> Result<Value, String> {
        let body = json!({
            "model": self.model,
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "messages": [{"role": "system", "content": q.system}, {"role": "user", "content": q.user}],
            "response_format": {"type": "json_schema", "json_schema": {"name": q.schema_name, "strict": true, "schema": &*q.schema}},
        });
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let req_body = Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed();
        let req = self
            .upstream
            .request(Method::POST, "/chat/completions", None, &headers, req_body)
            .map_err(|e| e.to_string())?;
        let resp = self.upstream.send(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let collected = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("judge body: {e}"))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!("judge returned {status}"));
        }
        let v: Value = serde_json::from_slice(&collected)
            .map_err(|_| "judge response is not JSON".to_string())?;
        let content = v
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or("judge response has no message content")?;
        let answer: Value = serde_json::from_str(content.trim())
            .map_err(|_| "judge answer is not JSON".to_string())?;
        if !self.validator(q)?.is_valid(&answer) {
            return Err("judge answer does not match the schema".into());
        }
        Ok(answer)
    }
}
