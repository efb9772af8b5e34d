//! When each schedule last fired (see `crate::heart::schedule`): what start-up
//! reads to decide whether a fire time passed while the daemon was down.

use std::sync::Arc;

use rusqlite::{OptionalExtension, params};

use super::{Result, Store};

/// The door to the schedules' last fire times, by schedule id (unix
/// seconds).
#[derive(Debug, Clone)]
pub(crate) struct ScheduleFires {
    store: Arc<Store>,
}

impl ScheduleFires {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        ScheduleFires { store }
    }

    /// Remembers that schedule `id` fired for its time `due` (a later
    /// time than the one kept only).
    pub(crate) fn record(&self, id: &str, due: i64) -> Result<()> {
        self.store
            .conn()
            .prepare_cached(
                "INSERT INTO schedule_fire (schedule_id, last_due) VALUES (?1, ?2)
                 ON CONFLICT (schedule_id) DO UPDATE SET last_due = max(last_due, excluded.last_due)",
            )?
            .execute(params![id, due])?;
        Ok(())
    }

    /// The time schedule `id` last fired for; `None` if it never fired.
    pub(crate) fn last(&self, id: &str) -> Result<Option<i64>> {
        Ok(self
            .store
            .conn()
            .prepare_cached("SELECT last_due FROM schedule_fire WHERE schedule_id = ?1")?
            .query_row(params![id], |row| row.get(0))
            .optional()?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::scratch::ScratchDir;
    use super::*;

    #[test]
    fn the_latest_fire_is_kept_across_a_reopen() {
        let dir = ScratchDir::new("schedule-fires");
        let fires = ScheduleFires::new(Arc::new(Store::open(dir.path()).unwrap()));
        assert_eq!(fires.last("tick").unwrap(), None);
        fires.record("tick", 20).unwrap();
        fires.record("tick", 10).unwrap();
        drop(fires);
        let reopened = ScheduleFires::new(Arc::new(Store::open(dir.path()).unwrap()));
        assert_eq!(reopened.last("tick").unwrap(), Some(20));
        assert_eq!(reopened.last("other").unwrap(), None);
    }
}
