//! The app's own keys for the NIP-46 channel: the key the daemon talks to
//! its remote signer with. Not the bot's key: it signs nothing but the
//! requests to the signer, and lets the signer recognise this daemon.
//!
//! Generated once and kept in the state dir (mode 0600), so that the
//! approval a bunker gives this app survives restarts.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nostr_sdk::prelude::Keys;

/// The file in the state dir that holds the app's channel key (hex).
pub(super) const APP_KEY_FILE: &str = "nip46-app.key";

#[derive(Debug, thiserror::Error)]
pub enum AppKeyError {
    #[error("cannot read the NIP-46 app key `{path}`: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("cannot create the NIP-46 app key `{path}`: {source}")]
    Create { path: PathBuf, source: std::io::Error },
}

/// The app keys kept in `state_dir`, created on first use.
pub(super) fn load_or_create(state_dir: &Path) -> Result<Keys, AppKeyError> {
    let path = state_dir.join(APP_KEY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            if let Ok(metadata) = std::fs::metadata(&path)
                && metadata.permissions().mode() & 0o077 != 0
            {
                tracing::warn!(path = %path.display(), "the NIP-46 app key is readable by other users; chmod 600 it");
            }
            Keys::parse(text.trim()).map_err(|error| AppKeyError::Read {
                path,
                reason: error.to_string(),
            })
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => create(&path),
        Err(error) => Err(AppKeyError::Read {
            path,
            reason: error.to_string(),
        }),
    }
}

fn create(path: &Path) -> Result<Keys, AppKeyError> {
    let keys = Keys::generate();
    let create_error = |source| AppKeyError::Create {
        path: path.to_owned(),
        source,
    };
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).map_err(create_error)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(create_error)?;
    file.write_all(keys.secret_key().to_secret_hex().as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(create_error)?;
    tracing::info!(path = %path.display(), app = %keys.public_key(), "created the NIP-46 app key");
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::scratch::ScratchDir;

    #[test]
    fn the_app_key_is_made_once_private_and_kept() {
        let dir = ScratchDir::new("app-keys");
        let first = load_or_create(dir.path()).expect("created");
        let mode = std::fs::metadata(dir.path().join(APP_KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = load_or_create(dir.path()).expect("read");
        assert_eq!(first.public_key(), again.public_key());
    }
}
