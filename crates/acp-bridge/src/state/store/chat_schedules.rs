//! The schedules the owner set from chat (`!every`, `!at`; see
//! `crate::heart::schedule::chat`), so they outlive a restart until
//! `!unschedule` or, for a one-shot, its run.

use std::sync::Arc;

use rusqlite::params;

use super::{Result, Store};

/// A chat schedule as kept: its timing and target as text the schedule
/// module writes and reads back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChatScheduleRow {
    pub id: String,
    /// `every:<seconds>` or `once:<unix seconds>`.
    pub timing: String,
    /// The target as `schedule::target::Target` writes it.
    pub target: String,
    pub prompt: String,
    /// When it was set (unix seconds).
    pub since: i64,
}

/// The door to the chat's schedules.
#[derive(Debug, Clone)]
pub(crate) struct ChatSchedules {
    store: Arc<Store>,
}

impl ChatSchedules {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        ChatSchedules { store }
    }

    pub(crate) fn add(&self, row: &ChatScheduleRow) -> Result<()> {
        self.store
            .conn()
            .prepare_cached(
                "INSERT INTO chat_schedule (id, timing, target, prompt, since) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![row.id, row.timing, row.target, row.prompt, row.since])?;
        Ok(())
    }

    /// Removes schedule `id`; whether it was there. Its last fire time
    /// stays, so its id is not given again (see [`Self::next_number`]).
    pub(crate) fn remove(&self, id: &str) -> Result<bool> {
        let removed = self
            .store
            .conn()
            .prepare_cached("DELETE FROM chat_schedule WHERE id = ?1")?
            .execute(params![id])?;
        Ok(removed > 0)
    }

    /// Every chat schedule, oldest first.
    pub(crate) fn all(&self) -> Result<Vec<ChatScheduleRow>> {
        let conn = self.store.conn();
        let mut statement = conn.prepare_cached(
            "SELECT id, timing, target, prompt, since FROM chat_schedule ORDER BY since, id",
        )?;
        let rows = statement.query_map([], |row| {
            Ok(ChatScheduleRow {
                id: row.get(0)?,
                timing: row.get(1)?,
                target: row.get(2)?,
                prompt: row.get(3)?,
                since: row.get(4)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The number of the next chat id (`c<n>`): above every id in use, a
    /// schedule's or a kept last fire time's, so a new schedule never
    /// inherits another's last fire.
    pub(crate) fn next_number(&self) -> Result<u64> {
        let conn = self.store.conn();
        let highest: Option<i64> = conn.query_row(
            "SELECT max(CAST(substr(id, 2) AS INTEGER)) FROM (
                 SELECT id FROM chat_schedule
                 UNION ALL SELECT schedule_id FROM schedule_fire
             ) WHERE id GLOB 'c[0-9]*'",
            [],
            |row| row.get(0),
        )?;
        Ok(u64::try_from(highest.unwrap_or(0)).unwrap_or(0) + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::super::scratch::ScratchDir;
    use super::*;

    #[test]
    fn chat_schedules_outlive_a_reopen_and_an_id_in_use_is_not_given_again() {
        let dir = ScratchDir::new("chat-schedules");
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let fires = super::super::ScheduleFires::new(Arc::clone(&store));
        let schedules = ChatSchedules::new(store);
        assert_eq!(schedules.next_number().unwrap(), 1);
        let row = ChatScheduleRow {
            id: "c1".into(),
            timing: "every:60".into(),
            target: "dm".into(),
            prompt: "ping".into(),
            since: 100,
        };
        schedules.add(&row).unwrap();
        fires.record("c1", 160).unwrap();
        assert_eq!(schedules.next_number().unwrap(), 2);
        drop((schedules, fires));
        let reopened = ChatSchedules::new(Arc::new(Store::open(dir.path()).unwrap()));
        assert_eq!(reopened.all().unwrap(), vec![row]);
        assert!(reopened.remove("c1").unwrap());
        assert!(!reopened.remove("c1").unwrap());
        assert!(reopened.all().unwrap().is_empty());
        assert_eq!(
            reopened.next_number().unwrap(),
            2,
            "a removed id that fired is not given again"
        );
    }
}
