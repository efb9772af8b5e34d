//! The MLS state of the bot's Marmot (encrypted) groups: mdk's own SQLite
//! file, `marmot.sqlite` in the state dir, encrypted with SQLCipher under
//! the key of [`key`].
//!
//! A door like the store's (docs/architecture.md): the one owner of that
//! file, handed only to the stages that use it. It signs nothing: mdk
//! returns a key package's unsigned content and tags (the bot's signer signs
//! them, `outbound/marmot`), and signs a group message's kind 445 wrapper
//! with an ephemeral key of its own.
//!
//! mdk is synchronous SQLite and MLS crypto work: every call runs on the
//! blocking pool, one at a time behind a mutex (an epoch's secrets are read
//! and advanced by the same calls, so two must not interleave), and never
//! holds a runtime worker across an await.

pub(crate) mod key;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use mdk_core::MDK;
use mdk_core::key_packages::KeyPackageEventData;
use mdk_sqlite_storage::{EncryptionConfig, MdkSqliteStorage};
use nostr_sdk::prelude::{PublicKey, RelayUrl};

/// The MLS database's file name in the state dir.
pub(crate) const MLS_DB_FILE_NAME: &str = "marmot.sqlite";
/// The default key file's name in the state dir.
pub(crate) const MLS_KEY_FILE_NAME: &str = "marmot.key";

#[derive(Debug, thiserror::Error)]
pub(crate) enum MlsError {
    #[error(transparent)]
    Key(#[from] key::KeyError),
    #[error("cannot open the Marmot state {path}: {reason}")]
    Open { path: String, reason: String },
    #[error("Marmot: {0}")]
    Mdk(#[from] mdk_core::Error),
    #[error("Marmot: the blocking pool stopped: {0}")]
    Stopped(String),
}

/// The bot's MLS state; cheap to clone (one database behind it).
#[derive(Clone)]
pub(crate) struct MlsState {
    mdk: Arc<Mutex<MDK<MdkSqliteStorage>>>,
}

impl std::fmt::Debug for MlsState {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("MlsState")
    }
}

impl MlsState {
    /// Opens (or creates) `marmot.sqlite` in `state_dir` with the key in
    /// `key_file` (`None`: `marmot.key` in the state dir, created on first
    /// start; a named file must exist).
    pub(crate) fn open(state_dir: &Path, key_file: Option<&Path>) -> Result<MlsState, MlsError> {
        let key = match key_file {
            Some(path) => key::load_or_create(path, false)?,
            None => key::load_or_create(&state_dir.join(MLS_KEY_FILE_NAME), true)?,
        };
        let path: PathBuf = state_dir.join(MLS_DB_FILE_NAME);
        let storage = MdkSqliteStorage::new_with_key(&path, EncryptionConfig::new(key)).map_err(|error| {
            MlsError::Open {
                path: path.display().to_string(),
                reason: error.to_string(),
            }
        })?;
        Ok(MlsState {
            mdk: Arc::new(Mutex::new(MDK::new(storage))),
        })
    }

    /// Runs `work` on mdk on the blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&MDK<MdkSqliteStorage>) -> Result<T, mdk_core::Error> + Send + 'static,
    ) -> Result<T, MlsError> {
        let mdk = Arc::clone(&self.mdk);
        let done = tokio::task::spawn_blocking(move || {
            // A panic mid-call leaves mdk's own transactions rolled back.
            let mdk = mdk.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            work(&mdk)
        })
        .await
        .map_err(|error| MlsError::Stopped(error.to_string()))?;
        Ok(done?)
    }

    /// A fresh key package of `bot`'s, naming `relays` (MIP-00): its
    /// unsigned content and the tags of both kinds (30443, legacy 443).
    pub(crate) async fn key_package(
        &self,
        bot: PublicKey,
        relays: Vec<RelayUrl>,
    ) -> Result<KeyPackageEventData, MlsError> {
        self.blocking(move |mdk| mdk.create_key_package_for_event(&bot, relays))
            .await
    }
}
