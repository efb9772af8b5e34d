//! mdk's file kept in SQLite's write-ahead-log mode.
//!
//! mdk opens its SQLCipher file with SQLite's default rollback journal: a
//! commit writes each page it changes twice (the old copy to the journal,
//! then the page itself), and SQLCipher encrypts and MACs (HMAC-SHA512)
//! every page it writes. A mention answered in a Marmot group commits
//! several times (the mention's processing, the answer's creation, their
//! message records), and those page writes were more than half of the
//! instructions such a mention cost the daemon (BENCHMARKS §10). In WAL
//! mode a commit appends each changed page once and syncs once; mdk leaves
//! `synchronous` at FULL, so each commit is as durable as before, and
//! SQLite gives the `-wal` and `-shm` files the database file's own
//! permissions (the pages in `-wal` are encrypted like the file's).
//!
//! The mode lives in the file itself, so it is set on a connection of the
//! daemon's own, before mdk's opens the file, and mdk's connection then
//! reads it. mdk has no setting for it.

use std::path::Path;

use mdk_sqlite_storage::EncryptionConfig;
use mdk_sqlite_storage::encryption::apply_encryption;
use rusqlite::Connection;

/// Puts the existing MLS file at `path`, encrypted under `key`, in WAL
/// mode (a no-op once it is); why not, if it cannot.
pub(super) fn write_ahead(path: &Path, key: [u8; 32]) -> Result<(), String> {
    let connection = Connection::open(path).map_err(|error| error.to_string())?;
    apply_encryption(&connection, &EncryptionConfig::new(key)).map_err(|error| error.to_string())?;
    let mode: String = connection
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(|error| error.to_string())?;
    match mode.eq_ignore_ascii_case("wal") {
        true => Ok(()),
        false => Err(format!("SQLite kept the journal mode {mode:?} instead of WAL")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::mls::{MLS_DB_FILE_NAME, MLS_KEY_FILE_NAME, MlsState, key};
    use crate::state::store::scratch::ScratchDir;
    use mdk_sqlite_storage::MdkSqliteStorage;
    use nostr_sdk::prelude::Keys;
    use std::os::unix::fs::PermissionsExt;

    /// The journal mode of the MLS file in `dir`, read with its key.
    fn journal_mode(dir: &Path) -> String {
        let key = key::load_or_create(&dir.join(MLS_KEY_FILE_NAME), false).unwrap();
        let connection = Connection::open(dir.join(MLS_DB_FILE_NAME)).unwrap();
        apply_encryption(&connection, &EncryptionConfig::new(key)).unwrap();
        connection
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .unwrap()
    }

    #[tokio::test]
    async fn a_new_mls_file_is_in_wal_mode_and_mdk_works_on_it() {
        let dir = ScratchDir::new("mls-wal-new");
        std::fs::create_dir_all(dir.path()).unwrap();
        let state = MlsState::open(dir.path(), None).unwrap();
        let package = state.key_package(Keys::generate().public_key(), Vec::new()).await;
        assert!(package.is_ok(), "mdk writes through WAL: {package:?}");
        assert_eq!(journal_mode(dir.path()), "wal");
        // Another user of the host reads none of it: the log holds the
        // state's pages, with the file's own permissions.
        for sidecar in ["-wal", "-shm"] {
            let file = dir.path().join(format!("{MLS_DB_FILE_NAME}{sidecar}"));
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{}: {mode:o}", file.display());
        }
    }

    #[test]
    fn a_file_mdk_made_in_rollback_mode_is_moved_to_wal_when_opened() {
        let dir = ScratchDir::new("mls-wal-upgrade");
        std::fs::create_dir_all(dir.path()).unwrap();
        let key = key::load_or_create(&dir.path().join(MLS_KEY_FILE_NAME), true).unwrap();
        let path = dir.path().join(MLS_DB_FILE_NAME);
        drop(MdkSqliteStorage::new_with_key(&path, EncryptionConfig::new(key)).unwrap());
        assert_eq!(journal_mode(dir.path()), "delete", "mdk's own default");
        drop(MlsState::open(dir.path(), None).unwrap());
        assert_eq!(journal_mode(dir.path()), "wal");
    }
}
