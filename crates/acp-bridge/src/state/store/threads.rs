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

    /// The `limit` threads answered in most recently, newest first: each
    /// root with its sequence number (0 for a thread last answered before
    /// the numbers existed). A root that is not an event id (the bridge
    /// never stores one) is skipped.
    pub(crate) fn most_recent(&self, limit: usize) -> Result<Vec<(EventId, i64)>> {
        Ok(event_ids(self.store.threads_most_recent(limit)?))
    }

    /// The threads answered in since the answer numbered `seq` (at most
    /// `limit`, the most recent), each root with its sequence number: what
    /// a relay link may not follow yet.
    pub(crate) fn answered_after(&self, seq: i64, limit: usize) -> Result<Vec<(EventId, i64)>> {
        Ok(event_ids(self.store.threads_answered_after(seq, limit)?))
    }

    /// Forgets threads last answered in before `older_than` (unix
    /// seconds); returns how many.
    pub(crate) fn prune(&self, older_than: i64) -> Result<usize> {
        self.store.threads_prune(older_than)
    }
}

/// The rows whose root is an event id (the bridge never stores another).
fn event_ids(rows: Vec<(String, i64)>) -> Vec<(EventId, i64)> {
    rows.into_iter()
        .filter_map(|(root, seq)| EventId::from_hex(&root).ok().map(|root| (root, seq)))
        .collect()
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

    /// The `limit` threads answered in most recently, newest first: each
    /// root with its sequence number (0 when it has none).
    pub(super) fn threads_most_recent(&self, limit: usize) -> Result<Vec<(String, i64)>> {
        self.threads_query(
            "SELECT root, coalesce(seq, 0) FROM answered_thread ORDER BY answered_at DESC LIMIT ?1",
            params![sql_limit(limit)],
        )
    }

    /// The threads (at most `limit`, the highest numbers) whose last answer
    /// is numbered after `seq`, highest first.
    pub(super) fn threads_answered_after(&self, seq: i64, limit: usize) -> Result<Vec<(String, i64)>> {
        self.threads_query(
            "SELECT root, seq FROM answered_thread WHERE seq > ?1 ORDER BY seq DESC LIMIT ?2",
            params![seq, sql_limit(limit)],
        )
    }

    /// The (root, number) rows `sql` selects with `params`.
    fn threads_query(&self, sql: &str, params: impl rusqlite::Params) -> Result<Vec<(String, i64)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(sql)?;
        let threads = stmt
            .query_map(params, |row| Ok((row.get(0)?, row.get(1)?)))?
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
    // The sequence number: see the schema's version 19.
    conn.prepare_cached(
        "INSERT INTO answered_thread (root, answered_at, first_answered_at, seq)
         VALUES (?1, ?2, ?2, (SELECT coalesce(max(seq), 0) + 1 FROM answered_thread))
         ON CONFLICT (root) DO UPDATE SET answered_at = max(answered_at, excluded.answered_at),
                                          seq = excluded.seq",
    )?
    .execute(params![root, now])?;
    Ok(!known)
}

/// `limit` as SQLite's `LIMIT` takes it (past `i64::MAX`: no limit).
fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
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
        let recent = |limit| store.threads_most_recent(limit).unwrap();
        assert_eq!(recent(10), [("a".to_owned(), 3), ("b".to_owned(), 2)]);
        assert_eq!(recent(1), [("a".to_owned(), 3)]);
        assert_eq!(store.threads_prune(25).unwrap(), 1);
        assert_eq!(recent(10), [("a".to_owned(), 3)]);
    }

    #[test]
    fn every_answer_numbers_its_thread_in_commit_order_whatever_its_date() {
        let dir = ScratchDir::new("threads-seq");
        let store = Store::open(dir.path()).unwrap();
        store.thread_answered("a", 100).unwrap();
        store.thread_answered("b", 101).unwrap();
        let after = |seq| store.threads_answered_after(seq, 10).unwrap();
        assert_eq!(after(0), [("b".to_owned(), 2), ("a".to_owned(), 1)]);
        // Committed later with an earlier date (its answer was timed before
        // b's commit): still after everything read so far.
        store.thread_answered("c", 99).unwrap();
        assert_eq!(after(2), [("c".to_owned(), 3)]);
        // A known thread answered again is numbered again.
        store.thread_answered("a", 102).unwrap();
        assert_eq!(after(3), [("a".to_owned(), 4)]);
        assert_eq!(after(4), []);
        assert_eq!(store.threads_answered_after(0, 2).unwrap().len(), 2, "bounded");
    }
}
