//! Permission questions the bridge posted to the owner and still waits on.
//!
//! An open question lives with its turn; a crash ends both. The turn's
//! mention is resumed from the journal, but the question already posted in
//! the thread would wait forever for an answer nobody listens to. So each
//! open question is recorded here with the mention it was asked under
//! (opaque JSON), and at start-up every one left over is marked expired in
//! its thread and forgotten.

use rusqlite::params;

use super::{Result, Store};

impl Store {
    /// Records an open question.
    pub fn question_open(&self, event_id: &str, payload: &str, now: i64) -> Result<()> {
        self.conn()
            .prepare_cached(
                "INSERT OR REPLACE INTO question (event_id, payload, asked_at) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![event_id, payload, now])?;
        Ok(())
    }

    /// Forgets a question (answered, timed out, cancelled, or expired).
    pub fn question_close(&self, event_id: &str) -> Result<()> {
        self.conn()
            .prepare_cached("DELETE FROM question WHERE event_id = ?1")?
            .execute(params![event_id])?;
        Ok(())
    }

    /// Whether `event_id` is a question this bridge posted and still waits on.
    pub fn question_is_open(&self, event_id: &str) -> Result<bool> {
        Ok(self
            .conn()
            .prepare_cached("SELECT 1 FROM question WHERE event_id = ?1")?
            .exists(params![event_id])?)
    }

    /// Questions still recorded open, oldest first: (event id, payload).
    pub fn questions_open(&self) -> Result<Vec<(String, String)>> {
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
}
