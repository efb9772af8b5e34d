//! Durable state: everything that must survive a crash or a restart, in one
//! embedded SQLite file under `--state-dir`.
//!
//! What lives here, one submodule per table:
//! - `watermark`: per relay URL, the newest `created_at` processed, which
//!   never moves backwards;
//! - `journal`: every accepted mention from acceptance to its outcome, the
//!   durable queue that is re-read at start-up, and the seen set (dedup);
//! - `outbox`: signed reply events, stored once before they are published
//!   and published again (same event id) until a relay says OK or refuses
//!   them for good;
//! - `questions`: permission questions posted and still open;
//! - `sessions`: each conversation's agent session, for resume and load;
//! - `agent_groups`: process groups of the agents that run now;
//! - `controls`, `threads`, `thread_context`, `joined_groups`: the owner's
//!   choices and the agent's offers, the threads the bot answered in, what
//!   each session was given of its thread, the NIP-29 groups it joined;
//! - `spend`: what each turn spent, per author, for the budgets;
//! - `approvals`: the owner's remembered "always" answers to the agent's
//!   permission questions, per conversation and tool.
//!
//! One door crosses tables: `conversation_records` (`ConversationRecords`)
//! rotates or forgets a conversation's rows in every table that keeps some,
//! in one transaction.
//!
//! Each table has one door: a small type in the table's file (`Questions`,
//! `Sessions`, `AgentGroups`, `Controls`, `Watermarks`, `AnsweredThreads`,
//! `ContextMarks`, `JoinedGroups`, `Outbox`, `SpendBook`, `Approvals`), built by the daemon from the
//! one `Arc<Store>` and handed only to the stages that use that table, so a
//! stage's fields say which tables it touches. The table's SQL methods on
//! [`Store`] are `pub(super)`: the door is the only way in. The journal's
//! door is the ledger (`crate::state::ledger`, outside this module, as docs/architecture.md
//! has it), so the journal's methods are `pub(crate)` for it; the few left
//! `pub` are the public face the integration tests and benches seed a
//! state dir with.
//!
//! Storing a reply and finishing the mentions it answers is one transaction
//! ([`Store::outbox_put`]): after a crash a mention is either still pending
//! (its turn runs again) or answered with its reply in the outbox (the same
//! signed event is published again), never both and never neither. That is
//! the exactly-once guarantee of the daemon.
//!
//! The SQL knows nothing of Nostr: rows keep ids as lowercase hex strings,
//! events and mention payloads as opaque JSON strings, timestamps as unix
//! seconds passed in (no SQL method reads a clock). The doors above it
//! speak the domain's types (`EventId`, `RelayUrl`, `ConversationKey`,
//! `Mention`) and map them onto those rows; a door whose caller has no
//! time of its own reads the clock (`sql_now`).
//!
//! Every method is synchronous and is one short transaction on one
//! connection behind a mutex: in WAL mode with `synchronous=NORMAL` that is
//! microseconds to about a millisecond (the outbox insert alone commits
//! with `synchronous=FULL`, see [`Store::outbox_put`]), so async callers call it directly
//! rather than through `spawn_blocking`. A poisoned mutex is recovered: a
//! panic mid-call drops its open transaction, which rolls it back.
//!
//! A state dir belongs to one daemon: [`Store::open`] takes an exclusive lock
//! on `acp-bridge.lock` beside the database and holds it for the life of the
//! [`Store`]; a second daemon on the same dir fails with
//! [`StoreError::Locked`] instead of sharing the seen set and the outbox.

mod agent_groups;
mod agent_uids;
mod approvals;
mod chat_schedules;
mod controls;
mod conversation_profiles;
mod conversation_records;
mod joined_groups;
mod journal;
mod outbox;
mod questions;
mod schedule_fires;
mod schema;
mod sessions;
mod spend;
mod thread_context;
mod threads;
mod watermark;

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::Connection;

pub(crate) use agent_groups::{AgentGroup, AgentGroups};
pub(crate) use agent_uids::AgentUids;
pub(crate) use approvals::Approvals;
pub(crate) use chat_schedules::{ChatScheduleRow, ChatSchedules};
pub(crate) use controls::Controls;
pub(crate) use conversation_profiles::ConversationProfiles;
pub(crate) use conversation_records::ConversationRecords;
pub(crate) use joined_groups::JoinedGroups;
pub(crate) use outbox::Outbox;
pub(crate) use questions::{LeftOver, Questions};
pub(crate) use schedule_fires::ScheduleFires;
pub(crate) use sessions::{PastSession, SessionUsage, Sessions};
pub(crate) use spend::{SpendBook, SpendRow, Whose};
pub(crate) use thread_context::ContextMarks;
pub use threads::AnsweredThreads;
pub(crate) use watermark::Watermarks;

/// File name of the database inside the state dir.
const DB_FILE_NAME: &str = "acp-bridge.sqlite3";
/// File name of the lock file inside the state dir.
const LOCK_FILE_NAME: &str = "acp-bridge.lock";
/// How long a statement waits for a busy database before failing. Only an
/// outside reader (an operator's `sqlite3` shell, a backup) can make it busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Room for every statement of the store in the prepared-statement cache.
const STATEMENT_CACHE_CAPACITY: usize = 32;

/// The daemon's durable state. See the module doc.
#[derive(Debug)]
pub struct Store {
    // Field order is drop order: the connection closes (and checkpoints the
    // WAL) before the lock is released to a successor.
    conn: Mutex<Connection>,
    path: PathBuf,
    _lock: File,
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The state dir or the lock file could not be created or opened.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// SQLite refused an operation.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A door could not turn a domain value into the JSON its row keeps.
    #[error("cannot serialize a row's payload: {0}")]
    Serialize(#[from] serde_json::Error),
    /// Another process holds the lock of this state dir.
    #[error("{} is locked: another acp-bridge uses this state dir", path.display())]
    Locked { path: PathBuf },
    /// The database was written by a newer build whose schema this one does
    /// not know; it is left untouched.
    #[error("database schema version {found} is newer than this build supports ({supported})")]
    NewerSchema { found: i64, supported: i64 },
}

/// Result of every store operation.
pub(crate) type Result<T> = std::result::Result<T, StoreError>;

/// Unix seconds as the store keeps them (SQLite INTEGER): a `u64` past
/// `i64::MAX` saturates instead of wrapping into the past.
pub(crate) fn sql_seconds(seconds: u64) -> i64 {
    i64::try_from(seconds).unwrap_or(i64::MAX)
}

/// The current time in the store's unit, for callers to pass in: the
/// store's methods read no clock, so its tests choose the time.
pub(crate) fn sql_now() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    sql_seconds(since_epoch.as_secs())
}

/// A mention to take into the journal ([`Store::journal_accept`]).
#[derive(Debug, Clone, Copy)]
pub struct NewMention<'a> {
    /// Id of the mention event; also its dedup key.
    pub event_id: &'a str,
    /// Key of the conversation the mention belongs to (caller's choice).
    pub conversation: &'a str,
    /// Opaque JSON handed back by [`Store::journal_pending`].
    pub payload: &'a str,
    /// Unix seconds.
    pub accepted_at: i64,
}

/// An accepted mention that has no outcome yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingMention {
    /// Where the next page of pending mentions starts after this one.
    pub cursor: PendingCursor,
    pub event_id: String,
    pub conversation: String,
    pub payload: String,
    pub accepted_at: i64,
    /// Turns started for this mention so far ([`Store::journal_record_attempt`]).
    pub attempts: u32,
}

/// A position in the pending mentions' order (accepted at, then accepted
/// order), for reading them a page at a time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PendingCursor {
    accepted_at: i64,
    seq: i64,
}

/// A signed event to store in the outbox ([`Store::outbox_put`]).
#[derive(Debug, Clone, Copy)]
pub struct OutgoingEvent<'a> {
    pub event_id: &'a str,
    /// The relay the event goes to (where the mention came from); `None`
    /// for every configured relay.
    pub relay_hint: Option<&'a str>,
    /// The signed event, exactly as it will be published.
    pub json: &'a str,
}

/// A stored event the relay has not yet acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutboxEntry {
    pub event_id: String,
    /// See [`OutgoingEvent::relay_hint`].
    pub relay_hint: Option<String>,
    pub json: String,
    /// Unix seconds.
    pub stored_at: i64,
    /// Publishing attempts that ended without an OK so far.
    pub attempts: u32,
}

/// The outbox entries relays refused for good, for `!status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OutboxRefusals {
    /// Entries refused and not yet pruned.
    pub count: u64,
    /// The newest refusal's reason, as the relay gave it.
    pub last_reason: Option<String>,
}

/// How a pending mention ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// A reply answers it (through [`Store::outbox_put`]).
    Answered,
    /// A notice was (or is to be) published instead of an answer.
    Notified,
    /// Given up on without any event.
    Dropped,
}

/// Where a journalled mention stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MentionState {
    Pending,
    Answered,
    Notified,
    Dropped,
}

impl Store {
    /// Opens (creating if needed) `<state_dir>/acp-bridge.sqlite3`.
    ///
    /// A missing state dir is created with mode 0700 (an existing one keeps
    /// the mode its operator gave it). The lock on `<state_dir>/acp-bridge.lock`
    /// is taken before the database is touched and held until the `Store`
    /// is dropped; when another process (or another `Store` in this one)
    /// holds it, this fails with [`StoreError::Locked`]. The schema is then
    /// migrated forward to the version of this build; a database from a newer
    /// build fails with [`StoreError::NewerSchema`] and is not modified.
    pub fn open(state_dir: &Path) -> Result<Store> {
        create_state_dir(state_dir)?;
        let lock = lock_state_dir(state_dir)?;
        let path = state_dir.join(DB_FILE_NAME);
        let mut conn = Connection::open(&path)?;
        configure(&conn)?;
        schema::migrate(&mut conn)?;
        tracing::debug!(path = %path.display(), "store opened");
        Ok(Store {
            conn: Mutex::new(conn),
            path,
            _lock: lock,
        })
    }

    /// The SQLite file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection, recovered if a panicking caller poisoned the mutex:
    /// its transaction was rolled back when the panic dropped it.
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Finish {
    fn state(self) -> MentionState {
        match self {
            Finish::Answered => MentionState::Answered,
            Finish::Notified => MentionState::Notified,
            Finish::Dropped => MentionState::Dropped,
        }
    }
}

impl MentionState {
    /// The TEXT stored in `mention.state` (see the CHECK in [`schema`]).
    fn as_sql(self) -> &'static str {
        match self {
            MentionState::Pending => "pending",
            MentionState::Answered => "answered",
            MentionState::Notified => "notified",
            MentionState::Dropped => "dropped",
        }
    }

    fn from_sql(text: &str) -> Option<MentionState> {
        Some(match text {
            "pending" => MentionState::Pending,
            "answered" => MentionState::Answered,
            "notified" => MentionState::Notified,
            "dropped" => MentionState::Dropped,
            _ => return None,
        })
    }
}

fn create_state_dir(state_dir: &Path) -> Result<()> {
    if state_dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(state_dir).map_err(|source| StoreError::Io {
        path: state_dir.to_path_buf(),
        source,
    })
}

fn lock_state_dir(state_dir: &Path) -> Result<File> {
    let path = state_dir.join(LOCK_FILE_NAME);
    let io_err = |source| StoreError::Io {
        path: path.clone(),
        source,
    };
    let mut options = OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(&path).map_err(io_err)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(StoreError::Locked { path }),
        Err(TryLockError::Error(source)) => Err(io_err(source)),
    }
}

/// Connection settings, applied on every open (none of them is stored in
/// the file except the journal mode).
fn configure(conn: &Connection) -> Result<()> {
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        // Some file systems (network mounts) cannot do WAL; rollback journal
        // is slower but just as safe.
        tracing::warn!(journal_mode = %mode, "store: WAL unavailable, using rollback journal");
    }
    // NORMAL in WAL mode loses nothing when the process crashes, only
    // possibly the last transactions on power loss, and does not fsync on
    // every commit.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    Ok(())
}

#[cfg(test)]
pub(crate) mod scratch {
    //! Unique scratch dirs for store tests, removed when dropped.

    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};

    static NEXT: AtomicU32 = AtomicU32::new(0);

    /// A path under the system temp dir that does not exist yet; the store
    /// creates it. Removed with its contents on drop.
    #[derive(Debug)]
    pub(crate) struct ScratchDir(PathBuf);

    impl ScratchDir {
        pub(crate) fn new(label: &str) -> ScratchDir {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let name = format!("acp-bridge-store-{}-{n}-{label}", std::process::id());
            let path = std::env::temp_dir().join(name);
            let _ = std::fs::remove_dir_all(&path);
            ScratchDir(path)
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for ScratchDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scratch::ScratchDir;
    use super::*;

    #[test]
    fn store_is_shareable_between_tasks() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Store>();
    }

    #[test]
    fn a_panic_mid_transaction_leaves_the_store_usable_and_the_write_undone() {
        let dir = ScratchDir::new("poison");
        let store = Store::open(dir.path()).unwrap();
        std::thread::scope(|scope| {
            let crashed = scope
                .spawn(|| {
                    let mut conn = store.conn();
                    let tx = conn.transaction().unwrap();
                    tx.execute(
                        "INSERT INTO mention (event_id, conversation, payload, accepted_at)
                         VALUES ('half', 'c', '{}', 1)",
                        [],
                    )
                    .unwrap();
                    panic!("caller panics mid-transaction");
                })
                .join();
            assert!(crashed.is_err());
        });
        assert!(store.conn.is_poisoned());
        assert!(!store.journal_contains("half").unwrap());
        assert!(journal::tests::accept(&store, "after", 2));
    }

    #[test]
    fn second_open_of_a_live_state_dir_is_locked_until_the_first_drops() {
        let dir = ScratchDir::new("lock");
        let first = Store::open(dir.path()).unwrap();
        match Store::open(dir.path()) {
            Err(StoreError::Locked { path }) => assert_eq!(path, dir.path().join(LOCK_FILE_NAME)),
            other => panic!("expected Locked, got {other:?}"),
        }
        drop(first);
        let second = Store::open(dir.path()).unwrap();
        assert_eq!(second.path(), dir.path().join(DB_FILE_NAME));
    }

    #[cfg(unix)]
    #[test]
    fn missing_state_dir_is_created_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = ScratchDir::new("mode");
        let state_dir = dir.path().join("nested").join("state");
        let store = Store::open(&state_dir).unwrap();
        let mode = std::fs::metadata(&state_dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(store.path().is_file());
    }

    #[test]
    fn database_from_a_newer_build_is_refused_untouched() {
        let dir = ScratchDir::new("newer");
        drop(Store::open(dir.path()).unwrap());
        let db = dir.path().join(DB_FILE_NAME);
        let too_new = schema::SUPPORTED_VERSION + 1;
        Connection::open(&db)
            .unwrap()
            .pragma_update(None, "user_version", too_new)
            .unwrap();

        match Store::open(dir.path()) {
            Err(StoreError::NewerSchema { found, supported }) => {
                assert_eq!(found, too_new);
                assert_eq!(supported, schema::SUPPORTED_VERSION);
            }
            other => panic!("expected NewerSchema, got {other:?}"),
        }
        let version: i64 = Connection::open(&db)
            .unwrap()
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(version, too_new);
    }

    #[test]
    fn a_failed_open_releases_the_lock() {
        let dir = ScratchDir::new("relock");
        drop(Store::open(dir.path()).unwrap());
        let db = dir.path().join(DB_FILE_NAME);
        Connection::open(&db)
            .unwrap()
            .pragma_update(None, "user_version", schema::SUPPORTED_VERSION + 1)
            .unwrap();
        assert!(matches!(
            Store::open(dir.path()),
            Err(StoreError::NewerSchema { .. })
        ));
        // The refused open must not keep the dir locked.
        match Store::open(dir.path()) {
            Err(StoreError::NewerSchema { .. }) => {}
            other => panic!("expected NewerSchema again, got {other:?}"),
        }
    }
}
