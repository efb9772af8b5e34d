//! The outbox: signed events (replies and notices) waiting for the relay's
//! OK. A reply is signed once, stored here, then published; the relay's OK
//! marks it sent. At start-up every unsent entry is published again as the
//! very same event (same id, same signature), which relays de-duplicate, so
//! a crash between storing and the OK can neither lose a reply nor post a
//! second, different one.
//!
//! [`Store::outbox_put`] stores the event and finishes the mentions it
//! answers in one transaction; that is the exactly-once guarantee (see the
//! module doc of [`store`](super)). A journalled mention keeps the id of
//! the event that finished it (`mention.reply_id`) until that event is
//! pruned from here.

use rusqlite::{TransactionBehavior, params};

use super::journal::finish_pending;
use super::{Finish, OutboxEntry, OutgoingEvent, Result, Store};

impl Store {
    /// Stores a signed event and, in the same transaction, moves each
    /// mention in `answers` from pending to `outcome` (answered for a reply,
    /// notified for a notice) at `now`. Mentions that are not pending are
    /// left as they are.
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
    }

    /// Stores the events of one answer sent as a series (in order) and
    /// finishes the mentions in `answers` with the first, all in one
    /// transaction: a crash leaves either every part stored and the
    /// mentions finished, or nothing. Idempotent like
    /// [`outbox_put`](Self::outbox_put): when the first part is already
    /// stored, nothing changes.
    pub fn outbox_put_series(
        &self,
        parts: &[OutgoingEvent<'_>],
        answers: &[&str],
        outcome: Finish,
        now: i64,
    ) -> Result<()> {
        let Some(first) = parts.first() else {
            return Ok(());
        };
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if !insert_event(&tx, first, now)? {
            tracing::debug!(event_id = first.event_id, "outbox: series already stored");
            return Ok(());
        }
        for part in &parts[1..] {
            insert_event(&tx, part, now)?;
        }
        for mention in answers {
            finish_pending(&tx, mention, outcome, now, Some(first.event_id))?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Every event not yet acknowledged by the relay, in the order stored.
    pub fn outbox_unsent(&self) -> Result<Vec<OutboxEntry>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT event_id, json, stored_at FROM outbox
             WHERE sent_at IS NULL ORDER BY seq",
        )?;
        let unsent = stmt
            .query_map([], |row| {
                Ok(OutboxEntry {
                    event_id: row.get(0)?,
                    json: row.get(1)?,
                    stored_at: row.get(2)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(unsent)
    }

    /// Records the relay's OK for the event. An event already marked keeps
    /// its first time; an unknown id changes nothing.
    pub fn outbox_mark_sent(&self, event_id: &str, now: i64) -> Result<()> {
        let conn = self.conn();
        conn.prepare_cached("UPDATE outbox SET sent_at = ?2 WHERE event_id = ?1 AND sent_at IS NULL")?
            .execute(params![event_id, now])?;
        Ok(())
    }

    /// Removes events sent before `older_than`; returns how many. Unsent
    /// events are never removed.
    pub fn outbox_prune_sent(&self, older_than: i64) -> Result<usize> {
        let conn = self.conn();
        let deleted = conn
            .prepare_cached("DELETE FROM outbox WHERE sent_at < ?1")?
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
        let unsent = store.outbox_unsent().unwrap();
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
            json: r#"{"id":"r1"}"#.into(),
            stored_at: 50,
        };
        assert_eq!(store.outbox_unsent().unwrap(), vec![stored.clone()]);

        // The same id again (say, a retry after a crash) changes nothing:
        // neither the stored event nor m3.
        store
            .outbox_put(&event("r1", r#"{"other":true}"#), &["m3"], Finish::Answered, 60)
            .unwrap();
        assert_eq!(store.outbox_unsent().unwrap(), vec![stored]);
        assert_eq!(store.journal_state("m3").unwrap(), Some(MentionState::Pending));

        store.outbox_mark_sent("r1", 70).unwrap();
        assert!(store.outbox_unsent().unwrap().is_empty());
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(store.outbox_unsent().unwrap().is_empty());
    }

    #[test]
    fn a_series_is_stored_whole_with_the_mentions_finish_and_only_once() {
        let dir = ScratchDir::new("outbox-series");
        let store = Store::open(dir.path()).unwrap();
        accept(&store, "m1", 1);
        accept(&store, "m2", 2);
        let parts = [event("p1", "{}"), event("p2", "{}"), event("p3", "{}")];
        store
            .outbox_put_series(&parts, &["m1"], Finish::Answered, 10)
            .unwrap();
        assert_eq!(unsent_ids(&store), ["p1", "p2", "p3"]);
        assert_eq!(store.journal_state("m1").unwrap(), Some(MentionState::Answered));
        // Stored again (a retry after a crash): nothing changes, m2 neither.
        store
            .outbox_put_series(&parts, &["m2"], Finish::Answered, 20)
            .unwrap();
        assert_eq!(unsent_ids(&store), ["p1", "p2", "p3"]);
        assert_eq!(store.journal_state("m2").unwrap(), Some(MentionState::Pending));
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
    fn outbox_unsent_keeps_insertion_order_and_prune_removes_only_old_sent() {
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
        assert_eq!(store.outbox_prune_sent(200).unwrap(), 1);
        assert_eq!(store.outbox_prune_sent(200).unwrap(), 0);
        assert_eq!(store.journal_state("m1").unwrap(), Some(MentionState::Answered));
        assert_eq!(unsent_ids(&store), ["r-c"]);
        // r-a (sent at 300) and unsent r-c remain.
        assert_eq!(store.outbox_prune_sent(i64::MAX).unwrap(), 1);
        assert_eq!(unsent_ids(&store), ["r-c"]);
    }
}
