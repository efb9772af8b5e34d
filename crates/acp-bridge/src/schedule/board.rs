//! What the scheduler tells the heart: each schedule this daemon runs and
//! its next fire time, for `!schedules` and `!status`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

/// The schedules and their next fire times, shared between the scheduler
/// (which writes) and the heart (which reads). Empty with no schedules.
#[derive(Debug, Clone, Default)]
pub(crate) struct Board {
    next: Arc<Mutex<BTreeMap<String, Option<DateTime<Utc>>>>>,
}

impl Board {
    /// Schedule `id` fires next at `next` (`None`: never again).
    pub(crate) fn set_next(&self, id: &str, next: Option<DateTime<Utc>>) {
        self.lock().insert(id.to_owned(), next);
    }

    /// How many schedules this daemon runs.
    pub(crate) fn count(&self) -> usize {
        self.lock().len()
    }

    /// What `!schedules` answers: one line per schedule with its next time.
    pub(crate) fn listing(&self) -> String {
        let next = self.lock();
        if next.is_empty() {
            return "No schedules run here (they are [[schedule]] entries of the config file).".to_owned();
        }
        let mut text = format!("Schedules: {}.", next.len());
        for (id, at) in next.iter() {
            let _ = match at {
                Some(at) => write!(text, "\n{id}: next run {}", at.to_rfc3339()),
                None => write!(text, "\n{id}: no run left"),
            };
        }
        text
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Option<DateTime<Utc>>>> {
        self.next.lock().expect("never poisoned: no panic while held")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_names_each_schedule_and_its_next_run() {
        let board = Board::default();
        assert!(board.listing().starts_with("No schedules"));
        board.set_next("standup", DateTime::from_timestamp(1_800_000_000, 0));
        board.set_next("once", None);
        assert_eq!(board.count(), 2);
        assert_eq!(
            board.listing(),
            "Schedules: 2.\nonce: no run left\nstandup: next run 2027-01-15T08:00:00+00:00"
        );
    }
}
