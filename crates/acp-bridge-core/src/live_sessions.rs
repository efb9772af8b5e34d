//! Bounds on what is live: which of a pool's live sessions to close, and
//! when (`--session-idle`, `--max-live-sessions`).
//!
//! Owns the pure choice only: a session's activity (its last turn's end,
//! the turns on it now), the sessions idle past the limit, the least
//! recently used idle one, and when the next becomes due. How a session is
//! closed (`session/close`, or its agent stopped) and what closing releases
//! is the pool's actor's. No IO, no clock of its own: `now` comes in.
//!
//! The bounds are per pool, that is per agent profile: each profile's
//! actor owns its sessions, so it can close one without asking another
//! task, and a profile that bursts never closes another profile's
//! sessions. With one profile (the default) that is the machine's bound;
//! with several, the operator gives each profile its share.

use std::ops::Add;
use std::time::Duration;

/// A point in time the choice compares: the pool's clock (tokio's
/// `Instant`, which its tests pause) or `std`'s. Generic so that this
/// crate needs no runtime.
pub trait Moment: Copy + Ord + Add<Duration, Output = Self> {}

impl<T: Copy + Ord + Add<Duration, Output = T>> Moment for T {}

/// How long a quiet conversation's session stays live, and how many may.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveBounds {
    /// `--session-idle`: a session without a turn for this long is closed;
    /// `None`: never.
    pub session_idle: Option<Duration>,
    /// `--max-live-sessions`: sessions live at once in one pool; `None`:
    /// unbounded.
    pub max_live_sessions: Option<usize>,
}

/// What a live session is doing: the turns on it now, and when its last
/// one ended (or it was opened).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activity<Instant> {
    /// Turns leased on the session and not yet released.
    turns: usize,
    last_turn: Instant,
}

impl<Instant: Moment> Activity<Instant> {
    /// A session opened for a turn that holds it now.
    pub fn opened_for_turn(now: Instant) -> Self {
        Activity {
            turns: 1,
            last_turn: now,
        }
    }

    /// A turn leases the session.
    pub fn begin(&mut self) {
        self.turns += 1;
    }

    /// A turn on the session ended at `now`.
    pub fn end(&mut self, now: Instant) {
        self.turns = self.turns.saturating_sub(1);
        self.last_turn = now;
    }

    /// Since when no turn runs on the session; `None` while one does.
    pub fn idle_since(&self) -> Option<Instant> {
        (self.turns == 0).then_some(self.last_turn)
    }

    /// When the session has been idle for `limit`; `None` while a turn runs.
    pub fn idle_due(&self, limit: Duration) -> Option<Instant> {
        self.idle_since().map(|since| since + limit)
    }
}

/// The sessions idle for `limit` or longer at `now`.
pub fn idle_past<'a, K, Instant: Moment + 'a>(
    sessions: impl IntoIterator<Item = (&'a K, &'a Activity<Instant>)>,
    now: Instant,
    limit: Duration,
) -> Vec<&'a K>
where
    K: 'a,
{
    sessions
        .into_iter()
        .filter(|(_, activity)| activity.idle_due(limit).is_some_and(|due| due <= now))
        .map(|(key, _)| key)
        .collect()
}

/// The idle session whose last turn ended longest ago: the one to close
/// when the pool is full. `None` when every session has a turn running.
pub fn least_recently_used<'a, K, Instant: Moment + 'a>(
    sessions: impl IntoIterator<Item = (&'a K, &'a Activity<Instant>)>,
) -> Option<&'a K>
where
    K: 'a,
{
    sessions
        .into_iter()
        .filter_map(|(key, activity)| activity.idle_since().map(|since| (since, key)))
        .min_by_key(|(since, _)| *since)
        .map(|(_, key)| key)
}

/// When one agent's sessions are due to close, gathered one session at a
/// time (the actor makes one pass over all sessions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentDues<Instant> {
    earliest: Option<Instant>,
    latest: Option<Instant>,
    busy: bool,
}

impl<Instant> Default for AgentDues<Instant> {
    fn default() -> Self {
        AgentDues {
            earliest: None,
            latest: None,
            busy: false,
        }
    }
}

impl<Instant: Moment> AgentDues<Instant> {
    /// Counts a session of the agent, idle for `limit` at its due.
    pub fn add(&mut self, activity: &Activity<Instant>, limit: Duration) {
        match activity.idle_due(limit) {
            Some(due) => {
                self.earliest = self.earliest.into_iter().chain(Some(due)).min();
                self.latest = self.latest.max(Some(due));
            }
            None => self.busy = true,
        }
    }

    /// When its first session is due to close: for an agent that closes
    /// sessions one by one.
    pub fn first_idle(&self) -> Option<Instant> {
        self.earliest
    }

    /// When every one of its sessions has been idle for the limit: the
    /// moment an agent that cannot close a session may be stopped instead.
    /// `None` while any has a turn running, or when it has none.
    pub fn all_idle(&self) -> Option<Instant> {
        if self.busy { None } else { self.latest }
    }
}

/// [`AgentDues::all_idle`] of `sessions`.
pub fn all_idle_due<'a, Instant: Moment + 'a>(
    sessions: impl IntoIterator<Item = &'a Activity<Instant>>,
    limit: Duration,
) -> Option<Instant> {
    let mut dues = AgentDues::default();
    for activity in sessions {
        dues.add(activity, limit);
    }
    dues.all_idle()
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    const LIMIT: Duration = Duration::from_secs(60);

    fn ended_at(at: Instant) -> Activity<Instant> {
        let mut activity = Activity::opened_for_turn(at);
        activity.end(at);
        activity
    }

    #[test]
    fn a_session_is_idle_past_the_limit_only_once_its_turns_ended_that_long_ago() {
        let start = Instant::now();
        let old = ended_at(start);
        let recent = ended_at(start + Duration::from_secs(30));
        let mut busy = ended_at(start);
        busy.begin();
        let sessions = [("old", old), ("recent", recent), ("busy", busy)];
        let at = start + LIMIT;
        let idle = idle_past(sessions.iter().map(|(key, activity)| (key, activity)), at, LIMIT);
        assert_eq!(idle, vec![&"old"]);
    }

    #[test]
    fn a_session_with_a_turn_running_is_never_due() {
        let mut activity = Activity::opened_for_turn(Instant::now());
        assert_eq!(activity.idle_due(LIMIT), None);
        activity.begin();
        activity.end(Instant::now());
        assert_eq!(activity.idle_due(LIMIT), None, "one turn still runs");
        let ended = Instant::now();
        activity.end(ended);
        assert_eq!(activity.idle_due(LIMIT), Some(ended + LIMIT));
    }

    #[test]
    fn the_least_recently_used_idle_session_is_chosen_and_busy_ones_never() {
        let start = Instant::now();
        let mut oldest_but_busy = ended_at(start);
        oldest_but_busy.begin();
        let older = ended_at(start + Duration::from_secs(1));
        let newer = ended_at(start + Duration::from_secs(2));
        let sessions = [("busy", oldest_but_busy), ("newer", newer), ("older", older)];
        let chosen = least_recently_used(sessions.iter().map(|(key, activity)| (key, activity)));
        assert_eq!(chosen, Some(&"older"));
    }

    #[test]
    fn an_agent_is_due_to_stop_only_once_all_its_sessions_are_idle() {
        let start = Instant::now();
        let early = ended_at(start);
        let late = ended_at(start + Duration::from_secs(5));
        assert_eq!(
            all_idle_due([&early, &late], LIMIT),
            Some(start + Duration::from_secs(5) + LIMIT)
        );
        let mut busy = ended_at(start);
        busy.begin();
        assert_eq!(all_idle_due([&early, &busy], LIMIT), None);
        assert_eq!(
            all_idle_due::<Instant>([], LIMIT),
            None,
            "an agent without sessions is the reaper's"
        );
    }

    #[test]
    fn an_agent_s_first_due_is_its_earliest_idle_session_busy_ones_aside() {
        let start = Instant::now();
        let mut dues = AgentDues::<Instant>::default();
        let mut busy = ended_at(start);
        busy.begin();
        dues.add(&busy, LIMIT);
        dues.add(&ended_at(start + Duration::from_secs(5)), LIMIT);
        dues.add(&ended_at(start + Duration::from_secs(2)), LIMIT);
        assert_eq!(dues.first_idle(), Some(start + Duration::from_secs(2) + LIMIT));
        assert_eq!(dues.all_idle(), None);
        assert_eq!(AgentDues::<Instant>::default().first_idle(), None);
    }

    #[test]
    fn no_session_is_chosen_when_all_are_busy() {
        let sessions = [("a", Activity::opened_for_turn(Instant::now()))];
        let chosen = least_recently_used(sessions.iter().map(|(key, activity)| (key, activity)));
        assert_eq!(chosen, None);
    }
}
