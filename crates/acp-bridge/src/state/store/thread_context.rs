//! Per conversation, how far its agent session was given its thread as
//! context (`--thread-context`): the newest second, and which of that
//! second's events; the next turn's context starts after them, so a
//! session is never told the same earlier message twice.
//!
//! Does not know what a thread is or how context is fetched; only keeps the
//! mark, which only moves forward until the conversation gets a new
//! session (`!rotate`, a session the agent lost): then it is forgotten, and
//! the new session is given the thread again.

use std::sync::Arc;

use acp_bridge_core::mention::ConversationKey;
use rusqlite::{OptionalExtension, params};

use super::{Result, Store};

/// The door to the thread-context marks, the only way to the table (a new
/// session forgets its conversation's mark inside the sessions table's
/// write). The mark's ids text is `thread_context`'s encoding, kept as
/// given.
#[derive(Debug, Clone)]
pub(crate) struct ContextMarks {
    store: Arc<Store>,
}

impl ContextMarks {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        ContextMarks { store }
    }

    /// What the conversation's session was given of its thread: the
    /// newest second, and the ids of that second's events it saw.
    pub(crate) fn of(&self, conversation: &ConversationKey) -> Result<Option<(i64, String)>> {
        self.store.context_mark(conversation.as_str())
    }

    /// Moves the conversation's mark to `created_at` with `event_ids`
    /// unless it is already at a later second.
    pub(crate) fn advance(
        &self,
        conversation: &ConversationKey,
        created_at: i64,
        event_ids: &str,
    ) -> Result<()> {
        self.store
            .advance_context_mark(conversation.as_str(), created_at, event_ids)
    }
}

impl Store {
    /// What the conversation's session was given of its thread: the
    /// newest second, and the ids (hex, comma-separated) of that second's
    /// events it saw.
    pub(super) fn context_mark(&self, conversation: &str) -> Result<Option<(i64, String)>> {
        let mark = self
            .conn()
            .prepare_cached("SELECT created_at, event_id FROM thread_context WHERE conversation = ?1")?
            .query_row(params![conversation], |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()?;
        Ok(mark)
    }

    /// Forgets the conversation's mark: its session is new and has seen
    /// nothing of the thread.
    pub(super) fn forget_context_mark(&self, conversation: &str) -> Result<()> {
        self.conn()
            .prepare_cached("DELETE FROM thread_context WHERE conversation = ?1")?
            .execute(params![conversation])?;
        Ok(())
    }

    /// Moves the conversation's mark to `created_at` with `event_ids` (all
    /// the ids seen at that second, the caller's union) unless it is
    /// already at a later second.
    pub(super) fn advance_context_mark(
        &self,
        conversation: &str,
        created_at: i64,
        event_ids: &str,
    ) -> Result<()> {
        self.conn()
            .prepare_cached(
                "INSERT INTO thread_context (conversation, created_at, event_id) VALUES (?1, ?2, ?3)
                 ON CONFLICT (conversation) DO UPDATE SET created_at = excluded.created_at, event_id = excluded.event_id
                 WHERE excluded.created_at >= thread_context.created_at",
            )?
            .execute(params![conversation, created_at, event_ids])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::state::store::Store;
    use crate::state::store::scratch::ScratchDir;

    #[test]
    fn the_context_mark_only_moves_forward() {
        let dir = ScratchDir::new("context-mark");
        let store = Store::open(dir.path()).expect("store");
        assert_eq!(store.context_mark("note:a").expect("read"), None);
        store.advance_context_mark("note:a", 20, "bb").expect("write");
        store.advance_context_mark("note:a", 10, "ff").expect("write");
        assert_eq!(
            store.context_mark("note:a").expect("read"),
            Some((20, "bb".to_owned())),
            "an earlier second does not move it back"
        );
        store.advance_context_mark("note:a", 20, "aa,bb").expect("write");
        assert_eq!(
            store.context_mark("note:a").expect("read"),
            Some((20, "aa,bb".to_owned())),
            "the same second takes the caller's ids"
        );
        store.advance_context_mark("note:a", 21, "00").expect("write");
        assert_eq!(
            store.context_mark("note:a").expect("read"),
            Some((21, "00".to_owned()))
        );
        assert_eq!(store.context_mark("note:b").expect("read"), None);
    }

    #[test]
    fn a_new_session_has_seen_nothing_of_the_thread() {
        let dir = ScratchDir::new("context-mark-session");
        let store = Store::open(dir.path()).expect("store");
        store.session_keep("note:a", "agent", "s1", 1).expect("keep");
        store.advance_context_mark("note:a", 20, "bb").expect("write");
        store
            .session_keep("note:a", "agent", "s1", 2)
            .expect("the same session");
        assert!(store.context_mark("note:a").expect("read").is_some());
        store
            .session_keep("note:a", "agent", "s2", 3)
            .expect("a new session");
        assert_eq!(store.context_mark("note:a").expect("read"), None);
    }
}
