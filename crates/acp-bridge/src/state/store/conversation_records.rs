//! Everything the store keeps for one conversation, forgotten or rotated in
//! one transaction.
//!
//! Each table keeps its own door for its daily reads and writes; this one
//! owns the two moments that cross them: `rotate` (the conversation's next
//! turn starts a fresh session, which must inherit nothing of the old one)
//! and `forget` (the conversation is gone: nothing of it is to come back).
//! Which table each keeps or clears is decided here, table by table, and a
//! test reads the schema so that a new table with a `conversation` column
//! must be placed in one of the lists below.

use std::sync::Arc;

use acp_bridge_core::mention::ConversationKey;
use rusqlite::params;

use super::{Result, Store};

/// What a fresh session must not inherit: the old session's id (and the
/// usage the agent reported for it), and how far it was given its thread
/// (the new one is given the thread again). The conversation's past
/// sessions (`conversation_session`) stay: `!resume` goes back to one.
const ROTATED: &[&str] = &["agent_session", "thread_context"];

/// What forgetting a conversation clears: its session, as rotating does,
/// and what was the conversation's own: the owner's model and mode
/// choices and the agent's last offer (`!model`, `!mode`), its agent
/// profile (`!agent`), the sessions it had (`!sessions`), the owner's
/// remembered permission answers (`!permissions`; a rotate keeps those, as
/// it keeps the choices).
const FORGOTTEN: &[&str] = &[
    "agent_session",
    "conversation_session",
    "thread_context",
    "control_choice",
    "agent_offer",
    "conversation_profile",
    "permission_choice",
];

/// Tables with a `conversation` column that forgetting keeps, and why.
#[cfg(test)]
const KEPT: &[(&str, &str)] = &[
    (
        "mention",
        "the journal: the seen set that keeps a replayed mention from being answered twice, pruned by --retention",
    ),
    (
        "turn_spend",
        "accounting: what was spent counts against the author's and the daemon's budgets for its period",
    ),
    (
        "agent_uid",
        "belongs to the workspace's files, which that uid owns: freed when the workspace is pruned, never handed to another conversation before",
    ),
];

/// The door to a conversation's records across tables.
#[derive(Debug, Clone)]
pub(crate) struct ConversationRecords {
    store: Arc<Store>,
}

impl ConversationRecords {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        ConversationRecords { store }
    }

    /// The conversation's next turn starts a fresh session: its kept
    /// session and context mark go; the owner's choices and its profile stay.
    pub(crate) fn rotate(&self, conversation: &ConversationKey) -> Result<()> {
        self.store.conversation_clear(conversation.as_str(), ROTATED)
    }

    /// Everything the conversation keeps goes, but the journal, the spend
    /// and its agent uid (see [`KEPT`]).
    pub(crate) fn forget(&self, conversation: &ConversationKey) -> Result<()> {
        self.store.conversation_clear(conversation.as_str(), FORGOTTEN)
    }
}

impl Store {
    /// Deletes the conversation's rows of `tables`, in one transaction.
    fn conversation_clear(&self, conversation: &str, tables: &[&str]) -> Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        for table in tables {
            tx.prepare_cached(&format!("DELETE FROM {table} WHERE conversation = ?1"))?
                .execute(params![conversation])?;
        }
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::scratch::ScratchDir;
    use crate::state::store::{
        AgentUids, Approvals, ContextMarks, Controls, ConversationProfiles, NewMention, Sessions, SpendBook,
        SpendRow,
    };
    use acp_bridge_core::approvals::Verdict;

    fn key(name: &str) -> ConversationKey {
        ConversationKey::from_journal(name)
    }

    /// The tables with a `conversation` column, read from the schema.
    fn conversation_tables(store: &Store) -> Vec<String> {
        let conn = store.conn();
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<std::result::Result<_, _>>()
            .unwrap();
        tables
            .into_iter()
            .filter(|table| {
                conn.prepare(&format!(
                    "SELECT 1 FROM pragma_table_info('{table}') WHERE name = 'conversation'"
                ))
                .unwrap()
                .exists([])
                .unwrap()
            })
            .collect()
    }

    /// How many rows of `table` belong to `conversation`.
    fn rows(store: &Store, table: &str, conversation: &str) -> i64 {
        store
            .conn()
            .query_row(
                &format!("SELECT count(*) FROM {table} WHERE conversation = ?1"),
                params![conversation],
                |row| row.get(0),
            )
            .unwrap()
    }

    /// Gives `conversation` a row in every table that keeps one, through
    /// each table's own door.
    fn seed(store: &Arc<Store>, conversation: &ConversationKey, event_id: &str) {
        Sessions::new(Arc::clone(store))
            .keep(conversation, "agent", "s1")
            .unwrap();
        ContextMarks::new(Arc::clone(store))
            .advance(conversation, 20, "bb")
            .unwrap();
        let controls = Controls::new(Arc::clone(store));
        controls.choose(conversation, "model", "deep").unwrap();
        controls.keep_offer(conversation, "{}").unwrap();
        ConversationProfiles::new(Arc::clone(store))
            .choose(conversation, "codex")
            .unwrap();
        Approvals::new(Arc::clone(store))
            .remember(conversation, "Bash", Verdict::Allow)
            .unwrap();
        let uid = AgentUids::new(Arc::clone(store))
            .assign(conversation, &(61_000..=61_009))
            .unwrap();
        assert!(uid.is_some());
        let spend = SpendRow {
            at: 1,
            author: "aa".into(),
            turns: 1,
            tokens: 10,
            cost: 0.5,
            currency: Some("USD".into()),
        };
        SpendBook::new(Arc::clone(store))
            .record(conversation, &spend)
            .unwrap();
        let mention = NewMention {
            event_id,
            conversation: conversation.as_str(),
            payload: "{}",
            accepted_at: 1,
        };
        store.journal_accept_all(&[mention]).unwrap();
    }

    #[test]
    fn forget_leaves_nothing_of_the_conversation_but_what_it_keeps_on_purpose() {
        let dir = ScratchDir::new("conversation-forget");
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (gone, other) = (key("note:gone"), key("note:other"));
        seed(&store, &gone, "e1");
        seed(&store, &other, "e2");
        let tables = conversation_tables(&store);
        for table in &tables {
            assert!(
                rows(&store, table, gone.as_str()) > 0,
                "table {table} keeps rows per conversation: seed it here and decide whether \
                 ConversationRecords::forget clears it (FORGOTTEN) or keeps it (KEPT, with why)"
            );
        }

        ConversationRecords::new(Arc::clone(&store))
            .forget(&gone)
            .unwrap();

        for table in &tables {
            let kept = KEPT.iter().any(|(name, _)| name == table);
            let left = rows(&store, table, gone.as_str());
            assert_eq!(
                left > 0,
                kept,
                "table {table}: {left} row(s) left after forget; kept on purpose: {kept}"
            );
            assert!(
                rows(&store, table, other.as_str()) > 0,
                "{table}: another conversation's rows stay"
            );
        }
        // Each door answers "nothing" for it.
        assert_eq!(
            Sessions::new(Arc::clone(&store)).of(&gone, "agent").unwrap(),
            None
        );
        assert_eq!(Sessions::new(Arc::clone(&store)).usage(&gone).unwrap(), None);
        assert_eq!(ContextMarks::new(Arc::clone(&store)).of(&gone).unwrap(), None);
        let controls = Controls::new(Arc::clone(&store));
        assert_eq!(controls.chosen(&gone, "model").unwrap(), None);
        assert!(Approvals::new(Arc::clone(&store)).list(&gone).unwrap().is_empty());
        assert_eq!(
            ConversationProfiles::new(Arc::clone(&store))
                .stored(&gone)
                .unwrap(),
            None
        );
        let listed: Vec<&str> = FORGOTTEN
            .iter()
            .copied()
            .chain(KEPT.iter().map(|(table, _)| *table))
            .collect();
        for table in listed {
            assert!(
                tables.iter().any(|found| found == table),
                "{table} is listed but has no conversation column"
            );
        }
    }

    #[test]
    fn rotate_drops_the_session_and_its_context_and_keeps_the_owner_s_choices() {
        let dir = ScratchDir::new("conversation-rotate");
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let room = key("note:room");
        seed(&store, &room, "e1");

        ConversationRecords::new(Arc::clone(&store))
            .rotate(&room)
            .unwrap();

        assert_eq!(
            Sessions::new(Arc::clone(&store)).of(&room, "agent").unwrap(),
            None
        );
        assert_eq!(ContextMarks::new(Arc::clone(&store)).of(&room).unwrap(), None);
        assert_eq!(
            Controls::new(Arc::clone(&store))
                .chosen(&room, "model")
                .unwrap()
                .as_deref(),
            Some("deep"),
            "the owner's choice is the conversation's, not the session's"
        );
        assert_eq!(
            ConversationProfiles::new(Arc::clone(&store))
                .stored(&room)
                .unwrap()
                .as_deref(),
            Some("codex")
        );
        assert_eq!(
            Approvals::new(Arc::clone(&store))
                .remembered(&room, "Bash")
                .unwrap(),
            Some(Verdict::Allow),
            "the owner's remembered answer is the conversation's too"
        );
        for table in [
            "control_choice",
            "agent_offer",
            "permission_choice",
            "conversation_profile",
            "agent_uid",
            "turn_spend",
            "mention",
        ] {
            assert_eq!(
                rows(&store, table, room.as_str()),
                1,
                "{table} is kept by a rotate"
            );
        }
    }
}
