//! `[[limit]]`: per session, principal or global rate limits on tools (governor).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde::Deserialize;

use super::Glob;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitKey {
    Session,
    Principal,
    Global,
}

/// One limit with its own keyed limiter.
#[derive(Clone)]
pub struct Limit {
    pub globs: Vec<Glob>,
    pub key: LimitKey,
    pub rate: String,
    pub origin: String,
    /// What makes two limits the same across a reload: globs, key, rate, burst.
    spec: String,
    /// One call's share of the period, and how many may come at once.
    pub interval: Duration,
    pub burst: u32,
    limiter: Arc<DefaultKeyedRateLimiter<String>>,
}

impl std::fmt::Debug for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Limit({} {:?} {})", self.origin, self.key, self.rate)
    }
}

/// Parses `N/second|minute|hour|day`.
fn parse_rate(rate: &str) -> Result<(NonZeroU32, Duration), String> {
    let bad = || format!("rate `{rate}` is not N/second, N/minute, N/hour or N/day (N > 0)");
    let (n, per) = rate.split_once('/').ok_or_else(bad)?;
    let n: u32 = n.trim().parse().map_err(|_| bad())?;
    let n = NonZeroU32::new(n).ok_or_else(bad)?;
    let period = match per.trim() {
        "second" | "s" => Duration::from_secs(1),
        "minute" | "m" => Duration::from_secs(60),
        "hour" | "h" => Duration::from_secs(3600),
        "day" | "d" => Duration::from_secs(86_400),
        _ => return Err(bad()),
    };
    Ok((n, period))
}

impl Limit {
    /// `rate` calls per period, in bursts of up to `burst` (default: `rate`'s N).
    pub fn new(
        globs: Vec<Glob>,
        key: LimitKey,
        rate: &str,
        burst: Option<u32>,
        origin: String,
    ) -> Result<Limit, String> {
        let (n, period) = parse_rate(rate)?;
        let burst = match burst {
            None => n,
            Some(b) => NonZeroU32::new(b).ok_or("burst must be greater than 0")?,
        };
        let interval = period / n.get();
        let quota = Quota::with_period(interval)
            .ok_or("rate too high")?
            .allow_burst(burst);
        let names: Vec<&str> = globs.iter().map(Glob::as_str).collect();
        Ok(Limit {
            spec: format!("{names:?}|{key:?}|{n}/{period:?}|{burst}"),
            globs,
            key,
            rate: rate.to_string(),
            origin,
            interval,
            burst: burst.get(),
            limiter: Arc::new(RateLimiter::keyed(quota)),
        })
    }

    /// What identifies this limit among replicas running the same policy.
    pub fn spec(&self) -> &str {
        &self.spec
    }

    pub fn applies_to(&self, tool: &str) -> bool {
        self.globs.iter().any(|g| g.matches(tool))
    }

    /// Takes one call from the bucket of `key`; false when over the limit.
    pub fn take(&self, key: &str) -> bool {
        self.limiter.check_key(&key.to_string()).is_ok()
    }

    /// Keeps the buckets of the same limit in the policy being replaced, so a
    /// reload (a policy edit elsewhere, a new fact) does not reset the counts.
    pub fn keep_buckets_of(&mut self, old: &[Limit]) {
        if let Some(o) = old.iter().find(|o| o.spec == self.spec) {
            self.limiter = o.limiter.clone();
        }
    }

    /// Forgets keys whose buckets are full again (call periodically).
    pub fn retain_recent(&self) {
        self.limiter.retain_recent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_per_minute_allows_ten_then_refuses_per_key() {
        let l = Limit::new(
            vec![Glob::new("comm*").unwrap_or_else(|e| panic!("{e}"))],
            LimitKey::Session,
            "10/minute",
            None,
            "t".into(),
        )
        .unwrap();
        for _ in 0..10 {
            assert!(l.take("s1"));
        }
        assert!(!l.take("s1"));
        assert!(l.take("s2"), "another key has its own bucket");
        assert!(l.applies_to("comm.email") && !l.applies_to("read"));
    }

    #[test]
    fn a_reloaded_identical_limit_keeps_its_buckets_and_a_changed_one_starts_afresh() {
        let mk = |rate: &str| {
            Limit::new(
                vec![Glob::new("t").unwrap_or_else(|e| panic!("{e}"))],
                LimitKey::Session,
                rate,
                None,
                "t".into(),
            )
            .unwrap()
        };
        let old = mk("2/minute");
        assert!(old.take("s") && old.take("s") && !old.take("s"));
        let mut same = mk("2/minute");
        same.keep_buckets_of(std::slice::from_ref(&old));
        assert!(!same.take("s"), "the count survived the reload");
        let mut changed = mk("3/minute");
        changed.keep_buckets_of(std::slice::from_ref(&old));
        assert!(changed.take("s"), "a changed limit is a new limit");
    }

    #[test]
    fn bad_rates_are_errors() {
        for r in ["10", "0/minute", "x/minute", "10/fortnight"] {
            assert!(
                Limit::new(vec![], LimitKey::Global, r, None, "t".into()).is_err(),
                "{r}"
            );
        }
        assert!(Limit::new(vec![], LimitKey::Global, "1/s", Some(0), "t".into()).is_err());
    }
}
