//! What the scheduler tells the heart: each schedule this daemon runs,
//! what it is, and its next fire time, for `!schedules` and `!status`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

/// A schedule as shown.
#[derive(Debug, Clone, Default)]
struct Shown {
    /// What it is: `every 1h in dm: <prompt>`.
    what: String,
    next: Option<DateTime<Utc>>,
}

/// The schedules and their next fire times, shared between the scheduler
/// (which writes) and the heart (which reads). Empty with no schedules.
#[derive(Debug, Clone, Default)]
pub(crate) struct Board {
    shown: Arc<Mutex<BTreeMap<String, Shown>>>,
}

impl Board {
    /// Schedule `id` is `what`.
    pub(crate) fn describe(&self, id: &str, what: String) {
        self.lock().entry(id.to_owned()).or_default().what = what;
    }

    /// Schedule `id` fires next at `next` (`None`: never again).
    pub(crate) fn set_next(&self, id: &str, next: Option<DateTime<Utc>>) {
        self.lock().entry(id.to_owned()).or_default().next = next;
    }

    /// Schedule `id` runs no more.
    pub(crate) fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Whether this daemon runs schedule `id`.
    pub(crate) fn has(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    /// How many schedules this daemon runs.
    pub(crate) fn count(&self) -> usize {
        self.lock().len()
    }

    /// What `!schedules` answers: one line per schedule with its next time.
    pub(crate) fn listing(&self) -> String {
        let shown = self.lock();
        if shown.is_empty() {
            return "No schedules run here ([[schedule]] entries of the config file, or !every / !at)."
                .to_owned();
        }
        let mut text = format!("Schedules: {}.", shown.len());
        for (id, Shown { what, next }) in shown.iter() {
            let what = if what.is_empty() {
                String::new()
            } else {
                format!(" ({what})")
            };
            let _ = match next {
                Some(at) => write!(text, "\n{id}{what}: next run {}", at.to_rfc3339()),
                None => write!(text, "\n{id}{what}: no run left"),
            };
        }
        text
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Shown>> {
        self.shown.lock().expect("never poisoned: no panic while held")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_names_each_schedule_what_it_is_and_its_next_run() {
        let board = Board::default();
        assert!(board.listing().starts_with("No schedules"));
        board.set_next("standup", DateTime::from_timestamp(1_800_000_000, 0));
        board.describe("c1", "every 1h in dm: ping".to_owned());
        board.set_next("c1", None);
        assert_eq!(board.count(), 2);
        assert!(board.has("c1"));
        assert_eq!(
            board.listing(),
            "Schedules: 2.\nc1 (every 1h in dm: ping): no run left\nstandup: next run 2027-01-15T08:00:00+00:00"
        );
        board.remove("c1");
        assert!(!board.has("c1"));
        assert_eq!(board.count(), 1);
    }
}
