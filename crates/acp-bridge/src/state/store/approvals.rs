//! The owner's remembered "always" answers to the agent's permission
//! questions: per conversation and tool, allow or reject.
//!
//! Written when the owner answers a question in their own turn with an
//! "always" option, or says so with `!permissions allow|reject TOOL`; read
//! before a question is put to the owner, which the remembered verdict
//! then answers. A standing authority, so it is kept only for the
//! conversation it was given in: `!permissions forget` revokes it,
//! forgetting the conversation clears it, a `!rotate` keeps it (the owner's
//! choice is the conversation's, not the session's).

use std::sync::Arc;

use acp_bridge_core::approvals::Verdict;
use acp_bridge_core::mention::ConversationKey;
use rusqlite::{OptionalExtension, params};

use super::{Result, Store, sql_now};

/// The door to the remembered choices: the turn's driver (which reads and
/// writes them around a question) and `!permissions` go through it.
#[derive(Debug, Clone)]
pub(crate) struct Approvals {
    store: Arc<Store>,
}

impl Approvals {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Approvals { store }
    }

    /// The verdict remembered for `tool` in the conversation.
    pub(crate) fn remembered(&self, conversation: &ConversationKey, tool: &str) -> Result<Option<Verdict>> {
        let verdict = self.store.permission_choice(conversation.as_str(), tool)?;
        Ok(verdict.as_deref().and_then(Verdict::parse))
    }

    /// Remembers `verdict` for `tool` in the conversation, replacing an
    /// earlier one.
    pub(crate) fn remember(
        &self,
        conversation: &ConversationKey,
        tool: &str,
        verdict: Verdict,
    ) -> Result<()> {
        self.store
            .permission_choose(conversation.as_str(), tool, verdict.as_str(), sql_now())
    }

    /// The conversation's remembered choices, by tool.
    pub(crate) fn list(&self, conversation: &ConversationKey) -> Result<Vec<(String, Verdict)>> {
        let rows = self.store.permission_choices(conversation.as_str())?;
        Ok(rows
            .into_iter()
            .filter_map(|(tool, verdict)| Some((tool, Verdict::parse(&verdict)?)))
            .collect())
    }

    /// Forgets the choice for `tool` (`None`: every one) in the
    /// conversation; how many there were.
    pub(crate) fn forget(&self, conversation: &ConversationKey, tool: Option<&str>) -> Result<usize> {
        self.store.permission_forget(conversation.as_str(), tool)
    }
}

impl Store {
    fn permission_choice(&self, conversation: &str, tool: &str) -> Result<Option<String>> {
        let found = self
            .conn()
            .prepare_cached("SELECT verdict FROM permission_choice WHERE conversation = ?1 AND tool = ?2")?
            .query_row(params![conversation, tool], |row| row.get(0))
            .optional()?;
        Ok(found)
    }

    fn permission_choose(&self, conversation: &str, tool: &str, verdict: &str, now: i64) -> Result<()> {
        self.conn()
            .prepare_cached(
                "INSERT INTO permission_choice (conversation, tool, verdict, chosen_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (conversation, tool) DO UPDATE SET verdict = ?3, chosen_at = ?4",
            )?
            .execute(params![conversation, tool, verdict, now])?;
        Ok(())
    }

    fn permission_choices(&self, conversation: &str) -> Result<Vec<(String, String)>> {
        let conn = self.conn();
        let mut statement = conn.prepare_cached(
            "SELECT tool, verdict FROM permission_choice WHERE conversation = ?1 ORDER BY tool",
        )?;
        let rows = statement
            .query_map(params![conversation], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<std::result::Result<_, _>>()?;
        Ok(rows)
    }

    fn permission_forget(&self, conversation: &str, tool: Option<&str>) -> Result<usize> {
        let conn = self.conn();
        let forgotten = match tool {
            Some(tool) => conn
                .prepare_cached("DELETE FROM permission_choice WHERE conversation = ?1 AND tool = ?2")?
                .execute(params![conversation, tool])?,
            None => conn
                .prepare_cached("DELETE FROM permission_choice WHERE conversation = ?1")?
                .execute(params![conversation])?,
        };
        Ok(forgotten)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::scratch::ScratchDir;

    #[test]
    fn a_choice_is_per_conversation_and_tool_replaced_listed_and_forgotten() {
        let dir = ScratchDir::new("approvals");
        let approvals = Approvals::new(Arc::new(Store::open(dir.path()).unwrap()));
        let (room, other) = (
            ConversationKey::from_journal("note:room"),
            ConversationKey::from_journal("note:other"),
        );
        approvals.remember(&room, "Bash", Verdict::Allow).unwrap();
        approvals.remember(&room, "Edit", Verdict::Allow).unwrap();
        approvals.remember(&room, "Edit", Verdict::Reject).unwrap();
        assert_eq!(approvals.remembered(&room, "Bash").unwrap(), Some(Verdict::Allow));
        assert_eq!(approvals.remembered(&other, "Bash").unwrap(), None);
        assert_eq!(
            approvals.list(&room).unwrap(),
            [
                ("Bash".to_owned(), Verdict::Allow),
                ("Edit".to_owned(), Verdict::Reject)
            ]
        );
        assert_eq!(approvals.forget(&room, Some("Bash")).unwrap(), 1);
        assert_eq!(approvals.forget(&room, Some("Bash")).unwrap(), 0);
        approvals.remember(&other, "Bash", Verdict::Allow).unwrap();
        assert_eq!(approvals.forget(&room, None).unwrap(), 1);
        assert!(approvals.list(&room).unwrap().is_empty());
        assert_eq!(approvals.list(&other).unwrap().len(), 1);
    }
}
