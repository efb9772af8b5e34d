//! The mention journal: one row per accepted mention, owned from acceptance
//! to its outcome. It is the durable side of the queue: a mention is written
//! here (together with its seen entry) before any turn runs, and at start-up
//! every mention still `pending` is queued again, with the number of turns
//! already tried for it.
//!
//! States: `pending` → `answered` (a reply in the outbox answers it, see
//! [`Store::outbox_put`]) | `notified` (a notice instead of an answer) |
//! `dropped` (given up without any event). Finished states are final; a
//! finished row stays until [`Store::journal_prune_finished`] for
//! diagnostics. The journal does not own the seen set: pruning a mention
//! keeps its seen entry.

use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::seen::insert_seen;
use super::{Finish, MentionState, NewMention, PendingMention, Result, Store};

impl Store {
    /// Takes a mention in: in one transaction, adds its id to the seen set
    /// and journals it as pending. Returns false and changes nothing when the
    /// id is already in the seen set.
    ///
    /// An id that left the seen set by pruning while its mention is still
    /// journalled is not journalled twice: its seen entry is recorded again
    /// and this returns false.
    pub fn journal_accept(&self, mention: &NewMention<'_>) -> Result<bool> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if !insert_seen(&tx, mention.event_id, mention.accepted_at)? {
            return Ok(false); // dropping `tx` rolls back: nothing was written
        }
        let inserted = tx
            .prepare_cached(
                "INSERT INTO mention (event_id, conversation, payload, accepted_at)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (event_id) DO NOTHING",
            )?
            .execute(params![
                mention.event_id,
                mention.conversation,
                mention.payload,
                mention.accepted_at
            ])?;
        tx.commit()?;
        Ok(inserted == 1)
    }

    /// Every pending mention, oldest accepted first (ties in the order they
    /// were accepted).
    pub fn journal_pending(&self) -> Result<Vec<PendingMention>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT event_id, conversation, payload, accepted_at, attempts
             FROM mention WHERE state = 'pending'
             ORDER BY accepted_at, seq",
        )?;
        let pending = stmt
            .query_map([], |row| {
                Ok(PendingMention {
                    event_id: row.get(0)?,
                    conversation: row.get(1)?,
                    payload: row.get(2)?,
                    accepted_at: row.get(3)?,
                    attempts: row.get(4)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(pending)
    }

    /// How many mentions are pending.
    pub fn journal_pending_count(&self) -> Result<u64> {
        let conn = self.conn();
        let count = conn
            .prepare_cached("SELECT count(*) FROM mention WHERE state = 'pending'")?
            .query_row([], |row| row.get(0))?;
        Ok(count)
    }

    /// Counts one more turn started for the mention and returns the new
    /// count, so a retry bound holds across restarts. An id that is not in
    /// the journal is an error ([`rusqlite::Error::QueryReturnedNoRows`]).
    pub fn journal_record_attempt(&self, event_id: &str) -> Result<u32> {
        let conn = self.conn();
        let attempts = conn
            .prepare_cached(
                "UPDATE mention SET attempts = attempts + 1
                 WHERE event_id = ?1 RETURNING attempts",
            )?
            .query_row(params![event_id], |row| row.get(0))?;
        Ok(attempts)
    }

    /// Finishes pending mentions without a reply event (normally
    /// [`Finish::Notified`] or [`Finish::Dropped`]; answers go through
    /// [`Store::outbox_put`]). One transaction; ids that are not pending,
    /// or not journalled, are left as they are.
    pub fn journal_finish(&self, event_ids: &[&str], outcome: Finish, now: i64) -> Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        for event_id in event_ids {
            finish_pending(&tx, event_id, outcome, now, None)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Where the mention stands, or `None` when it is not journalled (never
    /// accepted, or pruned).
    pub fn journal_state(&self, event_id: &str) -> Result<Option<MentionState>> {
        let conn = self.conn();
        let state = conn
            .prepare_cached("SELECT state FROM mention WHERE event_id = ?1")?
            .query_row(params![event_id], |row| {
                let text: String = row.get(0)?;
                MentionState::from_sql(&text).ok_or_else(|| {
                    rusqlite::Error::FromSqlConversionFailure(
                        0,
                        Type::Text,
                        format!("unknown mention state {text:?}").into(),
                    )
                })
            })
            .optional()?;
        Ok(state)
    }

    /// Removes mentions finished before `older_than` (their seen entries
    /// stay); returns how many. Pending mentions are never removed.
    pub fn journal_prune_finished(&self, older_than: i64) -> Result<usize> {
        let conn = self.conn();
        let deleted = conn
            .prepare_cached("DELETE FROM mention WHERE finished_at < ?1")?
            .execute(params![older_than])?;
        Ok(deleted)
    }
}

/// Moves one mention from pending to `outcome` on `conn` (an open
/// transaction), remembering the reply that answers it; true when it was
/// pending.
pub(super) fn finish_pending(
    conn: &Connection,
    event_id: &str,
    outcome: Finish,
    now: i64,
    reply_id: Option<&str>,
) -> rusqlite::Result<bool> {
    let changed = conn
        .prepare_cached(
            "UPDATE mention SET state = ?2, finished_at = ?3, reply_id = ?4
             WHERE event_id = ?1 AND state = 'pending'",
        )?
        .execute(params![event_id, outcome.state().as_sql(), now, reply_id])?;
    Ok(changed == 1)
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::scratch::ScratchDir;
    use super::*;

    /// A mention whose payload names its id, so tests can check it round-trips.
    pub(in super::super) fn accept(store: &Store, event_id: &str, accepted_at: i64) -> bool {
        let payload = format!(r#"{{"id":"{event_id}"}}"#);
        store
            .journal_accept(&NewMention {
                event_id,
                conversation: "channel-1",
                payload: &payload,
                accepted_at,
            })
            .unwrap()
    }

    fn pending_ids(store: &Store) -> Vec<String> {
        let pending = store.journal_pending().unwrap();
        pending.into_iter().map(|m| m.event_id).collect()
    }

    #[test]
    fn journal_accept_is_once_only_and_survives_reopen() {
        let dir = ScratchDir::new("accept");
        let store = Store::open(dir.path()).unwrap();
        assert!(accept(&store, "late", 200));
        assert!(accept(&store, "early", 100));
        assert!(accept(&store, "early-tie", 100));
        assert!(!accept(&store, "late", 300));
        assert!(store.seen_contains("late").unwrap());

        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(!accept(&store, "late", 400));
        assert_eq!(store.journal_pending_count().unwrap(), 3);
        assert_eq!(
            store.journal_pending().unwrap(),
            vec![
                PendingMention {
                    event_id: "early".into(),
                    conversation: "channel-1".into(),
                    payload: r#"{"id":"early"}"#.into(),
                    accepted_at: 100,
                    attempts: 0,
                },
                PendingMention {
                    event_id: "early-tie".into(),
                    conversation: "channel-1".into(),
                    payload: r#"{"id":"early-tie"}"#.into(),
                    accepted_at: 100,
                    attempts: 0,
                },
                PendingMention {
                    event_id: "late".into(),
                    conversation: "channel-1".into(),
                    payload: r#"{"id":"late"}"#.into(),
                    accepted_at: 200,
                    attempts: 0,
                },
            ]
        );
    }

    #[test]
    fn journal_accept_of_an_already_seen_id_changes_nothing() {
        let dir = ScratchDir::new("accept-seen");
        let store = Store::open(dir.path()).unwrap();
        assert!(store.seen_insert("aa", 50).unwrap());
        assert!(!accept(&store, "aa", 100));
        assert_eq!(store.journal_state("aa").unwrap(), None);
        assert_eq!(store.journal_pending_count().unwrap(), 0);
        // The seen entry keeps its own time: pruning at 60 removes it.
        assert_eq!(store.seen_prune(60).unwrap(), 1);
    }

    #[test]
    fn journal_accept_after_seen_prune_does_not_journal_twice() {
        let dir = ScratchDir::new("accept-pruned");
        let store = Store::open(dir.path()).unwrap();
        assert!(accept(&store, "aa", 100));
        assert_eq!(store.seen_prune(200).unwrap(), 1);
        assert!(!accept(&store, "aa", 300));
        assert_eq!(pending_ids(&store), ["aa"]);
        assert!(store.seen_contains("aa").unwrap());
    }

    #[test]
    fn journal_finish_moves_pending_to_notified_or_dropped() {
        let dir = ScratchDir::new("finish");
        let store = Store::open(dir.path()).unwrap();
        for (id, at) in [("a", 1), ("b", 2), ("c", 3)] {
            accept(&store, id, at);
        }
        store.journal_finish(&["a"], Finish::Notified, 10).unwrap();
        store
            .journal_finish(&["b", "never-accepted"], Finish::Dropped, 11)
            .unwrap();
        // Finished states are final.
        store.journal_finish(&["a"], Finish::Dropped, 12).unwrap();

        assert_eq!(store.journal_state("a").unwrap(), Some(MentionState::Notified));
        assert_eq!(store.journal_state("b").unwrap(), Some(MentionState::Dropped));
        assert_eq!(store.journal_state("c").unwrap(), Some(MentionState::Pending));
        assert_eq!(store.journal_state("never-accepted").unwrap(), None);
        assert_eq!(pending_ids(&store), ["c"]);
        assert_eq!(store.journal_pending_count().unwrap(), 1);
    }

    #[test]
    fn attempts_survive_reopen() {
        let dir = ScratchDir::new("attempts");
        let store = Store::open(dir.path()).unwrap();
        accept(&store, "a", 1);
        assert_eq!(store.journal_record_attempt("a").unwrap(), 1);
        assert_eq!(store.journal_record_attempt("a").unwrap(), 2);

        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.journal_pending().unwrap()[0].attempts, 2);
        assert_eq!(store.journal_record_attempt("a").unwrap(), 3);
        assert!(store.journal_record_attempt("unknown").is_err());
    }

    #[test]
    fn journal_prune_finished_keeps_pending_and_seen_entries() {
        let dir = ScratchDir::new("journal-prune");
        let store = Store::open(dir.path()).unwrap();
        for (id, at) in [("old", 1), ("recent", 2), ("pending", 3)] {
            accept(&store, id, at);
        }
        store.journal_finish(&["old"], Finish::Dropped, 100).unwrap();
        store.journal_finish(&["recent"], Finish::Notified, 300).unwrap();

        assert_eq!(store.journal_prune_finished(200).unwrap(), 1);
        assert_eq!(store.journal_state("old").unwrap(), None);
        assert_eq!(
            store.journal_state("recent").unwrap(),
            Some(MentionState::Notified)
        );
        assert_eq!(pending_ids(&store), ["pending"]);
        assert!(store.seen_contains("old").unwrap());
        assert!(!accept(&store, "old", 400));
    }
}
