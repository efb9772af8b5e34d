//! The mention journal: one row per accepted mention, owned from acceptance
//! to its outcome. It is the durable side of the queue: a mention is written
//! here before any turn runs, and at start-up every mention still `pending`
//! is queued again, with the number of turns already tried for it.
//!
//! It is also the seen set: an event id with a row here was taken in, and a
//! relay offering it again (after a reconnect, or from a second relay) is a
//! duplicate. The SDK only de-duplicates in memory; this survives restarts.
//! One table rather than a journal beside a seen set: each mention costs
//! one row and one unique index entry, about half the write of two tables
//! (`BENCHMARKS.md`), and the two could never disagree.
//!
//! States: `pending` → `answered` (a reply in the outbox answers it, see
//! [`Store::outbox_put`]) | `notified` (a notice instead of an answer) |
//! `dropped` (given up without any event). Finished states are final. A
//! finished row stays for diagnostics and for dedup until
//! [`Store::journal_prune`], whose caller decides how long dedup needs it.

use std::collections::HashSet;

use rusqlite::OptionalExtension;
use rusqlite::types::Type;
use rusqlite::{Connection, TransactionBehavior, params};

use super::{Finish, MentionState, NewMention, PendingCursor, PendingMention, Result, Store};

/// A mention's row by its event id.
const SELECT_JOURNALED: &str = "SELECT 1 FROM mention WHERE event_id = ?1";

impl Store {
    /// Takes mentions in as pending, in one transaction: one commit for the
    /// lot is what makes a burst cheap. One flag per mention, in order:
    /// false, and nothing written, for an id taken in before (also earlier
    /// in the same slice).
    pub fn journal_accept_all(&self, mentions: &[NewMention<'_>]) -> Result<Vec<bool>> {
        self.journal_take_in(mentions, &[], 0).map(|(fresh, _)| fresh)
    }

    /// [`Store::journal_accept_all`] for `ours`, and in the same
    /// transaction `others` (another shard's mentions) taken in already
    /// finished as `dropped` at `now`: they are kept only as seen ids, so a
    /// relay offering them again is a duplicate, and never resume. One flag
    /// per mention of each slice, in order: false for an id taken in before.
    pub(crate) fn journal_take_in(
        &self,
        ours: &[NewMention<'_>],
        others: &[NewMention<'_>],
        now: i64,
    ) -> Result<(Vec<bool>, Vec<bool>)> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let fresh = {
            let mut insert = tx.prepare_cached(
                "INSERT INTO mention (event_id, conversation, payload, accepted_at, state, finished_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (event_id) DO NOTHING",
            )?;
            let mut take = |mentions: &[NewMention<'_>], finished_at: Option<i64>| {
                let state = match finished_at {
                    Some(_) => MentionState::Dropped.as_sql(),
                    None => MentionState::Pending.as_sql(),
                };
                mentions
                    .iter()
                    .map(|mention| {
                        insert
                            .execute(params![
                                mention.event_id,
                                mention.conversation,
                                mention.payload,
                                mention.accepted_at,
                                state,
                                finished_at
                            ])
                            .map(|inserted| inserted == 1)
                    })
                    .collect::<rusqlite::Result<Vec<bool>>>()
            };
            (take(ours, None)?, take(others, Some(now))?)
        };
        tx.commit()?;
        Ok(fresh)
    }

    /// Those of `event_ids` that were taken in (and not pruned since).
    ///
    /// One cached point lookup per id: an `IN (?, …)` list is a new
    /// statement for every length, and compiling it cost more than the few
    /// lookups a thread context needs (BENCHMARKS §8).
    pub(crate) fn journal_contains_any<'a>(&self, event_ids: &[&'a str]) -> Result<HashSet<&'a str>> {
        let conn = self.conn();
        let mut select = conn.prepare_cached(SELECT_JOURNALED)?;
        let mut found = HashSet::new();
        for id in event_ids {
            if select.exists(params![id])? {
                found.insert(*id);
            }
        }
        Ok(found)
    }

    /// The journaled payload of mention `event_id` when it belongs to
    /// `conversation` (and has not been pruned); `None` for any other.
    pub(crate) fn journal_payload_in(&self, event_id: &str, conversation: &str) -> Result<Option<String>> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT payload FROM mention WHERE event_id = ?1 AND conversation = ?2 AND payload != '{}'",
            )?
            .query_row(params![event_id, conversation], |row| row.get(0))
            .optional()?)
    }

    /// Whether `event_id` was taken in (and not pruned since).
    pub fn journal_contains(&self, event_id: &str) -> Result<bool> {
        Ok(self
            .conn()
            .prepare_cached(SELECT_JOURNALED)?
            .exists(params![event_id])?)
    }

    /// Up to `limit` pending mentions after `after` (from the start when
    /// `None`), oldest accepted first (ties in the order they were
    /// accepted). Start-up reads them a page at a time, so a long journal
    /// is never held in memory twice.
    pub(crate) fn journal_pending_page(
        &self,
        after: Option<PendingCursor>,
        limit: usize,
    ) -> Result<Vec<PendingMention>> {
        let after = after.unwrap_or(PendingCursor {
            accepted_at: i64::MIN,
            seq: i64::MIN,
        });
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT event_id, conversation, payload, accepted_at, attempts, seq
             FROM mention WHERE state = 'pending' AND (accepted_at, seq) > (?1, ?2)
             ORDER BY accepted_at, seq LIMIT ?3",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let pending = stmt
            .query_map(params![after.accepted_at, after.seq, limit], |row| {
                let accepted_at = row.get(3)?;
                Ok(PendingMention {
                    cursor: PendingCursor {
                        accepted_at,
                        seq: row.get(5)?,
                    },
                    event_id: row.get(0)?,
                    conversation: row.get(1)?,
                    payload: row.get(2)?,
                    accepted_at,
                    attempts: row.get(4)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(pending)
    }

    /// Every pending mention, in order (for tests).
    #[cfg(test)]
    pub(crate) fn journal_pending(&self) -> Result<Vec<PendingMention>> {
        self.journal_pending_page(None, usize::MAX)
    }

    /// Every delegated task id the journal holds, in any state: those of
    /// task rows and of task results (a sibling bot's task has only the
    /// latter). Read once at start, so that a new task's id is one no
    /// earlier task had (see `heart/tasks`). One scan of the journal; the
    /// `LIKE` spares the JSON parse of rows that cannot name a task, and an
    /// unparsable payload names none rather than failing the lot.
    pub(crate) fn journal_task_ids(&self) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut select = conn.prepare(
            "SELECT DISTINCT id FROM (
                 SELECT CASE WHEN json_valid(payload) THEN coalesce(
                     json_extract(payload, '$.intent.task.task'),
                     json_extract(payload, '$.intent.task_result.task')) END AS id
                 FROM mention WHERE payload LIKE '%\"task%')
             WHERE id IS NOT NULL",
        )?;
        let ids = select
            .query_map([], |row| row.get(0))?
            .collect::<rusqlite::Result<Vec<String>>>()?;
        Ok(ids)
    }

    /// How many mentions are pending.
    pub(crate) fn journal_pending_count(&self) -> Result<u64> {
        let conn = self.conn();
        let count = conn
            .prepare_cached("SELECT count(*) FROM mention WHERE state = 'pending'")?
            .query_row([], |row| row.get(0))?;
        Ok(count)
    }

    /// Counts one more turn started for the mention and returns the new
    /// count, so a retry bound holds across restarts. An id that is not in
    /// the journal is an error ([`rusqlite::Error::QueryReturnedNoRows`]).
    pub(crate) fn journal_record_attempt(&self, event_id: &str) -> Result<u32> {
        let conn = self.conn();
        let attempts = conn
            .prepare_cached(
                "UPDATE mention SET attempts = attempts + 1
                 WHERE event_id = ?1 RETURNING attempts",
            )?
            .query_row(params![event_id], |row| row.get(0))?;
        Ok(attempts)
    }

    /// Rewrites the payload of a pending mention (what it is to become
    /// changed); a finished or unknown one is left as it is.
    pub(crate) fn journal_rewrite_pending(&self, event_id: &str, payload: &str) -> Result<()> {
        self.conn()
            .prepare_cached("UPDATE mention SET payload = ?2 WHERE event_id = ?1 AND state = 'pending'")?
            .execute(params![event_id, payload])?;
        Ok(())
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

    /// Hands a delegated task's result back, in one transaction: finishes
    /// the task's row `task` (if it has one) as `outcome` and takes
    /// `result` (if any) in as pending, for its parent conversation's
    /// turn. False, and nothing written, when the task's row was not
    /// pending: its result was handed back before, and is not again.
    pub(crate) fn journal_hand_back(
        &self,
        task: Option<&str>,
        outcome: Finish,
        result: Option<&NewMention<'_>>,
        now: i64,
    ) -> Result<bool> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some(task) = task
            && !finish_pending(&tx, task, outcome, now, None)?
        {
            return Ok(false);
        }
        if let Some(result) = result {
            tx.prepare_cached(
                "INSERT INTO mention (event_id, conversation, payload, accepted_at, state)
                 VALUES (?1, ?2, ?3, ?4, 'pending')
                 ON CONFLICT (event_id) DO NOTHING",
            )?
            .execute(params![
                result.event_id,
                result.conversation,
                result.payload,
                result.accepted_at
            ])?;
        }
        tx.commit()?;
        Ok(true)
    }

    /// Where the mention stands, or `None` when it is not journalled (never
    /// accepted, or pruned).
    pub(crate) fn journal_state(&self, event_id: &str) -> Result<Option<MentionState>> {
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

    /// Removes mentions finished before `finished_before` and accepted
    /// before `accepted_before`; returns how many. Pending mentions are
    /// never removed. A removed id is no longer a duplicate.
    pub(crate) fn journal_prune(&self, finished_before: i64, accepted_before: i64) -> Result<usize> {
        let deleted = self
            .conn()
            .prepare_cached("DELETE FROM mention WHERE finished_at < ?1 AND accepted_at < ?2")?
            .execute(params![finished_before, accepted_before])?;
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
        let mention = NewMention {
            event_id,
            conversation: "channel-1",
            payload: &payload,
            accepted_at,
        };
        store.journal_accept_all(&[mention]).unwrap() == [true]
    }

    fn cursor_of(store: &Store, event_id: &str) -> PendingCursor {
        let pending = store.journal_pending().unwrap();
        pending
            .into_iter()
            .find(|m| m.event_id == event_id)
            .unwrap()
            .cursor
    }

    fn pending_ids(store: &Store) -> Vec<String> {
        let pending = store.journal_pending().unwrap();
        pending.into_iter().map(|m| m.event_id).collect()
    }

    #[test]
    fn another_shards_mentions_are_seen_but_never_pending() {
        let dir = ScratchDir::new("journal-shards");
        let store = Store::open(dir.path()).unwrap();
        let entry = |event_id| NewMention {
            event_id,
            conversation: "channel-2",
            payload: "{}",
            accepted_at: 5,
        };
        let taken = store.journal_take_in(&[entry("ours")], &[entry("theirs"), entry("theirs")], 7);
        assert_eq!(taken.unwrap(), (vec![true], vec![true, false]));
        assert_eq!(pending_ids(&store), ["ours"]);
        assert!(
            store.journal_contains("theirs").unwrap(),
            "a replay of it is a duplicate"
        );
        assert_eq!(
            store.journal_state("theirs").unwrap(),
            Some(MentionState::Dropped)
        );
        assert_eq!(store.journal_pending_count().unwrap(), 1);
    }

    #[test]
    fn journal_accept_is_once_only_and_survives_reopen() {
        let dir = ScratchDir::new("accept");
        let store = Store::open(dir.path()).unwrap();
        assert!(accept(&store, "late", 200));
        assert!(accept(&store, "early", 100));
        assert!(accept(&store, "early-tie", 100));
        assert!(!accept(&store, "late", 300));
        assert!(store.journal_contains("late").unwrap());
        assert!(!store.journal_contains("never").unwrap());
        let found = store
            .journal_contains_any(&["never", "early", "late", "early"])
            .unwrap();
        assert_eq!(found, HashSet::from(["early", "late"]));
        assert!(store.journal_contains_any(&[]).unwrap().is_empty());

        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(!accept(&store, "late", 400));
        assert_eq!(store.journal_pending_count().unwrap(), 3);
        assert_eq!(
            store.journal_pending().unwrap(),
            vec![
                PendingMention {
                    cursor: cursor_of(&store, "early"),
                    event_id: "early".into(),
                    conversation: "channel-1".into(),
                    payload: r#"{"id":"early"}"#.into(),
                    accepted_at: 100,
                    attempts: 0,
                },
                PendingMention {
                    cursor: cursor_of(&store, "early-tie"),
                    event_id: "early-tie".into(),
                    conversation: "channel-1".into(),
                    payload: r#"{"id":"early-tie"}"#.into(),
                    accepted_at: 100,
                    attempts: 0,
                },
                PendingMention {
                    cursor: cursor_of(&store, "late"),
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
    fn journal_accept_all_flags_each_mention_and_commits_them_together() {
        let dir = ScratchDir::new("accept-all");
        let store = Store::open(dir.path()).unwrap();
        assert!(accept(&store, "before", 1));
        let mention = |event_id| NewMention {
            event_id,
            conversation: "channel-1",
            payload: "{}",
            accepted_at: 2,
        };
        let batch = [mention("a"), mention("before"), mention("b"), mention("a")];
        assert_eq!(
            store.journal_accept_all(&batch).unwrap(),
            [true, false, true, false],
            "taken before, and repeated within the batch, are duplicates"
        );
        assert_eq!(pending_ids(&store), ["before", "a", "b"]);
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
    fn a_tasks_result_is_handed_back_once_with_its_row_finished() {
        let dir = ScratchDir::new("hand-back");
        let store = Store::open(dir.path()).unwrap();
        accept(&store, "task", 1);
        let result = NewMention {
            event_id: "result",
            conversation: "channel-1",
            payload: "{}",
            accepted_at: 2,
        };
        let hand_back = || store.journal_hand_back(Some("task"), Finish::Answered, Some(&result), 3);
        assert!(hand_back().unwrap());
        assert_eq!(store.journal_state("task").unwrap(), Some(MentionState::Answered));
        assert_eq!(pending_ids(&store), ["result"]);
        assert!(!hand_back().unwrap(), "a task's result is handed back once");
        assert_eq!(pending_ids(&store), ["result"]);

        let sibling = NewMention {
            event_id: "sibling-result",
            ..result
        };
        assert!(
            store
                .journal_hand_back(None, Finish::Answered, Some(&sibling), 4)
                .unwrap(),
            "a task without a row of its own journals its result alone"
        );
        assert_eq!(pending_ids(&store), ["result", "sibling-result"]);
    }

    #[test]
    fn every_task_id_the_journal_holds_is_found_in_any_state() {
        let dir = ScratchDir::new("task-ids");
        let store = Store::open(dir.path()).unwrap();
        let rows = [
            ("task", r#"{"intent":{"task":{"task":"t3","parent":"room"}}}"#),
            ("result", r#"{"intent":{"task_result":{"task":"t5"}}}"#),
            ("turn", r#"{"content":"a \"task\": t9","intent":"turn"}"#),
            ("broken", r#"{"task"#),
        ];
        for (at, (event_id, payload)) in (1..).zip(rows) {
            let mention = NewMention {
                event_id,
                conversation: "room",
                payload,
                accepted_at: at,
            };
            store.journal_accept_all(&[mention]).unwrap();
        }
        store.journal_finish(&["task"], Finish::Answered, 5).unwrap();
        let mut ids = store.journal_task_ids().unwrap();
        ids.sort_unstable();
        assert_eq!(ids, ["t3", "t5"], "a finished task's row counts too");
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
    fn journal_prune_needs_both_cut_offs_and_spares_pending_mentions() {
        let dir = ScratchDir::new("journal-prune");
        let store = Store::open(dir.path()).unwrap();
        for (id, at) in [
            ("old", 1),
            ("finished-late", 2),
            ("accepted-late", 150),
            ("pending", 3),
        ] {
            accept(&store, id, at);
        }
        store
            .journal_finish(&["old", "accepted-late"], Finish::Dropped, 100)
            .unwrap();
        store
            .journal_finish(&["finished-late"], Finish::Notified, 300)
            .unwrap();

        assert_eq!(store.journal_prune(200, 100).unwrap(), 1);
        assert_eq!(store.journal_state("old").unwrap(), None);
        assert_eq!(
            store.journal_state("finished-late").unwrap(),
            Some(MentionState::Notified)
        );
        assert_eq!(
            store.journal_state("accepted-late").unwrap(),
            Some(MentionState::Dropped)
        );
        assert_eq!(pending_ids(&store), ["pending"]);
        assert!(accept(&store, "old", 400), "a pruned id is taken in again");
    }
}
