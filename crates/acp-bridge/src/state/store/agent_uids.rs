//! Which uid each conversation's agent runs as (`--agent-uids`).
//!
//! A conversation is given the lowest uid of the operator's range that no
//! other conversation holds, on its first lease, and keeps it across
//! restarts: its workspace and the files its agent keeps there stay that
//! uid's. The uid is freed when the conversation's workspace is pruned
//! (a new conversation may then get it, with a fresh workspace). The
//! table's `UNIQUE` makes two conversations sharing a uid impossible, even
//! by a bug here.

use std::ops::RangeInclusive;
use std::sync::Arc;

use acp_bridge_core::mention::ConversationKey;
use rusqlite::{OptionalExtension, params};

use super::{Result, Store, sql_now};

/// The door to the conversations' uids: the only way to the table.
#[derive(Debug, Clone)]
pub(crate) struct AgentUids {
    store: Arc<Store>,
}

impl AgentUids {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        AgentUids { store }
    }

    /// The conversation's uid: the one it holds, else the lowest free one
    /// of `range`, now held; `None` when every uid of `range` is held.
    pub(crate) fn assign(
        &self,
        conversation: &ConversationKey,
        range: &RangeInclusive<u32>,
    ) -> Result<Option<u32>> {
        self.store
            .agent_uid_assign(conversation.as_str(), range, sql_now())
    }

    /// The conversations holding a uid, with it.
    pub(crate) fn held(&self) -> Result<Vec<(ConversationKey, u32)>> {
        Ok(self
            .store
            .agent_uids_held()?
            .into_iter()
            .map(|(conversation, uid)| (ConversationKey::from_journal(&conversation), uid))
            .collect())
    }

    /// The conversation's uid is free again.
    pub(crate) fn free(&self, conversation: &ConversationKey) -> Result<()> {
        self.store.agent_uid_free(conversation.as_str())
    }
}

impl Store {
    fn agent_uid_assign(
        &self,
        conversation: &str,
        range: &RangeInclusive<u32>,
        now: i64,
    ) -> Result<Option<u32>> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let held: Option<u32> = tx
            .prepare_cached("SELECT uid FROM agent_uid WHERE conversation = ?1")?
            .query_row(params![conversation], |row| row.get(0))
            .optional()?;
        if held.is_some() {
            return Ok(held);
        }
        let taken: Vec<u32> = tx
            .prepare_cached("SELECT uid FROM agent_uid WHERE uid BETWEEN ?1 AND ?2 ORDER BY uid")?
            .query_map(params![range.start(), range.end()], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let Some(free) = range.clone().find(|uid| taken.binary_search(uid).is_err()) else {
            return Ok(None);
        };
        tx.prepare_cached("INSERT INTO agent_uid (conversation, uid, assigned_at) VALUES (?1, ?2, ?3)")?
            .execute(params![conversation, free, now])?;
        tx.commit()?;
        Ok(Some(free))
    }

    fn agent_uids_held(&self) -> Result<Vec<(String, u32)>> {
        let held = self
            .conn()
            .prepare_cached("SELECT conversation, uid FROM agent_uid ORDER BY uid")?
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(held)
    }

    fn agent_uid_free(&self, conversation: &str) -> Result<()> {
        self.conn()
            .prepare_cached("DELETE FROM agent_uid WHERE conversation = ?1")?
            .execute(params![conversation])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::scratch::ScratchDir;

    fn key(name: &str) -> ConversationKey {
        ConversationKey::from_journal(name)
    }

    #[test]
    fn each_conversation_holds_the_lowest_free_uid_until_freed() {
        let dir = ScratchDir::new("agent-uids");
        let store = Arc::new(Store::open(dir.path()).expect("store"));
        let uids = AgentUids::new(Arc::clone(&store));
        let range = 61_000..=61_001;
        assert_eq!(uids.assign(&key("a"), &range).unwrap(), Some(61_000));
        assert_eq!(uids.assign(&key("b"), &range).unwrap(), Some(61_001));
        assert_eq!(uids.assign(&key("a"), &range).unwrap(), Some(61_000), "kept");
        assert_eq!(uids.assign(&key("c"), &range).unwrap(), None, "the range is full");
        uids.free(&key("a")).unwrap();
        assert_eq!(uids.assign(&key("c"), &range).unwrap(), Some(61_000));
        drop(uids);
        drop(store);
        let reopened = AgentUids::new(Arc::new(Store::open(dir.path()).expect("store")));
        assert_eq!(
            reopened.held().unwrap(),
            [(key("c"), 61_000), (key("b"), 61_001)],
            "kept across restarts"
        );
    }
}
