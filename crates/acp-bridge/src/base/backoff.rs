//! Exponential backoff with full jitter, for reconnects and retries.
//!
//! Full jitter (a uniform pick in `[0, ceiling]`) spreads retries of many
//! clients apart instead of synchronising them; the ceiling doubles per
//! failure up to `max` and falls back to `min` after a success.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            min,
            max,
            failures: 0,
        }
    }

    /// The delay before the next attempt; each call counts one failure.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.failures = self.failures.saturating_add(1);
        let span = ceiling.saturating_sub(self.min);
        self.min + span.mul_f64(random_unit())
    }

    /// A backoff that has already counted `failures` (kept elsewhere, for
    /// example in the store across restarts).
    pub(crate) fn after(min: Duration, max: Duration, failures: u32) -> Self {
        Backoff { min, max, failures }
    }

    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }

    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    fn ceiling(&self) -> Duration {
        let factor = 2u32.saturating_pow(self.failures.min(16));
        self.min.saturating_mul(factor).min(self.max)
    }
}

/// A uniform draw in [0, 1) from the standard library's per-process random
/// hasher keys: good enough to spread retries, no extra crate.
fn random_unit() -> f64 {
    let bits = RandomState::new().hash_one(std::time::Instant::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_within_a_doubling_ceiling_and_reset() {
        let min = Duration::from_millis(100);
        let max = Duration::from_secs(2);
        let mut backoff = Backoff::new(min, max);
        for attempt in 0..10u32 {
            let ceiling = min.saturating_mul(2u32.pow(attempt)).min(max);
            let delay = backoff.next_delay();
            assert!(
                delay >= min && delay <= ceiling,
                "attempt {attempt}: {delay:?} > {ceiling:?}"
            );
        }
        backoff.reset();
        assert!(
            backoff.next_delay() <= min,
            "after a reset the first delay is the minimum"
        );
    }

    #[test]
    fn jitter_spreads_delays() {
        let mut delays = std::collections::BTreeSet::new();
        for _ in 0..20 {
            let mut backoff = Backoff::new(Duration::from_millis(1), Duration::from_secs(10));
            for _ in 0..5 {
                backoff.next_delay();
            }
            delays.insert(backoff.next_delay());
        }
        assert!(delays.len() > 5, "delays are not all the same: {delays:?}");
    }
}
