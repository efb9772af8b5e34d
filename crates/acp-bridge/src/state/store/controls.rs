//! The owner's model, mode and options per conversation, and what the agent
//! offered.
//!
//! `!model ID`, `!mode ID` and `!set` (kind `option:ID`) are kept here, so a choice outlives the
//! agent process and the daemon: it is applied again at every turn's start
//! where the session does not hold it (a resumed or fresh session).
//! Beside it, the agent's last offer for the conversation (its choices, the
//! current values, how it is steered), as an opaque JSON text the heart
//! writes and reads, so that `!model` can list the choices between turns
//! and after a restart. Neither is forgotten on `!rotate`: the owner's
//! choice is the conversation's, not the session's.

use std::sync::Arc;

use acp_bridge_core::mention::ConversationKey;
use rusqlite::{OptionalExtension, params};

use super::{Result, Store, sql_now};

/// The door to the owner's choices and the agent's offers, per
/// conversation: the heart's `!model` / `!mode` and the turn's start go
/// through it. The only way to the two tables. A choice's kind (`model`,
/// `mode`) and the offer's JSON are the heart's words, kept as given.
#[derive(Debug, Clone)]
pub(crate) struct Controls {
    store: Arc<Store>,
}

impl Controls {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Controls { store }
    }

    /// The owner's choice of `kind` for the conversation.
    pub(crate) fn chosen(&self, conversation: &ConversationKey, kind: &str) -> Result<Option<String>> {
        self.store.control_chosen(conversation.as_str(), kind)
    }

    /// Keeps the owner's choice of `kind`, replacing an earlier one.
    pub(crate) fn choose(&self, conversation: &ConversationKey, kind: &str, value: &str) -> Result<()> {
        self.store
            .control_choose(conversation.as_str(), kind, value, sql_now())
    }

    /// Forgets the owner's choice of `kind` if it is still `value`, and
    /// says whether it did (a newer choice stays).
    pub(crate) fn drop_if_still(
        &self,
        conversation: &ConversationKey,
        kind: &str,
        value: &str,
    ) -> Result<bool> {
        self.store.control_drop(conversation.as_str(), kind, value)
    }

    /// Keeps what the agent offered the conversation (opaque JSON).
    pub(crate) fn keep_offer(&self, conversation: &ConversationKey, offer: &str) -> Result<()> {
        self.store
            .agent_offer_keep(conversation.as_str(), offer, sql_now())
    }

    /// What the agent last offered the conversation; with `None`, the
    /// offer recorded most recently for any conversation.
    pub(crate) fn offer(&self, conversation: Option<&ConversationKey>) -> Result<Option<String>> {
        self.store.agent_offer(conversation.map(ConversationKey::as_str))
    }

    /// The offer recorded most recently whose JSON names the agent
    /// profile `profile` (its `profile` field).
    pub(crate) fn offer_of_profile(&self, profile: &str) -> Result<Option<String>> {
        self.store.agent_offer_of_profile(profile)
    }
}

impl Store {
    /// The owner's choice of `kind` (`model`, `mode`) for the conversation.
    pub(super) fn control_chosen(&self, conversation: &str, kind: &str) -> Result<Option<String>> {
        let found = self
            .conn()
            .prepare_cached("SELECT value FROM control_choice WHERE conversation = ?1 AND kind = ?2")?
            .query_row(params![conversation, kind], |row| row.get(0))
            .optional()?;
        Ok(found)
    }

    /// Keeps the owner's choice of `kind`, replacing an earlier one.
    pub(super) fn control_choose(&self, conversation: &str, kind: &str, value: &str, now: i64) -> Result<()> {
        self.conn()
            .prepare_cached(
                "INSERT INTO control_choice (conversation, kind, value, chosen_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (conversation, kind) DO UPDATE SET value = ?3, chosen_at = ?4",
            )?
            .execute(params![conversation, kind, value, now])?;
        Ok(())
    }

    /// Forgets the owner's choice of `kind` if it is still `value`, and
    /// says whether it did: a choice the owner made while `value` was
    /// being applied (and refused) stays.
    pub(super) fn control_drop(&self, conversation: &str, kind: &str, value: &str) -> Result<bool> {
        let dropped = self
            .conn()
            .prepare_cached(
                "DELETE FROM control_choice WHERE conversation = ?1 AND kind = ?2 AND value = ?3",
            )?
            .execute(params![conversation, kind, value])?;
        Ok(dropped > 0)
    }

    /// Keeps what the agent offered the conversation at a turn's start
    /// (written when it changed).
    pub(super) fn agent_offer_keep(&self, conversation: &str, offer: &str, now: i64) -> Result<()> {
        self.conn()
            .prepare_cached(
                "INSERT INTO agent_offer (conversation, offer, seen_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (conversation) DO UPDATE SET offer = ?2, seen_at = ?3",
            )?
            .execute(params![conversation, offer, now])?;
        Ok(())
    }

    /// What the agent last offered the conversation; with `None`, the offer
    /// recorded most recently for any conversation (for a conversation
    /// before its first turn).
    pub(super) fn agent_offer(&self, conversation: Option<&str>) -> Result<Option<String>> {
        let conn = self.conn();
        let found = match conversation {
            Some(conversation) => conn
                .prepare_cached("SELECT offer FROM agent_offer WHERE conversation = ?1")?
                .query_row(params![conversation], |row| row.get(0))
                .optional()?,
            None => conn
                .prepare_cached("SELECT offer FROM agent_offer ORDER BY seen_at DESC LIMIT 1")?
                .query_row([], |row| row.get(0))
                .optional()?,
        };
        Ok(found)
    }
}

impl Store {
    /// See [`Controls::offer_of_profile`].
    pub(super) fn agent_offer_of_profile(&self, profile: &str) -> Result<Option<String>> {
        let found = self
            .conn()
            .prepare_cached(
                "SELECT offer FROM agent_offer WHERE CASE WHEN json_valid(offer) THEN json_extract(offer, '$.profile') END = ?1
                 ORDER BY seen_at DESC LIMIT 1",
            )?
            .query_row(params![profile], |row| row.get(0))
            .optional()?;
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use crate::state::store::Store;
    use crate::state::store::scratch::ScratchDir;

    #[test]
    fn choices_are_kept_replaced_and_forgotten_per_kind() {
        let dir = ScratchDir::new("controls");
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.control_chosen("c", "model").unwrap(), None);
        store.control_choose("c", "model", "fast", 1).unwrap();
        store.control_choose("c", "model", "deep", 2).unwrap();
        store.control_choose("c", "mode", "ask", 2).unwrap();
        store.control_choose("c", "option:effort", "high", 2).unwrap();
        assert!(
            store.control_choose("c", "option:", "x", 2).is_err(),
            "an option has an id"
        );
        assert!(store.control_choose("c", "speed", "x", 2).is_err());
        assert_eq!(
            store.control_chosen("c", "model").unwrap().as_deref(),
            Some("deep")
        );
        assert!(
            !store.control_drop("c", "model", "fast").unwrap(),
            "a newer choice than the refused one stays"
        );
        assert_eq!(
            store.control_chosen("c", "model").unwrap().as_deref(),
            Some("deep")
        );
        assert!(store.control_drop("c", "model", "deep").unwrap());
        assert_eq!(store.control_chosen("c", "model").unwrap(), None);
        assert_eq!(store.control_chosen("c", "mode").unwrap().as_deref(), Some("ask"));
    }

    #[test]
    fn the_latest_offer_stands_in_for_a_new_conversation() {
        let dir = ScratchDir::new("offers");
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.agent_offer(None).unwrap(), None);
        store.agent_offer_keep("a", "{\"a\":1}", 1).unwrap();
        store.agent_offer_keep("b", "{\"b\":1}", 2).unwrap();
        store.agent_offer_keep("a", "{\"a\":2}", 1).unwrap();
        assert_eq!(
            store.agent_offer(Some("a")).unwrap().as_deref(),
            Some("{\"a\":2}")
        );
        assert_eq!(store.agent_offer(None).unwrap().as_deref(), Some("{\"b\":1}"));
        store.agent_offer_keep("c", "{\"profile\":\"codex\"}", 3).unwrap();
        store.agent_offer_keep("d", "not json", 4).unwrap();
        assert_eq!(
            store.agent_offer_of_profile("codex").unwrap().as_deref(),
            Some("{\"profile\":\"codex\"}")
        );
        assert_eq!(store.agent_offer_of_profile("claude").unwrap(), None);
    }
}
