//! Keyed rate limiters (governor's GCRA) whose table of keys is bounded.
//!
//! governor's own keyed stores grow with every new key until `retain_recent` runs, and
//! `retain_recent` only forgets keys that are back to full quota: a client cycling through
//! IPv6 addresses (or through made-up user names) could fill memory between two sweeps. The
//! store here holds at most `capacity` keys. When a new key would exceed it, the tenth of the
//! table with the oldest theoretical arrival time (the keys closest to, or back at, full quota,
//! so the ones whose forgetting costs least) is evicted, and the evictions are counted.
//! Keys that are being limited hard have arrival times in the future and stay.

use std::collections::HashMap;
use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::nanos::Nanos;
use governor::state::StateStore;
use governor::state::keyed::ShrinkableKeyedStateStore;
use governor::{Quota, RateLimiter};

/// A keyed state store with at most `capacity` keys (see the module documentation).
pub struct BoundedStore<K> {
    map: Mutex<HashMap<K, u64>>,
    capacity: usize,
    evictions: Arc<AtomicU64>,
    /// The table's name in `psp_gateway_rate_limiter_evictions_total`.
    table: &'static str,
}

impl<K: Hash + Eq + Clone> BoundedStore<K> {
    fn new(capacity: usize, evictions: Arc<AtomicU64>, table: &'static str) -> Self {
        BoundedStore {
            map: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
            evictions,
            table,
        }
    }

    /// Makes room for one new key: drops the tenth (at least one) of the keys with the
    /// oldest theoretical arrival time.
    fn evict(&self, map: &mut HashMap<K, u64>) {
        let n = (map.len() / 10).max(1);
        let mut tats: Vec<u64> = map.values().copied().collect();
        let (_, &mut threshold, _) = tats.select_nth_unstable(n - 1);
        let before = map.len();
        // Ties at the threshold may take a few more keys with them; that is fine.
        map.retain(|_, tat| *tat > threshold);
        let evicted = u64::try_from(before - map.len()).unwrap_or(u64::MAX);
        self.evictions.fetch_add(evicted, Ordering::Relaxed);
        count_evictions(self.table, evicted);
    }
}

/// Counts keys a full table of `table` forgot to make room
/// (`psp_gateway_rate_limiter_evictions_total{table}`).
pub fn count_evictions(table: &str, evicted: u64) {
    crate::telemetry::metrics::metrics()
        .limiter_evictions
        .get_or_create(&crate::telemetry::metrics::TableLabels {
            table: table.to_owned(),
        })
        .inc_by(evicted);
}

impl<K: Hash + Eq + Clone> StateStore for BoundedStore<K> {
    type Key = K;

    fn measure_and_replace<T, F, E>(&self, key: &K, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let previous = map.get(key).copied().filter(|n| *n > 0).map(Nanos::from);
        let (outcome, tat) = f(previous)?;
        let tat = u64::from(tat);
        if let Some(v) = map.get_mut(key) {
            *v = tat;
        } else {
            if map.len() >= self.capacity {
                self.evict(&mut map);
            }
            map.insert(key.clone(), tat);
        }
        Ok(outcome)
    }
}

impl<K: Hash + Eq + Clone> ShrinkableKeyedStateStore<K> for BoundedStore<K> {
    fn retain_recent(&self, drop_below: Nanos) {
        let drop_below = u64::from(drop_below);
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, tat| *tat > drop_below);
        let keep = map.len().saturating_mul(2);
        map.shrink_to(keep);
    }

    fn len(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `requests` per `period` per key, all of them available at once (burst), refilled evenly
/// (GCRA), with a bounded table of keys.
pub struct KeyedLimiter<K: Hash + Eq + Clone> {
    limiter: RateLimiter<K, BoundedStore<K>, DefaultClock>,
    clock: DefaultClock,
    evictions: Arc<AtomicU64>,
    /// As configured: requests, period, table capacity.
    settings: (u32, Duration, usize),
}

impl<K: Hash + Eq + Clone> KeyedLimiter<K> {
    /// `table` names the key table in the metrics.
    pub fn new(requests: u32, period: Duration, capacity: usize, table: &'static str) -> Self {
        let settings = (requests, period, capacity);
        let requests = NonZeroU32::new(requests).unwrap_or(NonZeroU32::MIN);
        let period = period.max(Duration::from_secs(1));
        let per_cell = period / requests.get();
        let quota = Quota::with_period(per_cell.max(Duration::from_nanos(1)))
            .unwrap_or_else(|| Quota::per_second(requests))
            .allow_burst(requests);
        let evictions = Arc::new(AtomicU64::new(0));
        let clock = DefaultClock::default();
        KeyedLimiter {
            limiter: RateLimiter::new(
                quota,
                BoundedStore::new(capacity, evictions.clone(), table),
                clock.clone(),
            ),
            clock,
            evictions,
            settings,
        }
    }

    /// The settings it was built with: requests, period, table capacity.
    pub fn settings(&self) -> (u32, Duration, usize) {
        self.settings
    }

    /// Takes one cell for `key`; when none is left, the whole seconds until one is (at
    /// least 1, for `Retry-After`).
    pub fn check(&self, key: &K) -> Result<(), u64> {
        self.limiter.check_key(key).map_err(|not_until| {
            let wait = not_until.wait_time_from(self.clock.now());
            (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
        })
    }

    /// Forgets the keys that are back to full quota (governor's housekeeping; docs/stack.md).
    pub fn retain_recent(&self) {
        self.limiter.retain_recent();
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.limiter.len()
    }

    pub fn is_empty(&self) -> bool {
        self.limiter.is_empty()
    }

    /// Keys evicted so far because the table was full (not those `retain_recent` forgot).
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }
}

/// A request rate limit per client, as `[api] rate_limit` and `[gateway] rate_limit` write it:
/// `requests` per `period_seconds` per client, IPv6 clients counted per address block, in a
/// table of at most `max_tracked_sources` clients. Defaults: the contract's 15,000 per 5
/// minutes, /64 blocks, 100,000 clients (the gateway's section requires `requests` and
/// `period_seconds`: [`RateLimitConfig::deserialize_explicit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    #[serde(default = "default_rate_requests")]
    pub requests: u32,
    #[serde(default = "default_rate_period")]
    pub period_seconds: u64,
    /// IPv6 clients are counted per address block of this prefix length (1–128). 64: one
    /// subscriber usually holds at least a /64 (RFC 6177) and can use any address in it.
    #[serde(default = "default_ipv6_prefix")]
    pub ipv6_prefix: u8,
    /// Keys remembered at most by each limiter table this limit sizes; when full, the entries
    /// closest to full quota are forgotten (counted as evictions,
    /// `psp_gateway_rate_limiter_evictions_total{table}`). 100,000 entries of ~50 bytes: a few
    /// MB.
    #[serde(default = "default_max_tracked_sources")]
    pub max_tracked_sources: usize,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            requests: default_rate_requests(),
            period_seconds: default_rate_period(),
            ipv6_prefix: default_ipv6_prefix(),
            max_tracked_sources: default_max_tracked_sources(),
        }
    }
}

fn default_rate_requests() -> u32 {
    15_000
}

fn default_rate_period() -> u64 {
    300
}

fn default_ipv6_prefix() -> u8 {
    64
}

fn default_max_tracked_sources() -> usize {
    100_000
}

/// A rate limit whose `requests` and `period_seconds` must be written (`[gateway]
/// rate_limit`, where the limit is off unless configured).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExplicitRateLimit {
    requests: u32,
    period_seconds: u64,
    #[serde(default = "default_ipv6_prefix")]
    ipv6_prefix: u8,
    #[serde(default = "default_max_tracked_sources")]
    max_tracked_sources: usize,
}

/// Why a rate limit is refused; `section` is where it is written (`api`, `gateway`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateLimitConfigError {
    #[error("{section}.rate_limit: requests and period_seconds must be positive")]
    Zero { section: &'static str },
    #[error("{section}.rate_limit.ipv6_prefix must be between 1 and 128, not {prefix}")]
    BadIpv6Prefix { section: &'static str, prefix: u8 },
    #[error("{section}.rate_limit.max_tracked_sources must be positive")]
    NoTrackedSources { section: &'static str },
}

impl RateLimitConfig {
    /// An optional rate limit whose `requests` and `period_seconds` have no default (for
    /// `#[serde(default, deserialize_with = ...)]` on an `Option<RateLimitConfig>`).
    pub fn deserialize_explicit<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<RateLimitConfig>, D::Error> {
        let e = <ExplicitRateLimit as serde::Deserialize>::deserialize(d)?;
        Ok(Some(RateLimitConfig {
            requests: e.requests,
            period_seconds: e.period_seconds,
            ipv6_prefix: e.ipv6_prefix,
            max_tracked_sources: e.max_tracked_sources,
        }))
    }

    /// Refuses a zero count, period or table, and a prefix outside 1–128.
    pub fn validate(&self, section: &'static str) -> Result<(), RateLimitConfigError> {
        if self.requests == 0 || self.period_seconds == 0 {
            return Err(RateLimitConfigError::Zero { section });
        }
        if self.ipv6_prefix == 0 || self.ipv6_prefix > 128 {
            return Err(RateLimitConfigError::BadIpv6Prefix {
                section,
                prefix: self.ipv6_prefix,
            });
        }
        if self.max_tracked_sources == 0 {
            return Err(RateLimitConfigError::NoTrackedSources { section });
        }
        Ok(())
    }

    /// The period.
    pub fn period(&self) -> Duration {
        Duration::from_secs(self.period_seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quota_applies_per_key() {
        let l = KeyedLimiter::new(2, Duration::from_secs(300), 100, "test");
        assert_eq!(l.check(&"a"), Ok(()));
        assert_eq!(l.check(&"a"), Ok(()));
        let retry = l.check(&"a").expect_err("third is over");
        assert!((1..=150).contains(&retry), "{retry}");
        assert_eq!(l.check(&"b"), Ok(()), "another key has its own quota");
        assert_eq!(l.len(), 2);
    }

    #[test]
    fn the_table_is_bounded_and_evictions_are_counted() {
        let l = KeyedLimiter::new(5, Duration::from_secs(300), 100, "bounded-test");
        for i in 0..1_000u32 {
            assert_eq!(l.check(&i), Ok(()));
            assert!(l.len() <= 100, "{} keys after {i}", l.len());
        }
        assert!(l.evictions() >= 900, "{} evictions", l.evictions());
        assert_eq!(
            l.evictions() + l.len() as u64,
            1_000,
            "every key is held or was evicted"
        );
        let exported = crate::telemetry::metrics::metrics()
            .limiter_evictions
            .get_or_create(&crate::telemetry::metrics::TableLabels {
                table: "bounded-test".to_owned(),
            })
            .get();
        assert_eq!(
            exported,
            l.evictions(),
            "the metric counts the same evictions"
        );
    }

    #[test]
    fn a_key_being_limited_survives_eviction() {
        let l = KeyedLimiter::new(3, Duration::from_secs(300), 50, "test");
        // The flooder uses its whole quota: its arrival time is the furthest in the future.
        for _ in 0..3 {
            assert_eq!(l.check(&u32::MAX), Ok(()));
        }
        assert!(l.check(&u32::MAX).is_err());
        // Many one-off keys push the table over its bound again and again.
        for i in 0..500u32 {
            let _ = l.check(&i);
        }
        assert!(l.evictions() > 0);
        assert!(
            l.check(&u32::MAX).is_err(),
            "the limited key was not forgotten"
        );
    }

    #[test]
    fn retain_recent_keeps_limited_keys() {
        let l = KeyedLimiter::new(1, Duration::from_secs(300), 100, "test");
        assert_eq!(l.check(&"limited"), Ok(()));
        l.retain_recent();
        assert!(l.check(&"limited").is_err(), "still limited after a sweep");
        assert_eq!(l.evictions(), 0, "a sweep is not an eviction");
    }
}
