//! Each conversation's agent session, kept across agent processes.
//!
//! An agent process ends (a crash, an idle reap, a restart of the daemon)
//! but its sessions can live on in the agent's own storage: agents that
//! advertise `session/resume` or `session/load` reopen them in a fresh
//! process. This table remembers which session a conversation had, and for
//! which agent command (a session of another agent means nothing), and the
//! context use and cost the agent last reported for it, for `!status`.

use std::sync::Arc;

use acp_bridge_core::mention::ConversationKey;
use rusqlite::{OptionalExtension, params};

use super::{Result, Store, sql_now};

/// What the agent last reported about a session's size and cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SessionUsage {
    pub used_tokens: Option<u64>,
    pub size_tokens: Option<u64>,
    pub cost: Option<f64>,
    pub currency: Option<String>,
}

/// The most characters of a session's title kept.
const TITLE_CHARS: usize = 200;

/// A session the conversation has had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PastSession {
    pub session_id: String,
    pub title: Option<String>,
    /// When it was last made the conversation's (Unix seconds).
    pub used_at: i64,
}

/// The door to the conversations' sessions: the pool keeps, reopens and
/// forgets them; the heart records and reads what the agent reported of
/// them. The only way to the table.
#[derive(Debug, Clone)]
pub(crate) struct Sessions {
    store: Arc<Store>,
}

impl Sessions {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Sessions { store }
    }

    /// The session the conversation had with `agent` (its command line),
    /// if any.
    pub(crate) fn of(&self, conversation: &ConversationKey, agent: &str) -> Result<Option<String>> {
        self.store.session_of(conversation.as_str(), agent)
    }

    /// Remembers the conversation's session; a new one replaces the old
    /// (and its usage, and the thread context the old one was given).
    pub(crate) fn keep(&self, conversation: &ConversationKey, agent: &str, session_id: &str) -> Result<()> {
        self.store
            .session_keep(conversation.as_str(), agent, session_id, sql_now())
    }

    /// The sessions the conversation has had with `agent`, the latest first.
    pub(crate) fn past(&self, conversation: &ConversationKey, agent: &str) -> Result<Vec<PastSession>> {
        self.store.sessions_past(conversation.as_str(), agent)
    }

    /// Keeps the title the agent gave `session_id`, one of the
    /// conversation's (`""`: cleared), cut to [`TITLE_CHARS`]: it is the
    /// agent's text, shown in the conversation's thread.
    pub(crate) fn record_title(
        &self,
        conversation: &ConversationKey,
        session_id: &str,
        title: &str,
    ) -> Result<()> {
        let title: String = title.chars().take(TITLE_CHARS).collect();
        self.store
            .session_title_record(conversation.as_str(), session_id, &title)
    }

    /// The title of the conversation's session, if its agent gave one.
    pub(crate) fn title(&self, conversation: &ConversationKey) -> Result<Option<String>> {
        self.store.session_title(conversation.as_str())
    }

    /// Forgets the conversation's session and what a fresh one must not
    /// inherit (`!rotate`): [`ConversationRecords::rotate`](super::ConversationRecords::rotate),
    /// the one place that says what that is.
    pub(crate) fn forget(&self, conversation: &ConversationKey) -> Result<()> {
        super::ConversationRecords::new(Arc::clone(&self.store)).rotate(conversation)
    }

    /// Records what the agent reported; a field it did not report keeps
    /// its last value.
    pub(crate) fn record_usage(&self, conversation: &ConversationKey, usage: &SessionUsage) -> Result<()> {
        self.store.session_usage_record(conversation.as_str(), usage)
    }

    /// What the agent last reported for the conversation's session.
    pub(crate) fn usage(&self, conversation: &ConversationKey) -> Result<Option<SessionUsage>> {
        self.store.session_usage(conversation.as_str())
    }
}

impl Store {
    /// The session the conversation had with `agent`, if any.
    pub(super) fn session_of(&self, conversation: &str, agent: &str) -> Result<Option<String>> {
        let found = self
            .conn()
            .prepare_cached("SELECT session_id FROM agent_session WHERE conversation = ?1 AND agent = ?2")?
            .query_row(params![conversation, agent], |row| row.get(0))
            .optional()?;
        Ok(found)
    }

    /// Remembers the conversation's session; a new one replaces the old
    /// (and its usage, and the thread context the old one was given).
    pub(super) fn session_keep(
        &self,
        conversation: &str,
        agent: &str,
        session_id: &str,
        now: i64,
    ) -> Result<()> {
        let replaced = self
            .conn()
            .prepare_cached(
                "INSERT INTO agent_session (conversation, agent, session_id, opened_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (conversation) DO UPDATE SET agent = ?2, session_id = ?3, opened_at = ?4,
                   used_tokens = NULL, size_tokens = NULL, cost = NULL, currency = NULL
                 WHERE session_id != ?3 OR agent != ?2",
            )?
            .execute(params![conversation, agent, session_id, now])?;
        if replaced > 0 {
            self.forget_context_mark(conversation)?;
        }
        self.conn()
            .prepare_cached(
                "INSERT INTO conversation_session (conversation, agent, session_id, used_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (conversation, session_id) DO UPDATE SET agent = ?2, used_at = ?4",
            )?
            .execute(params![conversation, agent, session_id, now])?;
        Ok(())
    }

    /// The sessions the conversation has had with `agent`, the latest first.
    pub(super) fn sessions_past(&self, conversation: &str, agent: &str) -> Result<Vec<PastSession>> {
        let past = self
            .conn()
            .prepare_cached(
                "SELECT session_id, title, used_at FROM conversation_session
                 WHERE conversation = ?1 AND agent = ?2 ORDER BY used_at DESC, session_id",
            )?
            .query_map(params![conversation, agent], |row| {
                Ok(PastSession {
                    session_id: row.get(0)?,
                    title: row.get::<_, Option<String>>(1)?.filter(|title| !title.is_empty()),
                    used_at: row.get(2)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(past)
    }

    /// Keeps the title the agent gave one of the conversation's sessions.
    pub(super) fn session_title_record(
        &self,
        conversation: &str,
        session_id: &str,
        title: &str,
    ) -> Result<()> {
        self.conn()
            .prepare_cached(
                "UPDATE conversation_session SET title = ?3 WHERE conversation = ?1 AND session_id = ?2",
            )?
            .execute(params![conversation, session_id, title])?;
        Ok(())
    }

    /// The title of the conversation's session, if its agent gave one.
    pub(super) fn session_title(&self, conversation: &str) -> Result<Option<String>> {
        let found: Option<Option<String>> = self
            .conn()
            .prepare_cached(
                "SELECT past.title FROM agent_session AS now JOIN conversation_session AS past
                   ON past.conversation = now.conversation AND past.session_id = now.session_id
                 WHERE now.conversation = ?1",
            )?
            .query_row(params![conversation], |row| row.get(0))
            .optional()?;
        Ok(found.flatten().filter(|title| !title.is_empty()))
    }

    /// Records what the agent reported; a field it did not report keeps
    /// its last value.
    pub(super) fn session_usage_record(&self, conversation: &str, usage: &SessionUsage) -> Result<()> {
        self.conn()
            .prepare_cached(
                "UPDATE agent_session SET used_tokens = coalesce(?2, used_tokens),
                   size_tokens = coalesce(?3, size_tokens), cost = coalesce(?4, cost),
                   currency = coalesce(?5, currency)
                 WHERE conversation = ?1",
            )?
            .execute(params![
                conversation,
                usage.used_tokens.map(sql_tokens),
                usage.size_tokens.map(sql_tokens),
                usage.cost,
                usage.currency
            ])?;
        Ok(())
    }

    /// What the agent last reported for the conversation's session.
    pub(super) fn session_usage(&self, conversation: &str) -> Result<Option<SessionUsage>> {
        let found = self
            .conn()
            .prepare_cached(
                "SELECT used_tokens, size_tokens, cost, currency FROM agent_session WHERE conversation = ?1",
            )?
            .query_row(params![conversation], |row| {
                Ok(SessionUsage {
                    used_tokens: row.get::<_, Option<i64>>(0)?.map(|tokens| tokens.max(0) as u64),
                    size_tokens: row.get::<_, Option<i64>>(1)?.map(|tokens| tokens.max(0) as u64),
                    cost: row.get(2)?,
                    currency: row.get(3)?,
                })
            })
            .optional()?;
        Ok(found)
    }
}

fn sql_tokens(tokens: u64) -> i64 {
    i64::try_from(tokens).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::scratch::ScratchDir;
    use super::*;

    #[test]
    fn a_conversation_keeps_one_session_per_agent_until_rotated() {
        let dir = ScratchDir::new("sessions");
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.session_of("room", "goose acp").unwrap(), None);
        store.session_keep("room", "goose acp", "s1", 1).unwrap();
        assert_eq!(
            store.session_of("room", "goose acp").unwrap().as_deref(),
            Some("s1")
        );
        assert_eq!(
            store.session_of("room", "claude").unwrap(),
            None,
            "another agent's session"
        );

        let usage = SessionUsage {
            used_tokens: Some(1200),
            size_tokens: Some(200_000),
            cost: Some(0.25),
            currency: Some("USD".into()),
        };
        store.session_usage_record("room", &usage).unwrap();
        let partial = SessionUsage {
            used_tokens: Some(1500),
            ..SessionUsage::default()
        };
        store.session_usage_record("room", &partial).unwrap();
        let kept = store.session_usage("room").unwrap().unwrap();
        assert_eq!((kept.used_tokens, kept.cost), (Some(1500), Some(0.25)));

        // The same session again keeps its usage; a new one starts afresh.
        store.session_keep("room", "goose acp", "s1", 2).unwrap();
        assert_eq!(store.session_usage("room").unwrap().unwrap().cost, Some(0.25));
        store.session_keep("room", "goose acp", "s2", 3).unwrap();
        assert_eq!(
            store.session_usage("room").unwrap().unwrap(),
            SessionUsage::default()
        );

        let store = Arc::new(store);
        Sessions::new(Arc::clone(&store))
            .forget(&ConversationKey::from_journal("room"))
            .unwrap();
        assert_eq!(store.session_of("room", "goose acp").unwrap(), None);
        assert_eq!(store.session_usage("room").unwrap(), None);
    }

    #[test]
    fn a_conversation_keeps_its_past_sessions_and_their_titles_and_no_one_else_s() {
        let dir = ScratchDir::new("past-sessions");
        let store = Store::open(dir.path()).unwrap();
        store.session_keep("room", "agent", "s1", 1).unwrap();
        store.session_title_record("room", "s1", "Fix the build").unwrap();
        assert_eq!(
            store.session_title("room").unwrap().as_deref(),
            Some("Fix the build")
        );
        store.session_keep("room", "agent", "s2", 2).unwrap();
        assert_eq!(store.session_title("room").unwrap(), None, "s2 has no title yet");
        store.session_keep("other", "agent", "s3", 3).unwrap();
        store.session_title_record("room", "s3", "not room's").unwrap();
        let past = store.sessions_past("room", "agent").unwrap();
        let ids: Vec<&str> = past.iter().map(|past| past.session_id.as_str()).collect();
        assert_eq!(ids, ["s2", "s1"], "the latest first, and only room's");
        assert_eq!(past[1].title.as_deref(), Some("Fix the build"));
        assert_eq!(
            store.session_title("other").unwrap(),
            None,
            "a title goes to its own conversation only"
        );
        assert!(store.sessions_past("room", "claude").unwrap().is_empty());
        // An agent's title is kept cut.
        let store = Arc::new(store);
        Sessions::new(Arc::clone(&store))
            .record_title(&ConversationKey::from_journal("room"), "s2", &"x".repeat(10_000))
            .unwrap();
        assert_eq!(store.session_title("room").unwrap().unwrap().len(), TITLE_CHARS);
        // Back to s1: it is the latest again, its title with it.
        store.session_keep("room", "agent", "s1", 4).unwrap();
        assert_eq!(store.sessions_past("room", "agent").unwrap()[0].session_id, "s1");
        assert_eq!(
            store.session_title("room").unwrap().as_deref(),
            Some("Fix the build")
        );
    }
}
