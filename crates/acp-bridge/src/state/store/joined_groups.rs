//! The NIP-29 groups the bot is a member of, by relay and group id: owned
//! by `groups::membership`, which records a group when it joins it (or
//! finds itself a member) and forgets it once it has left.

use std::sync::Arc;

use rusqlite::params;

use super::{Result, Store, sql_now};

/// The door to the joined groups, the only way to the table. Groups are
/// named by relay URL (as `groups` normalises it) and group id; the store
/// does not know `groups::GroupAddress` (it would import its caller).
#[derive(Debug, Clone)]
pub(crate) struct JoinedGroups {
    store: Arc<Store>,
}

impl JoinedGroups {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        JoinedGroups { store }
    }

    /// Remembers that the bot is a member of group `group_id` on `relay`.
    pub(crate) fn record(&self, relay: &str, group_id: &str) -> Result<()> {
        self.store.joined_group_record(relay, group_id, sql_now())
    }

    /// Forgets a group the bot has left.
    pub(crate) fn forget(&self, relay: &str, group_id: &str) -> Result<()> {
        self.store.joined_group_forget(relay, group_id)
    }

    /// Every group remembered, as (relay, group id), oldest first.
    pub(crate) fn all(&self) -> Result<Vec<(String, String)>> {
        self.store.joined_groups()
    }
}

impl Store {
    /// Remembers that the bot is a member of group `group_id` on `relay`.
    pub(super) fn joined_group_record(&self, relay: &str, group_id: &str, now: i64) -> Result<()> {
        self.conn()
            .prepare_cached(
                "INSERT INTO joined_group (relay, group_id, joined_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (relay, group_id) DO NOTHING",
            )?
            .execute(params![relay, group_id, now])?;
        Ok(())
    }

    /// Forgets a group the bot has left.
    pub(super) fn joined_group_forget(&self, relay: &str, group_id: &str) -> Result<()> {
        self.conn()
            .prepare_cached("DELETE FROM joined_group WHERE relay = ?1 AND group_id = ?2")?
            .execute(params![relay, group_id])?;
        Ok(())
    }

    /// Every group remembered, as (relay, group id), oldest first.
    pub(super) fn joined_groups(&self) -> Result<Vec<(String, String)>> {
        let conn = self.conn();
        let mut statement = conn
            .prepare_cached("SELECT relay, group_id FROM joined_group ORDER BY joined_at, relay, group_id")?;
        let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::scratch::ScratchDir;
    use super::*;

    #[test]
    fn a_group_is_remembered_once_and_forgotten() {
        let dir = ScratchDir::new("joined-groups");
        let store = Store::open(dir.path()).unwrap();
        store.joined_group_record("ws://a", "pizza", 1).unwrap();
        store.joined_group_record("ws://a", "pizza", 2).unwrap();
        store.joined_group_record("ws://b", "pizza", 3).unwrap();
        assert_eq!(
            store.joined_groups().unwrap(),
            [
                ("ws://a".to_owned(), "pizza".to_owned()),
                ("ws://b".to_owned(), "pizza".to_owned())
            ]
        );
        store.joined_group_forget("ws://a", "pizza").unwrap();
        drop(store);
        let reopened = Store::open(dir.path()).unwrap();
        assert_eq!(
            reopened.joined_groups().unwrap(),
            [("ws://b".to_owned(), "pizza".to_owned())]
        );
    }
}
