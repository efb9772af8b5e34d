//! The outbox: signed events (replies and notices) waiting for the relay's
//! OK. A reply is signed once, stored here, then published; the relay's OK
//! marks it sent. At start-up every unsent entry is published again as the
//! very same event (same id, same signature), which relays de-duplicate, so
//! a crash between storing and the OK can neither lose a reply nor post a
//! second, different one.
//!
//! [`Store::outbox_put`] stores the event and finishes the mentions it
//! answers in one durable transaction; that is the exactly-once guarantee
//! (see the module doc of [`store`](super)). A journalled mention keeps the
//! id of the event that finished it (`mention.reply_id`) until that event
//! is pruned from here.
//!
//! Each entry carries its own publishing state: attempts, when it is due
//! again, and whether a relay refused it for good. One entry that keeps
//! failing therefore never holds back another, and a refused one stays
//! (for `!status` and forensics) without being published again until
//! housekeeping prunes it.

use std::sync::Arc;

use nostr_sdk::prelude::{Event, JsonUtil};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::journal::finish_pending;
use super::threads::record_answered;
use super::{Finish, OutboxEntry, OutboxRefusals, OutgoingEvent, Result, Store, sql_now};

/// The door to the outbox for everything but the answers' transaction
/// (the ledger's [`Store::outbox_put`], which finishes mentions with them):
/// the publisher reads what is due and records what the relays said,
/// the identity stores its events, housekeeping prunes, `!status` counts
/// refusals. An entry is named by the id it was stored under; times are
/// the caller's unix seconds, so the publisher's clock (and its tests')
/// decides what is due.
#[derive(Debug, Clone)]
pub(crate) struct Outbox {
    store: Arc<Store>,
}

impl Outbox {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Outbox { store }
    }

    /// Stores a signed event that answers no mention (the bot's identity),
    /// for every relay; an event stored before is left as it is.
    pub(crate) fn put_unanswering(&self, event: &Event) -> Result<()> {
        let outgoing = OutgoingEvent {
            event_id: &event.id.to_hex(),
            relay_hint: None,
            json: &event.as_json(),
        };
        self.store.outbox_put(&outgoing, &[], Finish::Notified, sql_now())
    }

    /// Entries neither sent nor refused whose next attempt is due at `now`.
    pub(crate) fn due(&self, now: i64) -> Result<Vec<OutboxEntry>> {
        self.store.outbox_due(now)
    }

    /// When the next entry is due; `None` when nothing is left to publish.
    pub(crate) fn next_due(&self) -> Result<Option<i64>> {
        self.store.outbox_next_due()
    }

    /// Records the relays' OK for `event_ids`, in one transaction.
    pub(crate) fn mark_sent(&self, event_ids: &[&str], now: i64) -> Result<()> {
        self.store.outbox_mark_all_sent(event_ids, now)
    }

    /// Counts a failed attempt and sets when to try again.
    pub(crate) fn retry_at(&self, event_id: &str, next_attempt_at: i64) -> Result<()> {
        self.store.outbox_retry_at(event_id, next_attempt_at)
    }

    /// Records a refusal for good: the entry is not published again.
    pub(crate) fn mark_refused(&self, event_id: &str, reason: &str, now: i64) -> Result<()> {
        self.store.outbox_mark_refused(event_id, reason, now)
    }

    /// The entries refused for good, for `!status`.
    pub(crate) fn refusals(&self) -> Result<OutboxRefusals> {
        self.store.outbox_refusals()
    }

    /// Removes entries sent or refused before `older_than`; returns how many.
    pub(crate) fn prune_settled(&self, older_than: i64) -> Result<usize> {
        self.store.outbox_prune_settled(older_than)
    }
}

impl Store {
    /// Stores a signed event and, in the same transaction, moves each
    /// mention in `answers` from pending to `outcome` (answered for a reply,
    /// notified for a notice) at `now`. Mentions that are not pending are
    /// left as they are.
    ///
    /// Durable when it returns: the commit is synced to disk
    /// (`synchronous=FULL` for this transaction), because the event is
    /// published right after, and a relay's OK for a row that a power loss
    /// then rolls back would leave a published reply whose mentions run
    /// again. The cost is in BENCHMARKS.md.
    ///
    /// Idempotent: when an event with this id is already stored, nothing
    /// changes (neither the stored event nor any mention).
    pub fn outbox_put(
        &self,
        reply: &OutgoingEvent<'_>,
        answers: &[&str],
        outcome: Finish,
        now: i64,
    ) -> Result<()> {
        let mut conn = self.conn();
        synced(&mut conn, |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if !insert_event(&tx, reply, now)? {
                tracing::debug!(event_id = reply.event_id, "outbox: event already stored");
                return Ok(());
            }
            let mut finished = 0;
            for mention in answers {
                if finish_pending(&tx, mention, outcome, now, Some(reply.event_id))? {
                    finished += 1;
                }
            }
            tx.commit()?;
            if finished < answers.len() {
                tracing::debug!(
                    event_id = reply.event_id,
                    answers = answers.len(),
                    finished,
                    "outbox: some answered mentions were no longer pending"
                );
            }
            Ok(())
        })
    }

    /// Stores the events of one answer sent as a series (in order),
    /// finishes the mentions in `answers` with the first and, when the
    /// answer is in a thread (`answered_in`: its root), records that the bot
    /// answered there, all in one durable transaction (as
    /// [`outbox_put`](Self::outbox_put)): a crash leaves either every part
    /// stored, the mentions finished and the thread known, or nothing; and
    /// a reply costs one commit, not one per table. True when the thread is
    /// new to the bot. Idempotent: when the first part is already stored,
    /// nothing changes (and the thread is not new).
    pub(crate) fn outbox_put_series(
        &self,
        parts: &[OutgoingEvent<'_>],
        answers: &[&str],
        outcome: Finish,
        answered_in: Option<&str>,
        now: i64,
    ) -> Result<bool> {
        let Some(first) = parts.first() else {
            return Ok(false);
        };
        let mut conn = self.conn();
        synced(&mut conn, |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if !insert_event(&tx, first, now)? {
                tracing::debug!(event_id = first.event_id, "outbox: series already stored");
                return Ok(false);
            }
            for part in &parts[1..] {
                insert_event(&tx, part, now)?;
            }
            for mention in answers {
                finish_pending(&tx, mention, outcome, now, Some(first.event_id))?;
            }
            let new_thread = match answered_in {
                Some(root) => record_answered(&tx, root, now)?,
                None => false,
            };
            tx.commit()?;
            Ok(new_thread)
        })
    }

    /// Entries neither sent nor refused that are due by `now` (unix
    /// seconds; `i64::MAX` for all of them), in the order stored.
    pub(super) fn outbox_due(&self, now: i64) -> Result<Vec<OutboxEntry>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT event_id, relay_hint, json, stored_at, attempts FROM outbox
             WHERE sent_at IS NULL AND refused_at IS NULL AND next_attempt_at <= ?1
             ORDER BY seq",
        )?;
        let due = stmt
            .query_map([now], |row| {
                Ok(OutboxEntry {
                    event_id: row.get(0)?,
                    relay_hint: row.get(1)?,
                    json: row.get(2)?,
                    stored_at: row.get(3)?,
                    attempts: row.get(4)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(due)
    }

    /// When the next entry neither sent nor refused is due (unix seconds);
    /// `None` when there is none.
    pub(super) fn outbox_next_due(&self) -> Result<Option<i64>> {
        let conn = self.conn();
        let next = conn
            .prepare_cached(
                "SELECT min(next_attempt_at) FROM outbox
                 WHERE sent_at IS NULL AND refused_at IS NULL",
            )?
            .query_row([], |row| row.get(0))?;
        Ok(next)
    }

    /// Records the relay's OK for the event (the tests' shorthand for
    /// [`outbox_mark_all_sent`](Self::outbox_mark_all_sent) of one).
    #[cfg(test)]
    pub(super) fn outbox_mark_sent(&self, event_id: &str, now: i64) -> Result<()> {
        self.outbox_mark_all_sent(&[event_id], now)
    }

    /// Records the relays' OKs for several events in one transaction (the
    /// publisher collects those that arrive together). An event already
    /// marked keeps its first time; an unknown id changes nothing. `NORMAL` sync: a mark
    /// lost to a power cut only publishes the same event once more, which
    /// relays de-duplicate.
    pub(super) fn outbox_mark_all_sent(&self, event_ids: &[&str], now: i64) -> Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut mark =
                tx.prepare_cached("UPDATE outbox SET sent_at = ?2 WHERE event_id = ?1 AND sent_at IS NULL")?;
            for event_id in event_ids {
                mark.execute(params![event_id, now])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Counts a failed attempt and sets when the entry is due again.
    pub(super) fn outbox_retry_at(&self, event_id: &str, next_attempt_at: i64) -> Result<()> {
        let conn = self.conn();
        conn.prepare_cached(
            "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?2
             WHERE event_id = ?1 AND sent_at IS NULL AND refused_at IS NULL",
        )?
        .execute(params![event_id, next_attempt_at])?;
        Ok(())
    }

    /// Records that a relay refused the event for good (`reason` as the
    /// relay gave it): it is never due again. A sent event stays sent.
    pub(super) fn outbox_mark_refused(&self, event_id: &str, reason: &str, now: i64) -> Result<()> {
        let conn = self.conn();
        conn.prepare_cached(
            "UPDATE outbox SET attempts = attempts + 1, refused_at = ?2, refused_reason = ?3
             WHERE event_id = ?1 AND sent_at IS NULL AND refused_at IS NULL",
        )?
        .execute(params![event_id, now, reason])?;
        Ok(())
    }

    /// How many stored entries were refused for good, and the newest reason.
    pub(super) fn outbox_refusals(&self) -> Result<OutboxRefusals> {
        let conn = self.conn();
        let count: u64 = conn
            .prepare_cached("SELECT count(*) FROM outbox WHERE refused_at IS NOT NULL")?
            .query_row([], |row| row.get(0))?;
        let last_reason = conn
            .prepare_cached(
                "SELECT refused_reason FROM outbox WHERE refused_at IS NOT NULL
                 ORDER BY refused_at DESC, seq DESC LIMIT 1",
            )?
            .query_row([], |row| row.get(0))
            .optional()?;
        Ok(OutboxRefusals { count, last_reason })
    }

    /// Removes events sent or refused before `older_than`; returns how
    /// many. Events still to publish are never removed.
    pub(super) fn outbox_prune_settled(&self, older_than: i64) -> Result<usize> {
        let conn = self.conn();
        let deleted = conn
            .prepare_cached("DELETE FROM outbox WHERE sent_at < ?1 OR refused_at < ?1")?
            .execute(params![older_than])?;
        Ok(deleted)
    }
}

/// Stores `event` unless an event with its id is; says whether it did.
fn insert_event(
    tx: &rusqlite::Transaction<'_>,
    event: &OutgoingEvent<'_>,
    now: i64,
) -> rusqlite::Result<bool> {
    let inserted = tx
        .prepare_cached(
            "INSERT INTO outbox (event_id, relay_hint, json, stored_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (event_id) DO NOTHING",
        )?
        .execute(params![event.event_id, event.relay_hint, event.json, now])?;
    Ok(inserted == 1)
}

/// Runs `write` with `synchronous=FULL`, so that its commit is on disk when
/// it returns, and puts the connection back to `NORMAL` (see `configure`)
/// whatever `write` returned. SQLite refuses to change this setting inside a
/// transaction, hence around it.
fn synced<T>(conn: &mut Connection, write: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
    conn.pragma_update(None, "synchronous", "FULL")?;
    let written = write(conn);
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    written
}

#[cfg(test)]
mod tests {
    use super::super::MentionState;
    use super::super::journal::tests::accept;
    use super::super::scratch::ScratchDir;
    use super::*;

    fn event<'a>(event_id: &'a str, json: &'a str) -> OutgoingEvent<'a> {
        OutgoingEvent {
            event_id,
            relay_hint: Some("wss://relay.example"),
            json,
        }
    }

    fn unsent_ids(store: &Store) -> Vec<String> {
        let unsent = store.outbox_due(i64::MAX).unwrap();
        unsent.into_iter().map(|e| e.event_id).collect()
    }

    #[test]
    fn outbox_put_answers_mentions_in_one_step_and_is_idempotent() {
        let dir = ScratchDir::new("outbox");
        let store = Store::open(dir.path()).unwrap();
        for (id, at) in [("m1", 1), ("m2", 2), ("m3", 3)] {
            accept(&store, id, at);
        }
        store
            .outbox_put(
                &event("r1", r#"{"id":"r1"}"#),
                &["m1", "m2"],
                Finish::Answered,
                50,
            )
            .unwrap();
        assert_eq!(store.journal_state("m1").unwrap(), Some(MentionState::Answered));
        assert_eq!(store.journal_state("m2").unwrap(), Some(MentionState::Answered));
        let pending = store.journal_pending().unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].event_id, "m3");

        drop(store);
        let store = Store::open(dir.path()).unwrap();
        let stored = OutboxEntry {
            event_id: "r1".into(),
            relay_hint: Some("wss://relay.example".into()),
            json: r#"{"id":"r1"}"#.into(),
            stored_at: 50,
            attempts: 0,
        };
        assert_eq!(store.outbox_due(i64::MAX).unwrap(), vec![stored.clone()]);

        // The same id again (say, a retry after a crash) changes nothing:
        // neither the stored event nor m3.
        store
            .outbox_put(&event("r1", r#"{"other":true}"#), &["m3"], Finish::Answered, 60)
            .unwrap();
        assert_eq!(store.outbox_due(i64::MAX).unwrap(), vec![stored]);
        assert_eq!(store.journal_state("m3").unwrap(), Some(MentionState::Pending));

        store.outbox_mark_sent("r1", 70).unwrap();
        assert!(store.outbox_due(i64::MAX).unwrap().is_empty());
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(store.outbox_due(i64::MAX).unwrap().is_empty());
    }

    #[test]
    fn a_series_is_stored_whole_with_the_mentions_finish_and_only_once() {
        let dir = ScratchDir::new("outbox-series");
        let store = Store::open(dir.path()).unwrap();
        accept(&store, "m1", 1);
        accept(&store, "m2", 2);
        let parts = [event("p1", "{}"), event("p2", "{}"), event("p3", "{}")];
        store
            .outbox_put_series(&parts, &["m1"], Finish::Answered, None, 10)
            .unwrap();
        assert_eq!(unsent_ids(&store), ["p1", "p2", "p3"]);
        assert_eq!(store.journal_state("m1").unwrap(), Some(MentionState::Answered));
        // Stored again (a retry after a crash): nothing changes, m2 neither.
        store
            .outbox_put_series(&parts, &["m2"], Finish::Answered, None, 20)
            .unwrap();
        assert_eq!(unsent_ids(&store), ["p1", "p2", "p3"]);
        assert_eq!(store.journal_state("m2").unwrap(), Some(MentionState::Pending));
    }

    #[test]
    fn a_reply_records_its_thread_in_the_same_commit_and_only_the_first_is_new() {
        let dir = ScratchDir::new("outbox-thread");
        let store = Store::open(dir.path()).unwrap();
        accept(&store, "m1", 1);
        accept(&store, "m2", 2);
        let first = [event("r1", "{}")];
        let put = |parts, answers, now| {
            store
                .outbox_put_series(parts, answers, Finish::Answered, Some("root"), now)
                .unwrap()
        };
        assert!(put(&first, &["m1"], 10), "a thread new to the bot");
        assert!(
            !put(&first, &["m1"], 11),
            "a retry of a stored reply changes nothing"
        );
        assert!(!put(&[event("r2", "{}")], &["m2"], 20), "known since r1");
        assert!(
            !store
                .outbox_put_series(&[event("r3", "{}")], &[], Finish::Notified, None, 30)
                .unwrap(),
            "no thread to record"
        );

        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(store.thread_first_answered("root").unwrap().is_some());
        let followed = store.threads_most_recent(10).unwrap();
        assert_eq!(followed.len(), 1);
        assert_eq!(followed[0].0, "root");
        assert_eq!(store.journal_state("m1").unwrap(), Some(MentionState::Answered));
        assert_eq!(store.journal_state("m2").unwrap(), Some(MentionState::Answered));
        assert_eq!(unsent_ids(&store), ["r1", "r2", "r3"]);
    }

    #[test]
    fn several_sent_marks_commit_together_keep_first_times_and_survive_reopen() {
        let dir = ScratchDir::new("outbox-sent-all");
        let store = Store::open(dir.path()).unwrap();
        for id in ["a", "b", "c", "d"] {
            store
                .outbox_put(&event(id, "{}"), &[], Finish::Answered, 1)
                .unwrap();
        }
        store.outbox_mark_sent("a", 5).unwrap();
        store
            .outbox_mark_all_sent(&["a", "c", "unknown", "d"], 50)
            .unwrap();
        store.outbox_mark_all_sent(&[], 60).unwrap();

        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(unsent_ids(&store), ["b"]);
        // "a" kept its first time (5): only it is older than 10.
        assert_eq!(store.outbox_prune_settled(10).unwrap(), 1);
        assert_eq!(store.outbox_prune_settled(i64::MAX).unwrap(), 2);
        assert_eq!(unsent_ids(&store), ["b"]);
    }

    #[test]
    fn notice_finishes_mentions_as_notified() {
        let dir = ScratchDir::new("outbox-notice");
        let store = Store::open(dir.path()).unwrap();
        accept(&store, "m1", 1);
        let notice = OutgoingEvent {
            event_id: "n1",
            relay_hint: None,
            json: "{}",
        };
        store.outbox_put(&notice, &["m1"], Finish::Notified, 5).unwrap();
        assert_eq!(store.journal_state("m1").unwrap(), Some(MentionState::Notified));
        assert_eq!(unsent_ids(&store), ["n1"]);
    }

    #[test]
    fn outbox_due_keeps_insertion_order_and_prune_removes_only_old_sent() {
        let dir = ScratchDir::new("outbox-prune");
        let store = Store::open(dir.path()).unwrap();
        accept(&store, "m1", 1);
        // Stored out of timestamp order: insertion order wins.
        store
            .outbox_put(&event("r-b", "{}"), &["m1"], Finish::Answered, 20)
            .unwrap();
        store
            .outbox_put(&event("r-a", "{}"), &[], Finish::Answered, 10)
            .unwrap();
        store
            .outbox_put(&event("r-c", "{}"), &[], Finish::Answered, 30)
            .unwrap();
        assert_eq!(unsent_ids(&store), ["r-b", "r-a", "r-c"]);

        store.outbox_mark_sent("r-b", 100).unwrap();
        store.outbox_mark_sent("r-a", 300).unwrap();
        store.outbox_mark_sent("unknown", 300).unwrap();
        assert_eq!(unsent_ids(&store), ["r-c"]);

        // r-b answered m1: pruning it must not break the journal row.
        assert_eq!(store.outbox_prune_settled(200).unwrap(), 1);
        assert_eq!(store.outbox_prune_settled(200).unwrap(), 0);
        assert_eq!(store.journal_state("m1").unwrap(), Some(MentionState::Answered));
        assert_eq!(unsent_ids(&store), ["r-c"]);
        // r-a (sent at 300) and unsent r-c remain.
        assert_eq!(store.outbox_prune_settled(i64::MAX).unwrap(), 1);
        assert_eq!(unsent_ids(&store), ["r-c"]);
    }

    #[test]
    fn a_retried_entry_waits_for_its_time_without_holding_back_the_others() {
        let dir = ScratchDir::new("outbox-retry");
        let store = Store::open(dir.path()).unwrap();
        for id in ["failing", "fresh"] {
            store
                .outbox_put(&event(id, "{}"), &[], Finish::Answered, 10)
                .unwrap();
        }
        store.outbox_retry_at("failing", 40).unwrap();
        assert_eq!(store.outbox_due(20).unwrap().len(), 1);
        assert_eq!(store.outbox_due(20).unwrap()[0].event_id, "fresh");
        assert_eq!(store.outbox_next_due().unwrap(), Some(0));
        store.outbox_mark_sent("fresh", 20).unwrap();
        assert_eq!(store.outbox_next_due().unwrap(), Some(40));
        let due = store.outbox_due(40).unwrap();
        assert_eq!((due[0].event_id.as_str(), due[0].attempts), ("failing", 1));
    }

    #[test]
    fn a_refused_entry_is_never_due_again_is_counted_and_pruned_after_retention() {
        let dir = ScratchDir::new("outbox-refused");
        let store = Store::open(dir.path()).unwrap();
        accept(&store, "m1", 1);
        store
            .outbox_put(&event("refused", "{}"), &["m1"], Finish::Answered, 10)
            .unwrap();
        store
            .outbox_put(&event("later", "{}"), &[], Finish::Answered, 11)
            .unwrap();
        store
            .outbox_mark_refused("refused", "blocked: no bots", 12)
            .unwrap();

        assert_eq!(unsent_ids(&store), ["later"]);
        assert_eq!(
            store.outbox_refusals().unwrap(),
            OutboxRefusals {
                count: 1,
                last_reason: Some("blocked: no bots".into())
            }
        );
        // A late OK (another relay) does not make a refused entry sent twice.
        store.outbox_retry_at("refused", 99).unwrap();
        assert_eq!(unsent_ids(&store), ["later"]);

        assert_eq!(store.outbox_prune_settled(12).unwrap(), 0);
        assert_eq!(store.outbox_prune_settled(13).unwrap(), 1);
        assert_eq!(store.outbox_refusals().unwrap(), OutboxRefusals::default());
        assert_eq!(store.journal_state("m1").unwrap(), Some(MentionState::Answered));
        assert_eq!(unsent_ids(&store), ["later"]);
    }

    #[test]
    fn the_outbox_insert_commits_synced_and_leaves_the_connection_as_configured() {
        let dir = ScratchDir::new("outbox-synced");
        let store = Store::open(dir.path()).unwrap();
        let level = |conn: &Connection| -> i64 {
            conn.pragma_query_value(None, "synchronous", |row| row.get(0))
                .unwrap()
        };
        let inside = synced(&mut store.conn(), |conn| Ok(level(conn))).unwrap();
        assert_eq!(inside, 2, "FULL while the outbox insert commits");
        store
            .outbox_put(&event("r1", "{}"), &[], Finish::Answered, 1)
            .unwrap();
        assert_eq!(level(&store.conn()), 1, "NORMAL again afterwards");
    }
}
