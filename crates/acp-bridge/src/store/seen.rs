//! The seen set: ids of events already taken in, so a relay re-sending an
//! event (after a reconnect, or from a second relay) never makes a second
//! turn. The SDK only de-duplicates in memory; this set survives restarts.
//!
//! Entries are pruned by the time they were recorded, not by the event's
//! own `created_at`: the caller keeps them longer than the watermark can lag
//! behind, after which the watermark alone keeps old events out.
//! [`Store::journal_accept`](super::Store::journal_accept) writes here in the
//! same transaction as the journal.

use rusqlite::{Connection, OptionalExtension, params};

use super::{Result, Store};

impl Store {
    /// Whether `event_id` is in the seen set.
    pub fn seen_contains(&self, event_id: &str) -> Result<bool> {
        let conn = self.conn();
        let found = conn
            .prepare_cached("SELECT 1 FROM seen WHERE event_id = ?1")?
            .query_row(params![event_id], |_| Ok(()))
            .optional()?;
        Ok(found.is_some())
    }

    /// Records `event_id` as seen at `now`; true when it was not seen before
    /// (an existing entry keeps its original time).
    pub fn seen_insert(&self, event_id: &str, now: i64) -> Result<bool> {
        Ok(insert_seen(&self.conn(), event_id, now)?)
    }

    /// Deletes entries recorded before `older_than`; returns how many.
    pub fn seen_prune(&self, older_than: i64) -> Result<usize> {
        let conn = self.conn();
        let deleted = conn
            .prepare_cached("DELETE FROM seen WHERE seen_at < ?1")?
            .execute(params![older_than])?;
        Ok(deleted)
    }
}

/// Inserts into the seen set on `conn` (a connection or an open
/// transaction); true when the id is new.
pub(super) fn insert_seen(conn: &Connection, event_id: &str, now: i64) -> rusqlite::Result<bool> {
    let inserted = conn
        .prepare_cached(
            "INSERT INTO seen (event_id, seen_at) VALUES (?1, ?2)
             ON CONFLICT (event_id) DO NOTHING",
        )?
        .execute(params![event_id, now])?;
    Ok(inserted == 1)
}

#[cfg(test)]
mod tests {
    use super::super::scratch::ScratchDir;
    use super::*;

    #[test]
    fn seen_insert_is_true_only_the_first_time() {
        let dir = ScratchDir::new("seen");
        let store = Store::open(dir.path()).unwrap();
        assert!(!store.seen_contains("aa").unwrap());
        assert!(store.seen_insert("aa", 100).unwrap());
        assert!(!store.seen_insert("aa", 200).unwrap());
        assert!(store.seen_contains("aa").unwrap());
    }

    #[test]
    fn seen_prune_removes_only_entries_recorded_before_the_cutoff() {
        let dir = ScratchDir::new("seen-prune");
        let store = Store::open(dir.path()).unwrap();
        store.seen_insert("old", 100).unwrap();
        store.seen_insert("edge", 200).unwrap();
        store.seen_insert("new", 300).unwrap();
        // A re-insert does not refresh the recorded time.
        store.seen_insert("old", 300).unwrap();

        assert_eq!(store.seen_prune(200).unwrap(), 1);
        assert!(!store.seen_contains("old").unwrap());
        assert!(store.seen_contains("edge").unwrap());
        assert!(store.seen_contains("new").unwrap());
        assert_eq!(store.seen_prune(200).unwrap(), 0);
    }
}
