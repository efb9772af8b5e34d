//! The database schema and its forward-only migrations.
//!
//! `PRAGMA user_version` holds the number of migrations applied. Opening runs
//! the missing ones in order, all in one transaction with the version bump,
//! so a crash mid-migration leaves the file as it was. A migration is never
//! edited once released: change the schema by appending one. A file whose
//! version is above [`SUPPORTED_VERSION`] was written by a newer build and is
//! refused without being touched, since this build cannot know what its
//! tables mean.
//!
//! Tables are STRICT (SQLite checks the column types) and states are TEXT
//! with a CHECK, so a bad write fails loudly instead of being read back as
//! something else.

use rusqlite::{Connection, TransactionBehavior};

use super::{Result, StoreError};

/// Version 1: seen set, watermarks, mention journal, outbox.
const V1: &str = "
CREATE TABLE seen (
    event_id TEXT PRIMARY KEY NOT NULL,
    seen_at  INTEGER NOT NULL
) WITHOUT ROWID, STRICT;
CREATE INDEX seen_by_age ON seen (seen_at);

CREATE TABLE watermark (
    relay      TEXT PRIMARY KEY NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID, STRICT;

CREATE TABLE outbox (
    seq        INTEGER PRIMARY KEY,
    event_id   TEXT NOT NULL UNIQUE,
    relay_hint TEXT,
    json       TEXT NOT NULL,
    stored_at  INTEGER NOT NULL,
    sent_at    INTEGER
) STRICT;
CREATE INDEX outbox_unsent ON outbox (seq) WHERE sent_at IS NULL;
CREATE INDEX outbox_sent_by_age ON outbox (sent_at) WHERE sent_at IS NOT NULL;

CREATE TABLE mention (
    seq          INTEGER PRIMARY KEY,
    event_id     TEXT NOT NULL UNIQUE,
    conversation TEXT NOT NULL,
    payload      TEXT NOT NULL,
    accepted_at  INTEGER NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    state        TEXT NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'answered', 'notified', 'dropped')),
    finished_at  INTEGER,
    reply_id     TEXT REFERENCES outbox (event_id) ON DELETE SET NULL,
    CHECK ((state = 'pending') = (finished_at IS NULL))
) STRICT;
CREATE INDEX mention_pending ON mention (accepted_at, seq) WHERE state = 'pending';
CREATE INDEX mention_finished_by_age ON mention (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX mention_reply ON mention (reply_id) WHERE reply_id IS NOT NULL;
";

/// Version 2: permission questions posted to the owner and not yet closed,
/// so that after a crash their threads can be told they expired.
const V2: &str = "
CREATE TABLE question (
    event_id TEXT PRIMARY KEY NOT NULL,
    payload  TEXT NOT NULL,
    asked_at INTEGER NOT NULL
) WITHOUT ROWID, STRICT;
";

/// Version 3: the journal is the seen set. An id seen but no longer
/// journalled (its row was pruned before the seen entry) is kept for dedup
/// as a finished `dropped` row with an empty payload.
const V3: &str = "
INSERT INTO mention (event_id, conversation, payload, accepted_at, state, finished_at)
SELECT event_id, '', '{}', seen_at, 'dropped', seen_at FROM seen
WHERE event_id NOT IN (SELECT event_id FROM mention);
DROP TABLE seen;
";

/// Version 4: each conversation's agent session (which agent command it
/// belongs to), so a fresh agent process can resume or load it, and the
/// usage the agent last reported for it.
const V4: &str = "
CREATE TABLE agent_session (
    conversation TEXT PRIMARY KEY NOT NULL,
    agent        TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    opened_at    INTEGER NOT NULL,
    used_tokens  INTEGER,
    size_tokens  INTEGER,
    cost         REAL,
    currency     TEXT
) WITHOUT ROWID, STRICT;
";

/// Version 5: process groups of running agents, so that a start after a
/// crash can end the ones the crashed daemon left (`pool::reaper`).
const V5_AGENT_GROUPS: &str = "
CREATE TABLE agent_group (
    pgid        INTEGER PRIMARY KEY NOT NULL,
    boot_id     TEXT NOT NULL,
    start_ticks INTEGER NOT NULL,
    started_at  INTEGER NOT NULL
) STRICT;
";

/// Version 6: each outbox entry's own publishing state, so that one entry
/// a relay keeps refusing never delays the others: how often it was tried,
/// when it is due again (unix seconds; 0 = at once), and, once a relay
/// refused it for good (NIP-01 `blocked:`, `invalid:` …), when and why. A
/// refused entry is never published again; housekeeping prunes it after the
/// retention like a sent one.
const V6_OUTBOX_STATE: &str = "
ALTER TABLE outbox ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0);
ALTER TABLE outbox ADD COLUMN next_attempt_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN refused_at INTEGER;
ALTER TABLE outbox ADD COLUMN refused_reason TEXT;
DROP INDEX outbox_unsent;
CREATE INDEX outbox_due ON outbox (next_attempt_at, seq)
    WHERE sent_at IS NULL AND refused_at IS NULL;
CREATE INDEX outbox_refused_by_age ON outbox (refused_at) WHERE refused_at IS NOT NULL;
";

/// Version 7: threads the bot answered in (`--follow-threads`).
const V7_ANSWERED_THREADS: &str = "
CREATE TABLE answered_thread (
    root        TEXT PRIMARY KEY NOT NULL,
    answered_at INTEGER NOT NULL
) WITHOUT ROWID, STRICT;
CREATE INDEX answered_thread_by_age ON answered_thread (answered_at);
";

/// Version 8: the owner's model and mode per conversation, and what the
/// agent last offered it (`!model`, `!mode`).
const V8_CONTROLS: &str = "
CREATE TABLE control_choice (
    conversation TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('model', 'mode')),
    value        TEXT NOT NULL,
    chosen_at    INTEGER NOT NULL,
    PRIMARY KEY (conversation, kind)
) WITHOUT ROWID, STRICT;
CREATE TABLE agent_offer (
    conversation TEXT PRIMARY KEY NOT NULL,
    offer        TEXT NOT NULL,
    seen_at      INTEGER NOT NULL
) WITHOUT ROWID, STRICT;
CREATE INDEX agent_offer_by_age ON agent_offer (seen_at);
";

/// Version 9: per conversation, the newest thread event its agent session
/// was given as context (`--thread-context`).
const V9_THREAD_CONTEXT: &str = "
CREATE TABLE thread_context (
    conversation TEXT PRIMARY KEY NOT NULL,
    created_at   INTEGER NOT NULL,
    event_id     TEXT NOT NULL
) WITHOUT ROWID, STRICT;
";

/// Version 10: when the bot first answered in a thread, so that a reply
/// older than that answer is not taken for a follow-up to it.
const V10_THREAD_FIRST_ANSWER: &str = "
ALTER TABLE answered_thread ADD COLUMN first_answered_at INTEGER;
UPDATE answered_thread SET first_answered_at = answered_at;
";

/// Version 11: the NIP-29 groups the bot is a member of by its own
/// request or finding (see `groups::membership`), so that a group dropped
/// from `--group` gets a leave request at the next start.
const V11_JOINED_GROUPS: &str = "
CREATE TABLE joined_group (
    relay     TEXT NOT NULL,
    group_id  TEXT NOT NULL,
    joined_at INTEGER NOT NULL,
    PRIMARY KEY (relay, group_id)
) WITHOUT ROWID, STRICT;
";

/// Version 12: the agent profile each conversation keeps (its first
/// turn's pick, or the owner's `!agent NAME`), see
/// `store::conversation_profiles`. Conversations without a row use the
/// resolver's pick (before profiles: the one profile `default`).
const V12_CONVERSATION_PROFILES: &str = "
CREATE TABLE conversation_profile (
    conversation TEXT PRIMARY KEY,
    profile      TEXT NOT NULL,
    chosen_at    INTEGER NOT NULL
) WITHOUT ROWID, STRICT;
";

/// Version 13: each turn's spend, as the agent reported it (see
/// `budget`): sums per author, conversation and period come from here;
/// the budget warnings given, once per scope and period; and the owner's
/// `!budget` overrides of the limits.
const V13_TURN_SPEND: &str = "
CREATE TABLE turn_spend (
    at           INTEGER NOT NULL,
    conversation TEXT NOT NULL,
    author       TEXT NOT NULL,
    turns        INTEGER NOT NULL,
    tokens       INTEGER NOT NULL,
    cost         REAL NOT NULL,
    currency     TEXT
) STRICT;
CREATE INDEX turn_spend_at ON turn_spend (at);
CREATE INDEX turn_spend_author_at ON turn_spend (author, at);
CREATE INDEX turn_spend_conversation_at ON turn_spend (conversation, at);
CREATE TABLE budget_warning (
    scope        TEXT NOT NULL,
    whom         TEXT NOT NULL,
    period_start INTEGER NOT NULL,
    PRIMARY KEY (scope, whom, period_start)
) WITHOUT ROWID, STRICT;
CREATE TABLE budget_override (
    scope   TEXT NOT NULL,
    period  TEXT NOT NULL,
    amounts TEXT NOT NULL,
    PRIMARY KEY (scope, period)
) WITHOUT ROWID, STRICT;
";

/// Version 14: when each schedule last fired (see `crate::heart::schedule`), for
/// the catch-up run of a fire time missed while the daemon was down; and
/// the schedules the owner set from chat (`!every`, `!at`).
const V14_SCHEDULES: &str = "
CREATE TABLE schedule_fire (
    schedule_id TEXT NOT NULL PRIMARY KEY,
    last_due    INTEGER NOT NULL
) WITHOUT ROWID, STRICT;
CREATE TABLE chat_schedule (
    id     TEXT NOT NULL PRIMARY KEY,
    timing TEXT NOT NULL,
    target TEXT NOT NULL,
    prompt TEXT NOT NULL,
    since  INTEGER NOT NULL
) WITHOUT ROWID, STRICT;
";

/// Version 15: the uid each conversation's agent runs as
/// (`--agent-uids`), one conversation per uid.
const V15_AGENT_UIDS: &str = "
CREATE TABLE agent_uid (
    conversation TEXT NOT NULL PRIMARY KEY,
    uid          INTEGER NOT NULL UNIQUE,
    assigned_at  INTEGER NOT NULL
) WITHOUT ROWID, STRICT;
";

/// Version 16: the owner's remembered "always" answers to the agent's
/// permission questions, per conversation and tool (see
/// `store::approvals`).
const V16_PERMISSION_CHOICES: &str = "
CREATE TABLE permission_choice (
    conversation TEXT NOT NULL,
    tool         TEXT NOT NULL,
    verdict      TEXT NOT NULL CHECK (verdict IN ('allow', 'reject')),
    chosen_at    INTEGER NOT NULL,
    PRIMARY KEY (conversation, tool)
) WITHOUT ROWID, STRICT;
";

/// Version 17: every session a conversation has had, with the title its
/// agent gave it (`!sessions` lists only these, `!resume` reopens only
/// these: a conversation never reaches another's sessions), and when it
/// was last made the conversation's.
const V17_CONVERSATION_SESSIONS: &str = "
CREATE TABLE conversation_session (
    conversation TEXT NOT NULL,
    agent        TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    title        TEXT,
    used_at      INTEGER NOT NULL,
    PRIMARY KEY (conversation, session_id)
) WITHOUT ROWID, STRICT;
";

/// Version 18: the owner's `!set` choices of the agent's other config
/// options, kept beside `!model` / `!mode` as kind `option:ID` (the table
/// is rebuilt: SQLite cannot alter a CHECK).
const V18_OPTION_CHOICES: &str = "
CREATE TABLE control_choice_rebuilt (
    conversation TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('model', 'mode') OR kind GLOB 'option:?*'),
    value        TEXT NOT NULL,
    chosen_at    INTEGER NOT NULL,
    PRIMARY KEY (conversation, kind)
) WITHOUT ROWID, STRICT;
INSERT INTO control_choice_rebuilt SELECT conversation, kind, value, chosen_at FROM control_choice;
DROP TABLE control_choice;
ALTER TABLE control_choice_rebuilt RENAME TO control_choice;
";

/// Version 19: a sequence number per answered thread, bumped by every
/// answer in it, so that a relay link asks only for the threads answered
/// since its last look (`seq > last`) instead of re-reading a minute of
/// them by date after every answer (BENCHMARKS §10). It is taken as
/// `MAX(seq) + 1` inside the writing transaction: SQLite serializes
/// writers, so a later commit always carries a larger number and a
/// reader can never skip one. Rows from before have none; a relay link
/// reads them by date when it (re)connects.
const V19_ANSWERED_THREAD_SEQ: &str = "
ALTER TABLE answered_thread ADD COLUMN seq INTEGER;
CREATE INDEX answered_thread_by_seq ON answered_thread (seq);
";

/// Every migration, oldest first; `user_version` N means the first N ran.
const MIGRATIONS: &[&str] = &[
    V1,
    V2,
    V3,
    V4,
    V5_AGENT_GROUPS,
    V6_OUTBOX_STATE,
    V7_ANSWERED_THREADS,
    V8_CONTROLS,
    V9_THREAD_CONTEXT,
    V10_THREAD_FIRST_ANSWER,
    V11_JOINED_GROUPS,
    V12_CONVERSATION_PROFILES,
    V13_TURN_SPEND,
    V14_SCHEDULES,
    V15_AGENT_UIDS,
    V16_PERMISSION_CHOICES,
    V17_CONVERSATION_SESSIONS,
    V18_OPTION_CHOICES,
    V19_ANSWERED_THREAD_SEQ,
];

/// The schema version this build writes.
pub(super) const SUPPORTED_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database up to [`SUPPORTED_VERSION`].
pub(super) fn migrate(conn: &mut Connection) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if found > SUPPORTED_VERSION {
        return Err(StoreError::NewerSchema {
            found,
            supported: SUPPORTED_VERSION,
        });
    }
    if found == SUPPORTED_VERSION {
        return Ok(());
    }
    let applied = usize::try_from(found).unwrap_or(0);
    for sql in &MIGRATIONS[applied..] {
        tx.execute_batch(sql)?;
    }
    tx.pragma_update(None, "user_version", SUPPORTED_VERSION)?;
    tx.commit()?;
    tracing::info!(from = found, to = SUPPORTED_VERSION, "store: schema migrated");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use super::super::scratch::ScratchDir;
    use super::*;

    #[test]
    fn fresh_database_reaches_supported_version_and_reopens_without_migrating() {
        let dir = ScratchDir::new("schema");
        drop(Store::open(dir.path()).unwrap());
        // A second open would fail with "table already exists" if it re-ran V1.
        let store = Store::open(dir.path()).unwrap();
        let version: i64 = store
            .conn()
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(version, SUPPORTED_VERSION);
    }

    #[test]
    fn version_2_seen_entries_stay_duplicates_after_the_seen_table_goes() {
        let dir = ScratchDir::new("v3");
        std::fs::create_dir_all(dir.path()).unwrap();
        let db = dir.path().join(super::super::DB_FILE_NAME);
        {
            let conn = Connection::open(&db).unwrap();
            conn.execute_batch(V1).unwrap();
            conn.execute_batch(V2).unwrap();
            conn.pragma_update(None, "user_version", 2).unwrap();
            conn.execute_batch(
                "INSERT INTO seen VALUES ('journalled', 10), ('pruned-from-journal', 20);
                 INSERT INTO mention (event_id, conversation, payload, accepted_at)
                 VALUES ('journalled', 'room', '{\"id\":1}', 10);",
            )
            .unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert!(store.journal_contains("journalled").unwrap());
        assert!(store.journal_contains("pruned-from-journal").unwrap());
        assert_eq!(
            store.journal_state("pruned-from-journal").unwrap(),
            Some(super::super::MentionState::Dropped)
        );
        let pending = store.journal_pending().unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].payload, r#"{"id":1}"#, "journalled rows are untouched");
        let seen_tables: i64 = store
            .conn()
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name = 'seen'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(seen_tables, 0);
    }

    #[test]
    fn unknown_mention_state_is_rejected_by_the_schema() {
        let dir = ScratchDir::new("check");
        let store = Store::open(dir.path()).unwrap();
        let err = store
            .conn()
            .execute(
                "INSERT INTO mention (event_id, conversation, payload, accepted_at, state, finished_at)
                 VALUES ('aa', 'c', '{}', 1, 'lost', 2)",
                [],
            )
            .unwrap_err();
        assert!(err.to_string().contains("CHECK"), "{err}");
    }
}
