//! Per-key token buckets, for mentions per author (and any other budget).
//!
//! Owns the decision "may this key go now?" so that one noisy author cannot
//! monopolise the agent, and the shape of the answer so that a limited author
//! is told once per limited stretch rather than on every dropped mention:
//! the first refusal after an admission is [`Admission::LimitedFirst`], the
//! ones after it [`Admission::Limited`].
//!
//! Each key has a bucket of `burst` tokens; an admission takes one, and one
//! comes back every `refill_every`. Memory is bounded by `max_tracked`
//! buckets: to make room, buckets that are back to full go first (a full
//! bucket is the same as no bucket), then the least recently used one.
//!
//! It does not know what a key is, does not tell anyone anything, and has no
//! clock: time is passed in (`now`), so tests never sleep.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// The verdict on one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    Admitted,
    /// First refusal since the key was last admitted: tell them once.
    LimitedFirst,
    /// Further refusals in the same stretch: stay quiet.
    Limited,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: u32,
    /// When the tokens were last topped up; refill progress counts from here.
    refilled_at: Instant,
    /// Last attempt, for least-recently-used eviction.
    last_seen: Instant,
    /// Refused since the last admission (the author has been told).
    limited: bool,
}

/// Token buckets per key, at most `max_tracked` of them.
///
/// Making room scans the buckets (O(max_tracked)) only when a new key arrives
/// with the table full.
#[derive(Debug)]
pub(crate) struct RateLimiter<K> {
    buckets: HashMap<K, Bucket>,
    burst: u32,
    refill_every: Duration,
    max_tracked: usize,
}

impl<K: Eq + Hash + Clone> RateLimiter<K> {
    /// Buckets of `burst` tokens, one token back every `refill_every`, for at
    /// most `max_tracked` keys. A `burst` or `max_tracked` of 0 is taken as 1
    /// (a limiter that admits nobody or remembers nothing is a config slip,
    /// not a rate); a zero `refill_every` never limits.
    pub(crate) fn new(burst: u32, refill_every: Duration, max_tracked: usize) -> Self {
        RateLimiter {
            buckets: HashMap::new(),
            burst: burst.max(1),
            refill_every,
            max_tracked: max_tracked.max(1),
        }
    }

    /// A new burst and refill interval (a reload of the config file), taken
    /// as [`RateLimiter::new`] takes them. Tokens an author holds beyond the
    /// new burst are dropped; what they earned stays.
    pub(crate) fn set_rate(&mut self, burst: u32, refill_every: Duration) {
        self.burst = burst.max(1);
        self.refill_every = refill_every;
        for bucket in self.buckets.values_mut() {
            bucket.tokens = bucket.tokens.min(self.burst);
        }
    }

    /// Takes a token from `key`'s bucket if it has one.
    pub(crate) fn admit(&mut self, key: &K, now: Instant) -> Admission {
        let (burst, refill_every) = (self.burst, self.refill_every);
        if let Some(bucket) = self.buckets.get_mut(key) {
            return bucket.admit(now, burst, refill_every);
        }
        if self.buckets.len() >= self.max_tracked {
            self.make_room(now);
        }
        let mut bucket = Bucket::full(burst, now);
        let admission = bucket.admit(now, burst, refill_every);
        self.buckets.insert(key.clone(), bucket);
        admission
    }

    /// Keys with a bucket right now (never more than `max_tracked`).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.buckets.len()
    }

    /// Frees at least one slot: every bucket back to full, or else the least
    /// recently used one.
    fn make_room(&mut self, now: Instant) {
        let (burst, refill_every) = (self.burst, self.refill_every);
        self.buckets
            .retain(|_, bucket| !bucket.is_full(now, burst, refill_every));
        if self.buckets.len() < self.max_tracked {
            return;
        }
        let least_recent = self
            .buckets
            .iter()
            .min_by_key(|(_, bucket)| bucket.last_seen)
            .map(|(key, _)| key.clone());
        if let Some(key) = least_recent {
            self.buckets.remove(&key);
        }
    }
}

impl Bucket {
    fn full(burst: u32, now: Instant) -> Self {
        Bucket {
            tokens: burst,
            refilled_at: now,
            last_seen: now,
            limited: false,
        }
    }

    fn admit(&mut self, now: Instant, burst: u32, refill_every: Duration) -> Admission {
        self.refill(now, burst, refill_every);
        self.last_seen = now;
        if self.tokens > 0 {
            self.tokens -= 1;
            self.limited = false;
            Admission::Admitted
        } else if self.limited {
            Admission::Limited
        } else {
            self.limited = true;
            Admission::LimitedFirst
        }
    }

    /// Adds the tokens earned since `refilled_at`, keeping partial progress
    /// toward the next one; a full bucket restarts its clock at `now`.
    fn refill(&mut self, now: Instant, burst: u32, refill_every: Duration) {
        let earned = Self::earned(self.refilled_at, now, refill_every);
        let room = burst.saturating_sub(self.tokens);
        match u32::try_from(earned) {
            Ok(earned) if earned < room => {
                self.tokens += earned;
                self.refilled_at = refill_every
                    .checked_mul(earned)
                    .and_then(|spent| self.refilled_at.checked_add(spent))
                    .unwrap_or(now);
            }
            _ => {
                self.tokens = burst;
                self.refilled_at = now;
            }
        }
    }

    fn is_full(&self, now: Instant, burst: u32, refill_every: Duration) -> bool {
        let room = burst.saturating_sub(self.tokens);
        Self::earned(self.refilled_at, now, refill_every) >= u128::from(room)
    }

    /// Whole tokens earned between `since` and `now`; unbounded when refills are instant.
    fn earned(since: Instant, now: Instant, refill_every: Duration) -> u128 {
        if refill_every.is_zero() {
            return u128::MAX;
        }
        now.saturating_duration_since(since).as_nanos() / refill_every.as_nanos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFILL_EVERY: Duration = Duration::from_secs(10);
    const BURST: u32 = 3;

    fn limiter() -> RateLimiter<&'static str> {
        RateLimiter::new(BURST, REFILL_EVERY, 100)
    }

    fn admit_n(
        limiter: &mut RateLimiter<&'static str>,
        key: &'static str,
        n: u32,
        now: Instant,
    ) -> Vec<Admission> {
        (0..n).map(|_| limiter.admit(&key, now)).collect()
    }

    #[test]
    fn burst_is_admitted_then_told_once_then_quiet() {
        let mut limiter = limiter();
        let t0 = Instant::now();
        assert_eq!(
            admit_n(&mut limiter, "alice", BURST, t0),
            vec![Admission::Admitted; 3]
        );
        assert_eq!(limiter.admit(&"alice", t0), Admission::LimitedFirst);
        assert_eq!(admit_n(&mut limiter, "alice", 5, t0), vec![Admission::Limited; 5]);
    }

    #[test]
    fn refill_readmits_and_a_later_stretch_is_told_again() {
        let mut limiter = limiter();
        let t0 = Instant::now();
        admit_n(&mut limiter, "alice", BURST + 2, t0);
        let t1 = t0 + REFILL_EVERY;
        assert_eq!(limiter.admit(&"alice", t1), Admission::Admitted);
        assert_eq!(limiter.admit(&"alice", t1), Admission::LimitedFirst);
        assert_eq!(limiter.admit(&"alice", t1), Admission::Limited);
        let t2 = t1 + REFILL_EVERY * 10;
        assert_eq!(
            admit_n(&mut limiter, "alice", BURST, t2),
            vec![Admission::Admitted; 3]
        );
        assert_eq!(limiter.admit(&"alice", t2), Admission::LimitedFirst);
    }

    #[test]
    fn a_new_rate_holds_from_the_next_admission() {
        let mut limiter = limiter();
        let t0 = Instant::now();
        admit_n(&mut limiter, "alice", BURST, t0);
        limiter.set_rate(1, REFILL_EVERY / 10);
        let t1 = t0 + REFILL_EVERY / 10;
        assert_eq!(limiter.admit(&"alice", t1), Admission::Admitted, "the new refill");
        assert_eq!(limiter.admit(&"alice", t1), Admission::LimitedFirst);
        assert_eq!(
            admit_n(&mut limiter, "bob", 2, t1),
            [Admission::Admitted, Admission::LimitedFirst],
            "the new burst"
        );
    }

    #[test]
    fn partial_refill_progress_is_kept() {
        let mut limiter = limiter();
        let t0 = Instant::now();
        admit_n(&mut limiter, "alice", BURST, t0);
        // 15 s: one token earned, half of the next on its way.
        assert_eq!(
            limiter.admit(&"alice", t0 + Duration::from_secs(15)),
            Admission::Admitted
        );
        assert_eq!(
            limiter.admit(&"alice", t0 + Duration::from_secs(15)),
            Admission::LimitedFirst
        );
        // 20 s: the second token, although only 5 s passed since the last refill.
        assert_eq!(
            limiter.admit(&"alice", t0 + Duration::from_secs(20)),
            Admission::Admitted
        );
    }

    #[test]
    fn keys_are_independent() {
        let mut limiter = limiter();
        let t0 = Instant::now();
        admit_n(&mut limiter, "alice", BURST, t0);
        assert_eq!(limiter.admit(&"alice", t0), Admission::LimitedFirst);
        assert_eq!(
            admit_n(&mut limiter, "bob", BURST, t0),
            vec![Admission::Admitted; 3]
        );
        assert_eq!(limiter.admit(&"bob", t0), Admission::LimitedFirst);
        assert_eq!(limiter.admit(&"alice", t0), Admission::Limited);
    }

    #[test]
    fn bound_holds_with_ten_thousand_authors_in_a_minute() {
        let max_tracked = 100;
        let mut limiter = RateLimiter::new(BURST, REFILL_EVERY, max_tracked);
        let t0 = Instant::now();
        for n in 0..10_000u64 {
            let now = t0 + Duration::from_millis(n * 6);
            assert_eq!(limiter.admit(&n, now), Admission::Admitted);
            assert!(limiter.tracked() <= max_tracked);
        }
        assert_eq!(limiter.tracked(), max_tracked);
    }

    #[test]
    fn full_buckets_are_dropped_before_the_least_recently_used() {
        let mut limiter = RateLimiter::new(2, REFILL_EVERY, 2);
        let t0 = Instant::now();
        // alice: least recently used, and still owes tokens at t0 + 12 s.
        admit_n(&mut limiter, "alice", 3, t0);
        // bob: more recent, but back to full by t0 + 11 s.
        limiter.admit(&"bob", t0 + Duration::from_secs(1));
        let now = t0 + Duration::from_secs(12);
        limiter.admit(&"carol", now);
        assert_eq!(limiter.tracked(), 2);
        assert!(limiter.buckets.contains_key("alice"));
        assert!(!limiter.buckets.contains_key("bob"));
        assert_eq!(limiter.admit(&"alice", now), Admission::Admitted);
        assert_eq!(limiter.admit(&"alice", now), Admission::LimitedFirst);
    }

    #[test]
    fn without_full_buckets_the_least_recently_used_goes() {
        let mut limiter = RateLimiter::new(1, REFILL_EVERY, 2);
        let t0 = Instant::now();
        limiter.admit(&"alice", t0);
        limiter.admit(&"bob", t0 + Duration::from_secs(1));
        limiter.admit(&"alice", t0 + Duration::from_secs(2));
        limiter.admit(&"carol", t0 + Duration::from_secs(3));
        assert_eq!(limiter.tracked(), 2);
        assert!(limiter.buckets.contains_key("alice"));
        assert!(!limiter.buckets.contains_key("bob"));
    }

    #[test]
    fn degenerate_settings_still_behave() {
        let t0 = Instant::now();
        let mut no_burst = RateLimiter::new(0, REFILL_EVERY, 0);
        assert_eq!(no_burst.admit(&(), t0), Admission::Admitted);
        assert_eq!(no_burst.admit(&(), t0), Admission::LimitedFirst);
        assert_eq!(no_burst.tracked(), 1);
        let mut instant_refill = RateLimiter::new(1, Duration::ZERO, 1);
        assert_eq!(
            admit_n(&mut instant_refill, "alice", 5, t0),
            vec![Admission::Admitted; 5]
        );
    }
}
