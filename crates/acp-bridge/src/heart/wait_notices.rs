//! The global budget of waiting notices (`--wait-notice-after`): a
//! stranger's flood that queues must not become a flood of notices. Which
//! mention is due one, and its words, are the core's (`waiting`,
//! `conversations`); the heart asks this budget before it sends each.

use std::time::{Duration, Instant};

use crate::policy::rate_limit::{Admission, RateLimiter};

/// Waiting notices the whole daemon may send at once.
const WAIT_NOTICE_BURST: u32 = 10;
/// One more waiting notice may go out every this long once the burst is spent.
const WAIT_NOTICE_REFILL: Duration = Duration::from_secs(6);

/// The global budget of waiting notices.
#[derive(Debug)]
pub(super) struct NoticeBudget(RateLimiter<()>);

impl Default for NoticeBudget {
    fn default() -> Self {
        NoticeBudget(RateLimiter::new(WAIT_NOTICE_BURST, WAIT_NOTICE_REFILL, 1))
    }
}

impl NoticeBudget {
    /// Whether the budget allows one more notice now.
    pub(super) fn admit(&mut self, now: Instant) -> bool {
        self.0.admit(&(), now) == Admission::Admitted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_global_budget_holds_back_a_flood_of_notices() {
        let mut budget = NoticeBudget::default();
        let now = Instant::now();
        let admitted = (0..WAIT_NOTICE_BURST * 3).filter(|_| budget.admit(now)).count();
        assert_eq!(admitted, WAIT_NOTICE_BURST as usize);
        assert!(budget.admit(now + WAIT_NOTICE_REFILL));
    }
}
