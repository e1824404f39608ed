//! The upstream host's addresses: an IP literal as written; a name looked up
//! at most once per [`FRESH`] (one lookup however many connections wait for
//! it), and again at once after a connect to every address failed.
//!
//! Looked up on every connect, a name cost each new connection a lookup on
//! tokio's blocking threads: a burst of a thousand new streams started a
//! thousand lookups at once (and as many threads), and their first bytes
//! waited behind them. Each address family keeps its place in the system
//! resolver's order (its preference between IPv6 and IPv4), and connections
//! take that family's addresses in turn, so a name that resolves to several
//! replicas still spreads new connections over them. When a lookup fails the
//! last addresses found are tried for another [`FRESH`] (a connect that then
//! fails forgets them).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::{BoxFuture, FutureExt, Shared};

/// How long the addresses of a name are used before it is looked up again.
pub const FRESH: Duration = Duration::from_secs(10);

/// The addresses of one upstream host and port.
pub struct Resolver {
    host: String,
    port: u16,
    /// An IP literal's one address: never looked up.
    fixed: Option<SocketAddr>,
    kept: Mutex<Option<Kept>>,
    /// The lookup under way: every connection waiting awaits the same one,
    /// and all are woken together when it ends (a lock handed from waiter
    /// to waiter would wake them one scheduler turn after another).
    looking: Mutex<Option<Lookup>>,
    /// How many connections asked: the turn their family's addresses take.
    turn: AtomicUsize,
    /// Lookups made (the tests count them).
    lookups: AtomicU64,
}

struct Kept {
    addrs: Arc<[SocketAddr]>,
    at: Instant,
}

/// One lookup of the name, awaited by every connection that needs it.
type Lookup = Shared<BoxFuture<'static, Result<Vec<SocketAddr>, Arc<io::Error>>>>;

impl Resolver {
    pub fn new(host: &str, port: u16) -> Resolver {
        Resolver {
            host: host.to_string(),
            port,
            fixed: host
                .parse::<IpAddr>()
                .ok()
                .map(|ip| SocketAddr::new(ip, port)),
            kept: Mutex::new(None),
            looking: Mutex::new(None),
            turn: AtomicUsize::new(0),
            lookups: AtomicU64::new(0),
        }
    }

    /// The addresses a new connection tries, in the order it tries them.
    pub async fn addrs(&self) -> io::Result<Vec<SocketAddr>> {
        if let Some(a) = self.fixed {
            return Ok(vec![a]);
        }
        let all = self.found_at(Instant::now()).await?;
        Ok(in_turn(&all, self.turn.fetch_add(1, Ordering::Relaxed)))
    }

    /// Forgets the addresses found: a connect to every one of them failed,
    /// so the next connection looks the name up again.
    pub fn forget(&self) {
        if let Ok(mut k) = self.kept.lock() {
            *k = None;
        }
    }

    /// The addresses found for the name, looked up when none are fresh at
    /// `now`.
    async fn found_at(&self, now: Instant) -> io::Result<Arc<[SocketAddr]>> {
        if let Some(a) = self.fresh(now) {
            return Ok(a);
        }
        let lookup = self.lookup()?;
        let found = lookup.clone().await;
        let found = found.map_err(|e| io::Error::new(e.kind(), e.to_string()));
        let mut looking = self.looking.lock().map_err(|_| poisoned())?;
        // The first connection back keeps what was found (under this lock,
        // so none starts another lookup meanwhile, and a failure is logged
        // once); the others read what it kept.
        if looking.as_ref().is_some_and(|l| l.ptr_eq(&lookup)) {
            let settled = self.settle(found, now);
            *looking = None;
            return settled;
        }
        drop(looking);
        match self.fresh(now) {
            Some(a) => Ok(a),
            None => non_empty(found).map(Into::into),
        }
    }

    /// The lookup under way, or a new one.
    fn lookup(&self) -> io::Result<Lookup> {
        let mut l = self.looking.lock().map_err(|_| poisoned())?;
        if let Some(l) = l.as_ref() {
            return Ok(l.clone());
        }
        self.lookups.fetch_add(1, Ordering::Relaxed);
        let (host, port) = (self.host.clone(), self.port);
        let lookup = async move {
            tokio::net::lookup_host((host.as_str(), port))
                .await
                .map(Iterator::collect)
                .map_err(Arc::new)
        }
        .boxed()
        .shared();
        *l = Some(lookup.clone());
        Ok(lookup)
    }

    /// The addresses kept, unless they are older than [`FRESH`] at `now`.
    fn fresh(&self, now: Instant) -> Option<Arc<[SocketAddr]>> {
        let k = self.kept.lock().ok()?;
        let k = k.as_ref()?;
        (now.saturating_duration_since(k.at) < FRESH).then(|| k.addrs.clone())
    }

    /// Keeps what a lookup at `now` found; a failed or empty one keeps the
    /// last addresses for another [`FRESH`], when there are any.
    fn settle(
        &self,
        found: io::Result<Vec<SocketAddr>>,
        now: Instant,
    ) -> io::Result<Arc<[SocketAddr]>> {
        let mut kept = self.kept.lock().map_err(|_| poisoned())?;
        let addrs: Arc<[SocketAddr]> = match (non_empty(found), kept.as_ref()) {
            (Ok(v), _) => v.into(),
            (Err(e), Some(last)) => {
                tracing::warn!(host = %self.host, error = %e, "upstream name lookup failed; its last addresses are used");
                last.addrs.clone()
            }
            (Err(e), None) => return Err(e),
        };
        *kept = Some(Kept {
            addrs: addrs.clone(),
            at: now,
        });
        Ok(addrs)
    }
}

/// A lock another thread panicked while holding.
fn poisoned() -> io::Error {
    io::Error::other("the upstream's addresses are unavailable")
}

/// What a lookup found, an error when it found nothing.
fn non_empty(found: io::Result<Vec<SocketAddr>>) -> io::Result<Vec<SocketAddr>> {
    match found {
        Ok(v) if v.is_empty() => Err(io::Error::new(
            io::ErrorKind::NotFound,
            "the upstream host has no addresses",
        )),
        found => found,
    }
}

/// `all` in the order connection number `turn` tries them: each family where
/// it first appears in `all`, its own addresses rotated by `turn`.
fn in_turn(all: &[SocketAddr], turn: usize) -> Vec<SocketAddr> {
    let mut out = Vec::with_capacity(all.len());
    let mut families: Vec<bool> = Vec::with_capacity(2);
    for a in all {
        if !families.contains(&a.is_ipv6()) {
            families.push(a.is_ipv6());
        }
    }
    for v6 in families {
        let same: Vec<SocketAddr> = all.iter().copied().filter(|a| a.is_ipv6() == v6).collect();
        let k = turn % same.len();
        out.extend_from_slice(&same[k..]);
        out.extend_from_slice(&same[..k]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookups(r: &Resolver) -> u64 {
        r.lookups.load(Ordering::Relaxed)
    }

    #[tokio::test]
    async fn an_ip_literal_is_never_looked_up() {
        for (host, want) in [("127.0.0.1", "127.0.0.1:8000"), ("::1", "[::1]:8000")] {
            let r = Resolver::new(host, 8000);
            for _ in 0..3 {
                let got = r.addrs().await.unwrap();
                assert_eq!(got, vec![want.parse::<SocketAddr>().unwrap()]);
            }
            assert_eq!(lookups(&r), 0);
        }
    }

    #[tokio::test]
    async fn a_name_is_looked_up_once_while_fresh() {
        let r = Resolver::new("localhost", 8000);
        let first = r.addrs().await.unwrap();
        assert!(!first.is_empty());
        assert!(first
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 8000));
        for _ in 0..5 {
            let again = r.addrs().await.unwrap();
            assert_eq!(again.len(), first.len());
        }
        assert_eq!(lookups(&r), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_of_connections_waits_for_one_lookup() {
        let r = Arc::new(Resolver::new("localhost", 8000));
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let r = r.clone();
                tokio::spawn(async move { r.addrs().await.map(|a| a.len()) })
            })
            .collect();
        for t in tasks {
            assert!(t.await.unwrap().unwrap() > 0);
        }
        assert_eq!(lookups(&r), 1);
    }

    #[tokio::test]
    async fn a_name_is_looked_up_again_once_stale_or_forgotten() {
        let r = Resolver::new("localhost", 8000);
        let now = Instant::now();
        r.found_at(now).await.unwrap();
        r.found_at(now + FRESH / 2).await.unwrap();
        assert_eq!(lookups(&r), 1);
        r.found_at(now + FRESH).await.unwrap();
        assert_eq!(lookups(&r), 2);
        r.forget();
        r.found_at(now + FRESH).await.unwrap();
        assert_eq!(lookups(&r), 3);
    }

    #[test]
    fn a_failed_lookup_keeps_the_last_addresses_and_an_empty_one_is_an_error() {
        let r = Resolver::new("upstream.example", 443);
        let now = Instant::now();
        let none = r.settle(Ok(Vec::new()), now).unwrap_err();
        assert_eq!(none.kind(), io::ErrorKind::NotFound);
        let failed = || Err(io::Error::other("no resolver"));
        assert!(r.settle(failed(), now).is_err());
        let a: SocketAddr = "10.0.0.7:443".parse().unwrap();
        assert_eq!(&*r.settle(Ok(vec![a]), now).unwrap(), &[a]);
        let later = now + FRESH * 2;
        assert_eq!(&*r.settle(failed(), later).unwrap(), &[a]);
        // Kept for another while from the failed lookup on.
        assert!(r.fresh(later + FRESH / 2).is_some());
        r.forget();
        assert!(r.settle(failed(), later).is_err());
    }

    #[test]
    fn each_family_keeps_its_place_and_takes_its_addresses_in_turn() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let all = [
            a("[2001:db8::1]:443"),
            a("10.0.0.1:443"),
            a("[2001:db8::2]:443"),
            a("10.0.0.2:443"),
            a("10.0.0.3:443"),
        ];
        let order = |turn| in_turn(&all, turn);
        assert_eq!(
            order(0),
            [all[0], all[2], all[1], all[3], all[4]],
            "IPv6 first, as the resolver put it"
        );
        assert_eq!(order(1), [all[2], all[0], all[3], all[4], all[1]]);
        assert_eq!(order(2), [all[0], all[2], all[4], all[1], all[3]]);
        let firsts: std::collections::HashSet<SocketAddr> =
            (0..6).map(|t| in_turn(&all[1..], t)[0]).collect();
        assert_eq!(firsts.len(), 3, "new connections spread over the replicas");
    }
}
