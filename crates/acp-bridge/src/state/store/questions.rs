//! Permission questions the bridge posted to the owner and still waits on.
//!
//! An open question lives with its turn; a crash ends both. The turn's
//! mention is resumed from the journal, but the question already posted in
//! the thread would wait forever for an answer nobody listens to. So each
//! open question is recorded here with the mention it was asked under
//! (opaque JSON), and at start-up every one left over is marked expired in
//! its thread and forgotten.
//!
//! [`Questions`] is the only way to the table: the driver opens and closes
//! a question as it posts and settles it, the intake asks whether a reply
//! answers one still open, and the heart expires the ones left over at
//! start-up. It speaks event ids and mentions; the rows are hex and JSON.

use std::sync::Arc;

use acp_bridge_core::mention::Mention;
use nostr_sdk::prelude::EventId;
use rusqlite::params;

use super::{Result, Store};

/// The door to the open questions (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct Questions {
    store: Arc<Store>,
}

/// A question recorded open before this start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeftOver {
    pub question: EventId,
    /// The mention it was asked under; `None` when its row is unreadable
    /// (its thread cannot be told).
    pub under: Option<Mention>,
}

impl Questions {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Questions { store }
    }

    /// Records `question`, asked under `under`, as open.
    pub(crate) fn open(&self, question: EventId, under: &Mention) -> Result<()> {
        let payload = serde_json::to_string(under)?;
        self.store
            .question_open(&question.to_hex(), &payload, super::sql_now())
    }

    /// Forgets `question` (answered, timed out, cancelled).
    pub(crate) fn close(&self, question: EventId) -> Result<()> {
        self.store.question_close(&question.to_hex())
    }

    /// Whether `event` is a question this bridge posted and still waits on.
    pub(crate) fn is_open(&self, event: EventId) -> Result<bool> {
        self.store.question_is_open(&event.to_hex())
    }

    /// Forgets every question still recorded open (they died with the
    /// turns of an earlier run) and returns them, oldest first, for their
    /// threads to be told. A row whose id is no event id is forgotten
    /// and not returned.
    pub(crate) fn expire_left_over(&self) -> Result<Vec<LeftOver>> {
        let rows = self.store.questions_open()?;
        let mut left_over = Vec::with_capacity(rows.len());
        for (event_id, payload) in rows {
            let under = serde_json::from_str::<Mention>(&payload).ok();
            if let Err(error) = self.store.question_close(&event_id) {
                tracing::warn!(%error, question = %event_id, "cannot forget a stale question");
            }
            if let Ok(question) = EventId::from_hex(&event_id) {
                left_over.push(LeftOver { question, under });
            }
        }
        Ok(left_over)
    }
}

impl Store {
    /// Records an open question.
    pub(super) fn question_open(&self, event_id: &str, payload: &str, now: i64) -> Result<()> {
        self.conn()
            .prepare_cached(
                "INSERT OR REPLACE INTO question (event_id, payload, asked_at) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![event_id, payload, now])?;
        Ok(())
    }

    /// Forgets a question (answered, timed out, cancelled, or expired).
    pub(super) fn question_close(&self, event_id: &str) -> Result<()> {
        self.conn()
            .prepare_cached("DELETE FROM question WHERE event_id = ?1")?
            .execute(params![event_id])?;
        Ok(())
    }

    /// Whether `event_id` is a question this bridge posted and still waits on.
    pub(super) fn question_is_open(&self, event_id: &str) -> Result<bool> {
        Ok(self
            .conn()
            .prepare_cached("SELECT 1 FROM question WHERE event_id = ?1")?
            .exists(params![event_id])?)
    }

    /// Questions still recorded open, oldest first: (event id, payload).
    pub(super) fn questions_open(&self) -> Result<Vec<(String, String)>> {
        let conn = self.conn();
        let mut statement =
            conn.prepare_cached("SELECT event_id, payload FROM question ORDER BY asked_at")?;
        let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::scratch::ScratchDir;
    use super::*;

    #[test]
    fn open_questions_survive_a_reopen_until_closed() {
        let dir = ScratchDir::new("questions");
        let store = Store::open(dir.path()).unwrap();
        store.question_open("q1", "{\"m\":1}", 10).unwrap();
        store.question_open("q2", "{\"m\":2}", 11).unwrap();
        assert!(store.question_is_open("q1").unwrap());
        assert!(!store.question_is_open("q3").unwrap());
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.questions_open().unwrap(),
            vec![
                ("q1".to_owned(), "{\"m\":1}".to_owned()),
                ("q2".to_owned(), "{\"m\":2}".to_owned())
            ]
        );
        store.question_close("q1").unwrap();
        assert_eq!(store.questions_open().unwrap().len(), 1);
    }

    #[test]
    fn the_door_records_a_question_under_its_mention_and_expires_the_left_over_once() {
        use acp_bridge_core::mention::test_mention;
        let dir = ScratchDir::new("questions-door");
        let questions = Questions::new(std::sync::Arc::new(Store::open(dir.path()).unwrap()));
        let (asked, answered) = (EventId::all_zeros(), EventId::from_slice(&[1; 32]).unwrap());
        let under = test_mention("room", 1, "may I?", true);
        questions.open(asked, &under).unwrap();
        questions.open(answered, &under).unwrap();
        questions.close(answered).unwrap();
        assert!(questions.is_open(asked).unwrap());
        assert!(!questions.is_open(answered).unwrap());

        let left_over = questions.expire_left_over().unwrap();
        assert_eq!(
            left_over,
            [LeftOver {
                question: asked,
                under: Some(under)
            }]
        );
        assert!(!questions.is_open(asked).unwrap());
        assert!(questions.expire_left_over().unwrap().is_empty());
    }
}
