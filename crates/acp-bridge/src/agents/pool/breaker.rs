//! The circuit breaker: when agents keep failing, stop starting them for a
//! while, so a broken agent binary cannot spin the machine.
//!
//! Owns the recent failures and the cool-down; knows nothing of slots or
//! processes. The pool's actor asks it before every start and tells it of
//! every failed start and every unexpected exit.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::Starts;

/// Failures within [`CRASH_WINDOW`] that open the circuit breaker.
pub(super) const CRASHES_TO_OPEN: usize = 5;
const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// How long an open breaker refuses to start agents.
pub(super) const BREAKER_COOL_DOWN: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
pub(super) struct Breaker {
    crashes: VecDeque<Instant>,
    /// When the cool-down of an open breaker ends.
    pub(super) open_until: Option<Instant>,
    /// Kept after the breaker closes: `!status` and a refused lease say why
    /// the agents kept failing, not only that they did.
    pub(super) last_failure: Option<String>,
    /// Why the last start failed before the agent ran; cleared by a start
    /// that gets past the spawn (see [`Starts::CannotStart`]).
    pub(super) cannot_start: Option<String>,
}

impl Breaker {
    pub(super) fn record_crash(&mut self, now: Instant, failure: String) {
        self.crashes.push_back(now);
        self.last_failure = Some(failure);
        while self
            .crashes
            .front()
            .is_some_and(|at| now.duration_since(*at) > CRASH_WINDOW)
        {
            self.crashes.pop_front();
        }
        if self.crashes.len() >= CRASHES_TO_OPEN && self.open_until.is_none() {
            self.open_until = Some(now + BREAKER_COOL_DOWN);
            tracing::error!(
                crashes = self.crashes.len(),
                window_s = CRASH_WINDOW.as_secs(),
                cool_down_s = BREAKER_COOL_DOWN.as_secs(),
                last_failure = self.last_failure.as_deref().unwrap_or_default(),
                "agents keep crashing: circuit breaker open, no respawns during the cool-down"
            );
        }
    }

    /// Opens the breaker at once: the agent cannot work as configured, and
    /// starting it again before the operator acts would only fail again.
    pub(super) fn trip(&mut self, now: Instant, failure: String) {
        tracing::error!(
            failure = %failure,
            cool_down_s = BREAKER_COOL_DOWN.as_secs(),
            "the agent cannot work as configured: circuit breaker open, no restarts during the cool-down"
        );
        self.last_failure = Some(failure);
        self.open_until = Some(now + BREAKER_COOL_DOWN);
    }

    /// Opens the breaker at once: the agent's process cannot be started
    /// (its program is gone or not executable), which is no crash.
    pub(super) fn cannot_start(&mut self, now: Instant, reason: String) {
        tracing::error!(
            reason = %reason,
            cool_down_s = BREAKER_COOL_DOWN.as_secs(),
            "agent cannot start: no new attempt during the cool-down"
        );
        self.last_failure = Some(reason.clone());
        self.cannot_start = Some(reason);
        self.open_until = Some(now + BREAKER_COOL_DOWN);
    }

    /// An agent's process started: whatever kept agents from starting is over.
    pub(super) fn spawned(&mut self) {
        self.cannot_start = None;
    }

    /// Whether agents are started now, and if not, why.
    pub(super) fn starts(&self) -> Starts {
        match (&self.cannot_start, self.open_until) {
            (Some(reason), _) => Starts::CannotStart(reason.clone()),
            (None, Some(_)) => Starts::Paused,
            (None, None) => Starts::Allowed,
        }
    }

    /// Seconds left while open; closes the breaker once the cool-down is over.
    pub(super) fn open_for(&mut self, now: Instant) -> Option<u64> {
        match self.open_until {
            Some(until) if now < until => Some((until - now).as_secs().max(1)),
            Some(_) => {
                self.open_until = None;
                self.crashes.clear();
                tracing::info!("circuit breaker closed: agents may be started again");
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaker_opens_after_repeated_failures_and_remembers_the_last_one() {
        let mut breaker = Breaker::default();
        let start = Instant::now();
        for attempt in 0..CRASHES_TO_OPEN - 1 {
            breaker.record_crash(start, format!("failure {attempt}"));
            assert_eq!(breaker.open_for(start), None, "opened early at {attempt}");
        }
        breaker.record_crash(start, "`agent` was not found".into());
        assert!(breaker.open_for(start).is_some());
        assert_eq!(breaker.last_failure.as_deref(), Some("`agent` was not found"));
        assert_eq!(
            breaker.open_for(start + BREAKER_COOL_DOWN),
            None,
            "closes after the cool-down"
        );
    }

    #[test]
    fn a_misconfiguration_opens_the_breaker_at_once() {
        let mut breaker = Breaker::default();
        let start = Instant::now();
        breaker.trip(start, "`agent` was not found".into());
        assert!(breaker.open_for(start).is_some());
        assert_eq!(breaker.open_for(start + BREAKER_COOL_DOWN), None);
    }

    #[test]
    fn an_agent_that_cannot_start_is_its_own_state_until_one_starts() {
        let mut breaker = Breaker::default();
        let start = Instant::now();
        breaker.cannot_start(start, "`agent` does not exist".into());
        assert_eq!(
            breaker.starts(),
            Starts::CannotStart("`agent` does not exist".into())
        );
        assert_eq!(breaker.open_for(start + BREAKER_COOL_DOWN), None);
        assert_eq!(
            breaker.starts(),
            Starts::CannotStart("`agent` does not exist".into()),
            "still true after the cool-down, until a start gets past the spawn"
        );
        breaker.spawned();
        assert_eq!(breaker.starts(), Starts::Allowed);
        breaker.trip(start, "refused".into());
        assert_eq!(breaker.starts(), Starts::Paused);
    }

    #[test]
    fn failures_spread_beyond_the_window_do_not_open_the_breaker() {
        let mut breaker = Breaker::default();
        let start = Instant::now();
        for attempt in 0..CRASHES_TO_OPEN * 2 {
            let at = start + (CRASH_WINDOW / 2 + Duration::from_secs(1)) * attempt as u32;
            breaker.record_crash(at, "crash".into());
            assert_eq!(breaker.open_for(at), None);
        }
    }
}
