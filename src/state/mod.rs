//! State that replicas share, kept in Redis (`[state] backend = "redis"`):
//! rate-limit buckets, each a GCRA as governor computes it, taken atomically
//! by a Lua script on Redis's own clock; and records of stored responses
//! (the calls withheld from one, the response a follow-up continued it as);
//! calls waiting for approval, the answers to them and session approvals.
//! Keys are digests under the configured prefix; every key expires.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::config;

pub mod seal;

/// GCRA: KEYS[1] the bucket's theoretical arrival time (µs on Redis's
/// clock); ARGV[1] the emission interval (µs), ARGV[2] the burst. 1 when
/// the call is within the limit (the bucket advances), 0 when it is over.
const TAKE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local next_tat = tat + interval
if next_tat - now > interval * tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[1], string.format('%.0f', next_tat), 'PX', math.ceil((next_tat - now) / 1000) + 1)
return 1
";

/// KEYS[1] a set, ARGV[1] a member, ARGV[2] a lifetime (ms): adds the
/// member, and the set then lives at least that long (a longer lifetime it
/// has is kept), so members nobody took off go with the set once none has
/// been added for that long.
const INDEX_ADD: &str = r"
redis.call('SADD', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
";

/// KEYS[1] a record, ARGV[1] its version, ARGV[2] its value, ARGV[3] a
/// lifetime (ms): sets the record to `version:value` unless it holds a
/// version as new or newer, so writes that land out of order leave the
/// newest.
const PUT_NEWER: &str = r"
local cur = redis.call('GET', KEYS[1])
if cur then
  local n = tonumber(string.match(cur, '^(%d+):'))
  if n and n >= tonumber(ARGV[1]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'PX', ARGV[3])
return 1
";

/// How long after a failed connection attempt the next one waits: calls in
/// between fail at once instead of each waiting for a connect timeout.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Why shared state could not be read or written. The message names
/// neither the URL (it may hold a password) nor any argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "shared state unavailable: {}", self.0)
    }
}

/// What went wrong, in words that name no URL or value.
fn what(e: &redis::RedisError) -> String {
    if e.is_connection_refusal() {
        "connection refused".into()
    } else if e.is_timeout() {
        "timed out".into()
    } else if e.is_connection_dropped() {
        "connection dropped".into()
    } else {
        format!("{:?}", e.kind()).to_lowercase()
    }
}

/// The connection to Redis: made on first use, remade by the manager
/// after a failure; a failed first attempt is retried after [`RETRY_AFTER`].
enum Link {
    Idle,
    Failed(Instant),
    Up(ConnectionManager),
}

pub struct Shared {
    client: redis::Client,
    prefix: String,
    timeout: Duration,
    pub on_error: config::OnError,
    link: tokio::sync::Mutex<Link>,
    script: redis::Script,
    index_add: redis::Script,
    put_newer: redis::Script,
    /// The last failure logged, so an outage is logged once a second.
    logged: Mutex<Option<Instant>>,
}

impl Shared {
    /// The shared store of `[state]`, or `None` for `backend = "memory"`.
    pub fn new(cfg: &config::State) -> Result<Option<Shared>, crate::error::Error> {
        if cfg.backend != config::Backend::Redis {
            return Ok(None);
        }
        let bad = |m: String| crate::error::Error::config("[state]", 1, m);
        let client = match &cfg.ca_file {
            None => redis::Client::open(cfg.url.as_str()),
            Some(path) => {
                let pem = std::fs::read(path)
                    .map_err(|e| bad(format!("state.ca_file {}: {e}", path.display())))?;
                let certs = redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem),
                };
                redis::Client::build_with_tls(cfg.url.as_str(), certs)
            }
        }
        .map_err(|e| bad(format!("state.url: {}", what(&e))))?;
        Ok(Some(Shared {
            client,
            prefix: cfg.key_prefix.clone(),
            timeout: cfg.timeout,
            on_error: cfg.on_error,
            link: tokio::sync::Mutex::new(Link::Idle),
            script: redis::Script::new(TAKE),
            index_add: redis::Script::new(INDEX_ADD),
            put_newer: redis::Script::new(PUT_NEWER),
            logged: Mutex::new(None),
        }))
    }

    /// A connection, made now when there is none.
    async fn conn(&self) -> Result<ConnectionManager, Unavailable> {
        let mut link = self.link.lock().await;
        match &*link {
            Link::Up(c) => return Ok(c.clone()),
            Link::Failed(at) if at.elapsed() < RETRY_AFTER => {
                return Err(Unavailable("not connected".into()))
            }
            _ => {}
        }
        let cfg = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1);
        let made = tokio::time::timeout(
            self.timeout * 2,
            ConnectionManager::new_with_config(self.client.clone(), cfg),
        )
        .await;
        match made {
            Ok(Ok(c)) => {
                *link = Link::Up(c.clone());
                Ok(c)
            }
            Ok(Err(e)) => {
                *link = Link::Failed(Instant::now());
                Err(self.failed(&e))
            }
            Err(_) => {
                *link = Link::Failed(Instant::now());
                Err(Unavailable("connect timed out".into()))
            }
        }
    }

    /// A Redis error as [`Unavailable`], logged at most once a second.
    fn failed(&self, e: &redis::RedisError) -> Unavailable {
        let why = Unavailable(what(e));
        let mut logged = self.logged.lock().unwrap_or_else(|p| p.into_inner());
        if logged.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            tracing::warn!(error = %why, "redis");
            *logged = Some(Instant::now());
        }
        why
    }

    /// The key of a record of `kind` about `id` (a digest: no id in a key).
    fn record(&self, kind: &str, id: &str) -> String {
        let d = crate::digest::sha256(id.as_bytes());
        format!("{}{kind}:{}", self.prefix, crate::digest::hex(&d[..16]))
    }

    /// Runs `pipe` within the timeout.
    async fn run<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, Unavailable> {
        let mut conn = self.conn().await?;
        match tokio::time::timeout(self.timeout, pipe.query_async::<T>(&mut conn)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.failed(&e)),
            Err(_) => Err(Unavailable("timed out".into())),
        }
    }

    /// Appends `items` to the list of `kind` about `id`, kept for `ttl`.
    pub async fn append(
        &self,
        kind: &str,
        id: &str,
        items: &[String],
        ttl: Duration,
    ) -> Result<(), Unavailable> {
        let key = self.record(kind, id);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .rpush(&key, items)
            .ignore()
            .pexpire(&key, i64::try_from(ttl_ms(ttl)).unwrap_or(i64::MAX))
            .ignore();
        self.run::<()>(&pipe).await
    }

    /// Appends `item` to the list of `kind` about `id`, keeping its `keep`
    /// newest items, the list kept for `ttl`.
    pub async fn append_last(
        &self,
        kind: &str,
        id: &str,
        item: &str,
        keep: usize,
        ttl: Duration,
    ) -> Result<(), Unavailable> {
        let key = self.record(kind, id);
        let keep = isize::try_from(keep).unwrap_or(isize::MAX);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .rpush(&key, item)
            .ignore()
            .ltrim(&key, -keep, -1)
            .ignore()
            .pexpire(&key, i64::try_from(ttl_ms(ttl)).unwrap_or(i64::MAX))
            .ignore();
        self.run::<()>(&pipe).await
    }

    /// The list of `kind` about `id` (empty when there is none).
    pub async fn items(&self, kind: &str, id: &str) -> Result<Vec<String>, Unavailable> {
        let mut pipe = redis::pipe();
        pipe.lrange(self.record(kind, id), 0, -1);
        let (items,): (Vec<String>,) = self.run(&pipe).await?;
        Ok(items)
    }

    /// Sets the value of `kind` about `id`, kept for `ttl`.
    pub async fn put(
        &self,
        kind: &str,
        id: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<(), Unavailable> {
        let mut pipe = redis::pipe();
        pipe.pset_ex(self.record(kind, id), value, ttl_ms(ttl))
            .ignore();
        self.run::<()>(&pipe).await
    }

    /// Sets the value of `kind` about `id` to `value` at `version`, kept
    /// for `ttl`, unless it holds a version as new or newer ([`PUT_NEWER`]):
    /// whether it was set. [`Shared::get_versioned`] reads it.
    pub async fn put_newer(
        &self,
        kind: &str,
        id: &str,
        (version, value): (u64, &str),
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        let mut call = self.put_newer.prepare_invoke();
        call.key(self.record(kind, id))
            .arg(version)
            .arg(value)
            .arg(ttl_ms(ttl));
        Ok(self.invoke(&call).await? == 1)
    }

    /// The version and value [`Shared::put_newer`] set, if any.
    pub async fn get_versioned(
        &self,
        kind: &str,
        id: &str,
    ) -> Result<Option<(u64, String)>, Unavailable> {
        let raw = self.get(kind, id).await?;
        Ok(raw.and_then(|r| {
            let (n, v) = r.split_once(':')?;
            Some((n.parse().ok()?, v.to_string()))
        }))
    }

    /// The value of `kind` about `id`, if any.
    pub async fn get(&self, kind: &str, id: &str) -> Result<Option<String>, Unavailable> {
        let mut pipe = redis::pipe();
        pipe.get(self.record(kind, id));
        let (v,): (Option<String>,) = self.run(&pipe).await?;
        Ok(v)
    }

    /// Sets the value of `kind` about `id` unless there is one: whether it was set.
    pub async fn put_new(
        &self,
        kind: &str,
        id: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(self.record(kind, id))
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms(ttl));
        let (set,): (Option<String>,) = self.run(&pipe).await?;
        Ok(set.is_some())
    }

    /// The values of `kind` about each of `ids`, in order.
    pub async fn get_many(
        &self,
        kind: &str,
        ids: &[String],
    ) -> Result<Vec<Option<String>>, Unavailable> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|id| self.record(kind, id)).collect();
        let mut pipe = redis::pipe();
        pipe.cmd("MGET").arg(keys);
        let (v,): (Vec<Option<String>>,) = self.run(&pipe).await?;
        Ok(v)
    }

    /// Removes the record of `kind` about `id`.
    pub async fn remove(&self, kind: &str, id: &str) -> Result<(), Unavailable> {
        let mut pipe = redis::pipe();
        pipe.del(self.record(kind, id)).ignore();
        self.run::<()>(&pipe).await
    }

    /// Adds `member` to the set `name` (its members are not secret), which
    /// then lives at least `ttl` ([`INDEX_ADD`]).
    pub async fn index_add(
        &self,
        name: &str,
        member: &str,
        ttl: Duration,
    ) -> Result<(), Unavailable> {
        let mut call = self.index_add.prepare_invoke();
        call.key(format!("{}{name}", self.prefix))
            .arg(member)
            .arg(ttl_ms(ttl));
        self.invoke(&call).await.map(|_| ())
    }

    /// Removes `member` from the set `name`.
    pub async fn index_remove(&self, name: &str, member: &str) -> Result<(), Unavailable> {
        let mut pipe = redis::pipe();
        pipe.srem(format!("{}{name}", self.prefix), member).ignore();
        self.run::<()>(&pipe).await
    }

    /// The members of the set `name`.
    pub async fn index(&self, name: &str) -> Result<Vec<String>, Unavailable> {
        let mut pipe = redis::pipe();
        pipe.smembers(format!("{}{name}", self.prefix));
        let (v,): (Vec<String>,) = self.run(&pipe).await?;
        Ok(v)
    }

    /// The key of one bucket: the limit's identity and the caller's key,
    /// digested (sessions and principals are not written to Redis).
    fn bucket(&self, limit: &str, key: &str) -> String {
        let mut both = Vec::with_capacity(limit.len() + 1 + key.len());
        both.extend_from_slice(limit.as_bytes());
        both.push(0xff);
        both.extend_from_slice(key.as_bytes());
        let d = crate::digest::sha256(&both);
        format!("{}limit:{}", self.prefix, crate::digest::hex(&d[..16]))
    }

    /// Takes one call from a shared bucket: `Ok(false)` when over the limit.
    pub async fn take(
        &self,
        limit: &str,
        key: &str,
        interval: Duration,
        burst: u32,
    ) -> Result<bool, Unavailable> {
        let micros = u64::try_from(interval.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut call = self.script.prepare_invoke();
        call.key(self.bucket(limit, key)).arg(micros).arg(burst);
        Ok(self.invoke(&call).await? == 1)
    }

    /// Runs a script within the timeout: what it returned.
    async fn invoke(&self, call: &redis::ScriptInvocation<'_>) -> Result<i64, Unavailable> {
        let mut conn = self.conn().await?;
        match tokio::time::timeout(self.timeout, call.invoke_async::<i64>(&mut conn)).await {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) => Err(self.failed(&e)),
            Err(_) => Err(Unavailable("timed out".into())),
        }
    }
}

/// A lifetime in whole milliseconds, at least one.
fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_keys_are_digests_under_the_prefix() {
        let cfg = config::State {
            backend: config::Backend::Redis,
            url: "redis://127.0.0.1:1".into(),
            key_prefix: "tg:".into(),
            ..config::State::default()
        };
        let Ok(Some(s)) = Shared::new(&cfg) else {
            panic!("a redis:// URL makes a store")
        };
        let k = s.bucket("[\"pay\"]|Session|1/60s|1", "session-of-alice");
        assert!(
            k.starts_with("tg:limit:") && k.len() == "tg:limit:".len() + 32,
            "{k}"
        );
        assert!(!k.contains("alice"));
        assert_ne!(k, s.bucket("[\"pay\"]|Session|1/60s|1", "session-of-bob"));
        assert_ne!(k, s.bucket("[\"pay\"]|Session|2/60s|2", "session-of-alice"));
        let memory = config::State::default();
        assert!(matches!(Shared::new(&memory), Ok(None)));
    }
}
