//! What a schedule does about fire times that passed while the daemon was
//! down: one catch-up run at start-up, not one per missed time, and none
//! for a schedule that never fired (a new one waits for its first time).
//!
//! Pure over (last fire, next time after it, now), so tests inject the
//! clock.

use chrono::{DateTime, Utc};

/// What to do at start-up for one schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtStart {
    /// Run once now for the fire time `due` that passed (the latest one
    /// missed, named in the prompt).
    CatchUp { due: DateTime<Utc> },
    /// Nothing missed: wait for the next time.
    Wait,
}

/// The start-up decision for a schedule last fired at `last` (`None`:
/// never), whose fire times are given by `next_after`, at `now`.
pub(crate) fn at_start(
    last: Option<DateTime<Utc>>,
    next_after: impl Fn(DateTime<Utc>) -> Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> AtStart {
    let Some(last) = last else {
        return AtStart::Wait;
    };
    let Some(mut due) = next_after(last).filter(|first| *first <= now) else {
        return AtStart::Wait;
    };
    // The latest missed time, so the prompt says the one most recently due.
    while let Some(later) = next_after(due).filter(|later| *later <= now) {
        due = later;
    }
    AtStart::CatchUp { due }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    fn hourly(after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let hour = 3600;
        let next = (after.timestamp() / hour + 1) * hour;
        DateTime::from_timestamp(next, 0)
    }

    fn at(hour: i64, minute: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(0, 0).expect("epoch") + Duration::hours(hour) + Duration::minutes(minute)
    }

    #[test]
    fn a_new_schedule_does_not_catch_up() {
        assert_eq!(at_start(None, hourly, at(5, 30)), AtStart::Wait);
    }

    #[test]
    fn nothing_missed_waits() {
        assert_eq!(at_start(Some(at(5, 0)), hourly, at(5, 30)), AtStart::Wait);
    }

    #[test]
    fn several_missed_times_make_one_catch_up_for_the_latest() {
        assert_eq!(
            at_start(Some(at(1, 0)), hourly, at(5, 30)),
            AtStart::CatchUp { due: at(5, 0) }
        );
        assert_eq!(
            at_start(Some(at(4, 0)), hourly, at(5, 0)),
            AtStart::CatchUp { due: at(5, 0) },
            "a time due exactly now counts as missed"
        );
    }

    #[test]
    fn a_schedule_that_never_fires_again_waits() {
        assert_eq!(at_start(Some(at(1, 0)), |_| None, at(5, 30)), AtStart::Wait);
    }
}
