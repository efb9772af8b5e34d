//! Which agent profile each conversation uses (`[agents.NAME]`).
//!
//! Once a conversation has run on a profile it keeps it, so that a second
//! author whose routing rule names another profile cannot flip its
//! session; only the owner's `!agent NAME` changes it. The first turn's
//! pick is kept without replacing anything ([`ConversationProfiles::keep_first`]),
//! the owner's choice replaces it ([`ConversationProfiles::choose`]). A
//! name kept here that is no longer configured is the resolver's concern
//! (`profiles::resolve`), not this table's: it is kept as written.

use std::sync::Arc;

use acp_bridge_core::mention::ConversationKey;
use rusqlite::{OptionalExtension, params};

use super::{Result, Store, sql_now};

/// The door to the conversations' profiles: the only way to the table.
#[derive(Debug, Clone)]
pub(crate) struct ConversationProfiles {
    store: Arc<Store>,
}

impl ConversationProfiles {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        ConversationProfiles { store }
    }

    /// The profile the conversation keeps, if it has run or been switched.
    pub(crate) fn stored(&self, conversation: &ConversationKey) -> Result<Option<String>> {
        self.store.conversation_profile(conversation.as_str())
    }

    /// Keeps `profile`, the pick of the conversation's first turn, unless
    /// the conversation already keeps one; the profile it keeps after.
    pub(crate) fn keep_first(&self, conversation: &ConversationKey, profile: &str) -> Result<String> {
        self.store
            .conversation_profile_keep_first(conversation.as_str(), profile, sql_now())
    }

    /// The owner's `!agent NAME`: the conversation keeps `profile` from now.
    pub(crate) fn choose(&self, conversation: &ConversationKey, profile: &str) -> Result<()> {
        self.store
            .conversation_profile_choose(conversation.as_str(), profile, sql_now())
    }
}

impl Store {
    fn conversation_profile(&self, conversation: &str) -> Result<Option<String>> {
        let found = self
            .conn()
            .prepare_cached("SELECT profile FROM conversation_profile WHERE conversation = ?1")?
            .query_row(params![conversation], |row| row.get(0))
            .optional()?;
        Ok(found)
    }

    fn conversation_profile_keep_first(&self, conversation: &str, profile: &str, now: i64) -> Result<String> {
        let conn = self.conn();
        conn.prepare_cached(
            "INSERT INTO conversation_profile (conversation, profile, chosen_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (conversation) DO NOTHING",
        )?
        .execute(params![conversation, profile, now])?;
        let kept = conn
            .prepare_cached("SELECT profile FROM conversation_profile WHERE conversation = ?1")?
            .query_row(params![conversation], |row| row.get(0))?;
        Ok(kept)
    }

    fn conversation_profile_choose(&self, conversation: &str, profile: &str, now: i64) -> Result<()> {
        self.conn()
            .prepare_cached(
                "INSERT INTO conversation_profile (conversation, profile, chosen_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (conversation) DO UPDATE SET profile = ?2, chosen_at = ?3",
            )?
            .execute(params![conversation, profile, now])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use acp_bridge_core::mention::ConversationKey;

    use super::ConversationProfiles;
    use crate::state::store::Store;
    use crate::state::store::scratch::ScratchDir;

    #[test]
    fn the_first_pick_sticks_until_the_owner_chooses_and_survives_a_reopen() {
        let dir = ScratchDir::new("conversation-profiles");
        let conversation = ConversationKey::from_journal("group:wss://relay.example'dev");
        let other = ConversationKey::from_journal("dm:abc");
        {
            let profiles = ConversationProfiles::new(Arc::new(Store::open(dir.path()).unwrap()));
            assert_eq!(profiles.stored(&conversation).unwrap(), None);
            assert_eq!(profiles.keep_first(&conversation, "claude").unwrap(), "claude");
            assert_eq!(
                profiles.keep_first(&conversation, "codex").unwrap(),
                "claude",
                "a second author's rule does not flip the conversation"
            );
            profiles.choose(&conversation, "codex").unwrap();
            assert_eq!(profiles.stored(&other).unwrap(), None, "per conversation");
        }
        let reopened = ConversationProfiles::new(Arc::new(Store::open(dir.path()).unwrap()));
        assert_eq!(reopened.stored(&conversation).unwrap().as_deref(), Some("codex"));
    }
}
