//! Failed logins counted per key (a source address, a user name, or both), in a table whose
//! number of keys is bounded; and the bounded lane of answers slowed down for a user name
//! under attack.
//!
//! A [`FailureLedger`] keeps, per key, the time at which its failures will have leaked away
//! (GCRA, as governor keeps a theoretical arrival time): each failure adds `period / limit`,
//! and a key whose next failure would take it beyond `period` from now is at its limit. Unlike
//! governor's limiters it can be read without charging ([`FailureLedger::failures`]), and a
//! charge can be given back ([`FailureLedger::refund`]), so that a verification is charged
//! before it runs (a burst of concurrent attempts cannot overrun the limit) and only a failed
//! one stays counted. Time comes in as an argument: the ledger never reads the clock.
//!
//! It also remembers when a key's last failure was confirmed ([`FailureLedger::fail`]), so
//! that "this source has failed for this name within the period" can be asked
//! ([`FailureLedger::failed_recently`]); a key is kept for a period after its last failure.
//!
//! Bound: at most `capacity` keys. A new key in a full table first drops the keys whose
//! failures have leaked away (and whose last failure is a period old), then, if still full, the tenth of the table with the fewest
//! failures left (the keys whose forgetting costs least; a key being refused has the most and
//! stays): amortised, a few operations per insertion. Evictions are counted in
//! `psp_gateway_rate_limiter_evictions_total{table}`.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What a [`FailureLedger`] keeps of one key.
#[derive(Clone, Copy)]
struct Entry {
    /// When its failures (and charges awaiting their verification) will have leaked away.
    until: Instant,
    /// When its last failure was confirmed.
    last: Option<Instant>,
}

/// Failed logins per key: `limit` per `period`, refilled evenly.
pub(super) struct FailureLedger<K> {
    map: Mutex<HashMap<K, Entry>>,
    limit: u32,
    period: Duration,
    /// `period / limit`: what one failure adds.
    per_failure: Duration,
    capacity: usize,
    evictions: AtomicU64,
    /// The table's name in the evictions metric.
    table: &'static str,
}

impl<K: Hash + Eq + Clone> FailureLedger<K> {
    pub(super) fn new(limit: u32, period: Duration, capacity: usize, table: &'static str) -> Self {
        let limit = limit.max(1);
        let period = period.max(Duration::from_secs(1));
        FailureLedger {
            map: Mutex::new(HashMap::new()),
            limit,
            period,
            per_failure: (period / limit).max(Duration::from_nanos(1)),
            capacity: capacity.max(1),
            evictions: AtomicU64::new(0),
            table,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, Entry>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Failures of `key` not yet leaked away at `now` (rounded up; 0 for an unknown key).
    #[cfg(test)]
    pub(super) fn failures(&self, key: &K, now: Instant) -> u32 {
        self.lock()
            .get(key)
            .map_or(0, |entry| self.count(entry.until, now))
    }

    /// Whether `key` had a failure confirmed within the last period.
    #[cfg(test)]
    pub(super) fn failed_recently(&self, key: &K, now: Instant) -> bool {
        self.lock().get(key).is_some_and(|entry| {
            self.live(entry, now) && entry.last.is_some_and(|l| l + self.period > now)
        })
    }

    /// Whether an entry still says something at `now`.
    fn live(&self, entry: &Entry, now: Instant) -> bool {
        entry.until > now || entry.last.is_some_and(|l| l + self.period > now)
    }

    /// Confirms a failure of `key` charged before (its verification failed).
    pub(super) fn fail(&self, key: &K, now: Instant) {
        if let Some(entry) = self.lock().get_mut(key) {
            entry.last = Some(now);
        }
    }

    fn count(&self, until: Instant, now: Instant) -> u32 {
        let left = until.saturating_duration_since(now);
        let whole = left.as_nanos().div_ceil(self.per_failure.as_nanos().max(1));
        u32::try_from(whole).unwrap_or(u32::MAX)
    }

    /// Counts one failure of `key` at `now`, unless it is at its limit: then nothing is
    /// counted and the whole seconds until one more is allowed (at least 1) are returned.
    /// `Ok(true)` when the key was clean before: nothing counted (no failure, and no charge
    /// awaiting its verification) and no failure confirmed within the period. Read and
    /// charged at once, so of concurrent attempts with one key, one at most finds it clean.
    pub(super) fn charge(&self, key: &K, now: Instant) -> Result<bool, u64> {
        let mut map = self.lock();
        let clean = map.get(key).is_none_or(|entry| {
            entry.until <= now && entry.last.is_none_or(|l| l + self.period <= now)
        });
        let current = map.get(key).map(|e| e.until).filter(|until| *until > now);
        if let Some(until) = current
            && self.count(until, now) >= self.limit
        {
            // One more is allowed once no more than `limit - 1` failures are left.
            let wait = until
                .saturating_duration_since(now)
                .saturating_sub(self.per_failure * (self.limit - 1));
            return Err((wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1));
        }
        let until = current.unwrap_or(now) + self.per_failure;
        if let Some(entry) = map.get_mut(key) {
            entry.until = until;
        } else {
            if map.len() >= self.capacity {
                self.evict(&mut map, now);
            }
            map.insert(key.clone(), Entry { until, last: None });
        }
        Ok(clean)
    }

    /// Gives back one charge of `key` (the verification it was taken for succeeded, or never
    /// ran).
    pub(super) fn refund(&self, key: &K, now: Instant) {
        let mut map = self.lock();
        if let Some(entry) = map.get_mut(key) {
            entry.until = entry
                .until
                .checked_sub(self.per_failure)
                .unwrap_or(now)
                .max(now);
            if !self.live(entry, now) {
                map.remove(key);
            }
        }
    }

    /// Forgets the keys whose failures have leaked away, last confirmed a period ago or more
    /// (run periodically).
    pub(super) fn retain_recent(&self, now: Instant) {
        let mut map = self.lock();
        map.retain(|_, entry| self.live(entry, now));
        let keep = map.len().saturating_mul(2);
        map.shrink_to(keep);
    }

    /// Keys held now.
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Keys evicted so far because the table was full.
    pub(super) fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Makes room for one new key (see the module documentation).
    fn evict(&self, map: &mut HashMap<K, Entry>, now: Instant) {
        // A tenth of the table freed at a time keeps the scans to a few per insertion.
        let tenth = (self.capacity / 10).max(1);
        map.retain(|_, entry| self.live(entry, now));
        if map.len() + tenth <= self.capacity {
            return;
        }
        let n = tenth.min(map.len());
        let mut untils: Vec<Instant> = map.values().map(|e| e.until).collect();
        let (_, &mut threshold, _) = untils.select_nth_unstable(n - 1);
        let before = map.len();
        // Ties at the threshold may take a few more keys with them; that is fine.
        map.retain(|_, entry| entry.until > threshold);
        let evicted = u64::try_from(before - map.len()).unwrap_or(u64::MAX);
        self.evictions.fetch_add(evicted, Ordering::Relaxed);
        crate::server::count_evictions(self.table, evicted);
    }
}

/// The answers slowed down for user names under attack: at most `per_user` per name and
/// `total` in all are held at once; each is held for `delay` from the end of its failed
/// verification, whether or not its client waits for the answer.
pub(super) struct SlowLane<K> {
    held: Mutex<(HashMap<K, usize>, usize)>,
    per_user: usize,
    total: usize,
    delay: Duration,
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> SlowLane<K> {
    pub(super) fn new(per_user: usize, total: usize, delay: Duration) -> Arc<Self> {
        Arc::new(SlowLane {
            held: Mutex::new((HashMap::new(), 0)),
            per_user: per_user.max(1),
            total: total.max(1),
            delay,
        })
    }

    /// A place in the lane for `user`, or `None` when the name's places or all places are
    /// taken.
    pub(super) fn enter(self: &Arc<Self>, user: &K) -> Option<SlowPlace<K>> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let (by_user, total) = &mut *held;
        if *total >= self.total || by_user.get(user).copied().unwrap_or(0) >= self.per_user {
            return None;
        }
        *by_user.entry(user.clone()).or_insert(0) += 1;
        *total += 1;
        Some(SlowPlace {
            lane: self.clone(),
            user: Some(user.clone()),
        })
    }

    /// Places held now, in all.
    pub(super) fn held(&self) -> usize {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).1
    }

    /// How long a place is held after a failed verification.
    pub(super) fn delay(&self) -> Duration {
        self.delay
    }

    fn leave(&self, user: &K) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let (by_user, total) = &mut *held;
        if let Some(n) = by_user.get_mut(user) {
            *n -= 1;
            if *n == 0 {
                by_user.remove(user);
            }
            *total -= 1;
        }
    }
}

/// A place in the [`SlowLane`]. Given back at once by [`SlowPlace::leave_now`] (the password
/// was right, or was never verified); dropped otherwise (a failure, or a client that hung up),
/// it is given back [`SlowLane::delay`] later by a timer task: a client that stops waiting
/// does not free its place sooner.
pub(super) struct SlowPlace<K: Hash + Eq + Clone + Send + Sync + 'static> {
    lane: Arc<SlowLane<K>>,
    user: Option<K>,
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> SlowPlace<K> {
    pub(super) fn leave_now(mut self) {
        if let Some(user) = self.user.take() {
            self.lane.leave(&user);
        }
    }
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> Drop for SlowPlace<K> {
    fn drop(&mut self) {
        let Some(user) = self.user.take() else {
            return;
        };
        let lane = self.lane.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(lane.delay).await;
                    lane.leave(&user);
                });
            }
            // No runtime to wait on (shutting down): nothing is served any more.
            Err(_) => lane.leave(&user),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_secs(300);

    #[test]
    fn failures_are_counted_up_to_the_limit_and_leak_away_evenly() {
        let ledger = FailureLedger::new(3, PERIOD, 100, "test");
        let t0 = Instant::now();
        for n in 0..3 {
            assert_eq!(ledger.failures(&"k", t0), n);
            assert_eq!(
                ledger.charge(&"k", t0),
                Ok(n == 0),
                "clean before the first only"
            );
        }
        let wait = ledger.charge(&"k", t0).expect_err("the fourth is over");
        assert_eq!(wait, 100, "one failure leaks away every 100 s");
        assert_eq!(ledger.failures(&"k", t0), 3, "a refusal is not counted");
        assert_eq!(ledger.failures(&"other", t0), 0);
        let later = t0 + Duration::from_secs(100);
        assert_eq!(ledger.failures(&"k", later), 2);
        assert_eq!(ledger.charge(&"k", later), Ok(false));
        assert!(ledger.charge(&"k", later).is_err());
        // A refund gives one back; the last one removes the key.
        ledger.refund(&"k", later);
        assert_eq!(ledger.failures(&"k", later), 2);
        ledger.refund(&"k", later);
        ledger.refund(&"k", later);
        assert_eq!(ledger.len(), 0);
        ledger.refund(&"k", later);
        assert_eq!(ledger.failures(&"k", later), 0);
        assert!(
            !ledger.failed_recently(&"k", later),
            "charged, never confirmed"
        );
    }

    #[test]
    fn a_confirmed_failure_is_remembered_for_a_period() {
        let ledger = FailureLedger::new(10, PERIOD, 100, "test");
        let t0 = Instant::now();
        assert_eq!(ledger.charge(&"k", t0), Ok(true));
        assert!(!ledger.failed_recently(&"k", t0), "not yet confirmed");
        ledger.fail(&"k", t0);
        // Its one failure leaks away in 30 s; it is remembered as a failure for 300 s.
        let t1 = t0 + Duration::from_secs(31);
        assert_eq!(ledger.failures(&"k", t1), 0);
        assert!(ledger.failed_recently(&"k", t1));
        assert_eq!(
            ledger.charge(&"k", t1),
            Ok(false),
            "not clean: it failed lately"
        );
        ledger.refund(&"k", t1);
        ledger.retain_recent(t1);
        assert_eq!(ledger.len(), 1);
        let t2 = t0 + PERIOD;
        assert!(!ledger.failed_recently(&"k", t2));
        ledger.retain_recent(t2);
        assert_eq!(ledger.len(), 0);
    }

    #[test]
    fn the_table_stays_at_its_bound_and_keeps_the_keys_with_most_failures() {
        let ledger = FailureLedger::new(5, PERIOD, 1_000, "ledger-test");
        let t0 = Instant::now();
        for _ in 0..5 {
            ledger.charge(&u32::MAX, t0).expect("within the limit");
        }
        for i in 0..100_000u32 {
            let _ = ledger.charge(&i, t0);
            assert!(ledger.len() <= 1_000, "{} keys after {i}", ledger.len());
        }
        assert!(ledger.evictions() >= 99_000, "{}", ledger.evictions());
        assert!(
            ledger.charge(&u32::MAX, t0).is_err(),
            "the key at its limit survived 100,000 one-off keys"
        );
        // Leaked-away keys are dropped by the sweep, or by the next insertion into a full
        // table, without counting as evictions.
        let evictions = ledger.evictions();
        let much_later = t0 + PERIOD * 2;
        for i in 0..1_000u32 {
            ledger.charge(&(200_000 + i), t0 + PERIOD).expect("charge");
        }
        ledger.charge(&7_000_000, much_later).expect("charge");
        assert_eq!(ledger.len(), 1, "the full table's keys had all leaked away");
        assert_eq!(ledger.evictions() - evictions, 0);
        ledger.retain_recent(much_later + PERIOD);
        assert_eq!(ledger.len(), 0);
    }

    #[tokio::test]
    async fn the_slow_lane_holds_a_bounded_number_of_places() {
        let lane = SlowLane::new(2, 3, Duration::from_secs(3600));
        let a1 = lane.enter(&"a").expect("first place");
        let a2 = lane.enter(&"a").expect("second place");
        assert!(lane.enter(&"a").is_none(), "two per name");
        let b1 = lane.enter(&"b").expect("another name");
        assert!(lane.enter(&"c").is_none(), "three in all");
        assert_eq!(lane.held(), 3);
        a1.leave_now();
        assert_eq!(lane.held(), 2);
        // Dropped (a failure, or a client that hung up): held for the delay still.
        drop(a2);
        assert_eq!(lane.held(), 2);
        assert!(lane.enter(&"a").is_some_and(|p| {
            p.leave_now();
            true
        }));
        b1.leave_now();
        assert_eq!(
            lane.held(),
            1,
            "only the dropped place, until its delay ends"
        );
    }
}
