//! Threads the bot has answered in: with `--follow-threads involved`, a
//! reply there counts as a mention even without the bot's `p` tag, as
//! people expect of a bot they are talking with.
//!
//! One row per thread root, stamped with the first answer (a follow-up is
//! a reply after it) and the last (the relay links follow the most recent
//! threads, and housekeeping forgets those past the retention).

use std::sync::Arc;

use nostr_sdk::prelude::{EventId, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use super::{Result, Store, sql_seconds};

/// The door to the answered threads, the only way to the table (a reply
/// stored with `Store::outbox_put_series` records its thread inside that
/// transaction): threads are named by their root's event id.
#[derive(Debug, Clone)]
pub struct AnsweredThreads {
    store: Arc<Store>,
}

impl AnsweredThreads {
    pub fn new(store: Arc<Store>) -> Self {
        AnsweredThreads { store }
    }

    /// Records that the bot answered in the thread rooted at `root` at
    /// `at`; true when the thread is new to it.
    pub fn answered(&self, root: EventId, at: Timestamp) -> Result<bool> {
        self.store
            .thread_answered(&root.to_hex(), sql_seconds(at.as_secs()))
    }

    /// When (unix seconds) the bot first answered in the thread rooted at
    /// `root`; `None` when it never did.
    pub(crate) fn first_answered(&self, root: EventId) -> Result<Option<i64>> {
        self.store.thread_first_answered(&root.to_hex())
    }

    /// The `limit` threads answered in most recently, at `since` (unix
    /// seconds) or later (`i64::MIN`: any time), newest first: each root
    /// with when it was last answered in. A root that is not an event id
    /// (the bridge never stores one) is skipped.
    pub(crate) fn answered_since(&self, since: i64, limit: usize) -> Result<Vec<(EventId, i64)>> {
        let threads = self.store.threads_answered_since(since, limit)?;
        Ok(threads
            .iter()
            .filter_map(|(root, at)| EventId::from_hex(root).ok().map(|root| (root, *at)))
            .collect())
    }

    /// Forgets threads last answered in before `older_than` (unix
    /// seconds); returns how many.
    pub(crate) fn prune(&self, older_than: i64) -> Result<usize> {
        self.store.threads_prune(older_than)
    }
}

impl Store {
    /// Records that the bot answered in the thread rooted at `root` at `now`;
    /// true when the thread is new to it. (A reply stored by
    /// [`Store::outbox_put_series`] records its thread in its own
    /// transaction; this is for answers the bridge does not post.)
    pub(super) fn thread_answered(&self, root: &str, now: i64) -> Result<bool> {
        Ok(record_answered(&self.conn(), root, now)?)
    }

    /// When the bot first answered in the thread rooted at `root`; `None`
    /// when it never did.
    pub(super) fn thread_first_answered(&self, root: &str) -> Result<Option<i64>> {
        let found = self
            .conn()
            .prepare_cached("SELECT first_answered_at FROM answered_thread WHERE root = ?1")?
            .query_row(params![root], |row| row.get::<_, Option<i64>>(0))
            .optional()?;
        Ok(found.map(|first| first.unwrap_or(0)))
    }

    /// The `limit` threads answered in most recently, at `since` or later
    /// (`i64::MIN`: any time), newest first: each root with when it was last
    /// answered in.
    pub(super) fn threads_answered_since(&self, since: i64, limit: usize) -> Result<Vec<(String, i64)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT root, answered_at FROM answered_thread WHERE answered_at >= ?1
             ORDER BY answered_at DESC LIMIT ?2",
        )?;
        let threads = stmt
            .query_map(params![since, i64::try_from(limit).unwrap_or(i64::MAX)], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?
            .collect::<rusqlite::Result<Vec<(String, i64)>>>()?;
        Ok(threads)
    }

    /// Forgets threads last answered in before `older_than`; returns how many.
    pub(super) fn threads_prune(&self, older_than: i64) -> Result<usize> {
        let deleted = self
            .conn()
            .prepare_cached("DELETE FROM answered_thread WHERE answered_at < ?1")?
            .execute(params![older_than])?;
        Ok(deleted)
    }
}

/// Records on `conn` (an open transaction, or autocommit) that the bot
/// answered in the thread rooted at `root` at `now`; true when the thread
/// is new to it.
pub(super) fn record_answered(conn: &Connection, root: &str, now: i64) -> rusqlite::Result<bool> {
    let known = conn
        .prepare_cached("SELECT 1 FROM answered_thread WHERE root = ?1")?
        .query_row(params![root], |_| Ok(()))
        .optional()?
        .is_some();
    conn.prepare_cached(
        "INSERT INTO answered_thread (root, answered_at, first_answered_at) VALUES (?1, ?2, ?2)
         ON CONFLICT (root) DO UPDATE SET answered_at = max(answered_at, excluded.answered_at)",
    )?
    .execute(params![root, now])?;
    Ok(!known)
}

#[cfg(test)]
mod tests {
    use super::super::scratch::ScratchDir;
    use super::*;

    #[test]
    fn answered_threads_are_remembered_newest_first_and_pruned_by_age() {
        let dir = ScratchDir::new("threads");
        let store = Store::open(dir.path()).unwrap();
        assert!(store.thread_answered("a", 10).unwrap());
        assert!(store.thread_answered("b", 20).unwrap());
        assert!(!store.thread_answered("a", 30).unwrap(), "known already");
        assert_eq!(
            store.thread_first_answered("a").unwrap(),
            Some(10),
            "the first answer stays"
        );
        assert_eq!(store.thread_first_answered("c").unwrap(), None);
        let recent = |since, limit| store.threads_answered_since(since, limit).unwrap();
        assert_eq!(recent(i64::MIN, 10), [("a".to_owned(), 30), ("b".to_owned(), 20)]);
        assert_eq!(recent(i64::MIN, 1), [("a".to_owned(), 30)]);
        assert_eq!(recent(20, 10).len(), 2, "from `since` on, inclusive");
        assert_eq!(recent(21, 10), [("a".to_owned(), 30)]);
        assert_eq!(store.threads_prune(25).unwrap(), 1);
        assert_eq!(recent(i64::MIN, 10), [("a".to_owned(), 30)]);
    }
}
