//! The 32-byte key of the MLS state's SQLCipher database.
//!
//! mdk's SQLite storage is always encrypted; the key must come from a file
//! (secrets come from files or the environment, never flags' values), by
//! default `marmot.key` in the state dir, created 0600 on first start. The
//! threat this answers: none against a reader of the state dir (the key lies
//! beside the database), but the database is useless alone (a copied
//! `marmot.sqlite`, a backup that skips the key). An operator who wants more
//! points `--marmot-key-file` elsewhere (a systemd credential,
//! `$CREDENTIALS_DIRECTORY/marmot-key`). The key is never logged.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::hex;

/// Hex digits of a key file: 32 bytes.
const KEY_HEX_LEN: usize = 64;

#[derive(Debug, thiserror::Error)]
pub(crate) enum KeyError {
    #[error("cannot read the Marmot key file {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("cannot create the Marmot key file {path}: {reason}")]
    Create { path: String, reason: String },
    #[error("the Marmot key file {path} does not hold 64 hex digits (a 32-byte key)")]
    Malformed { path: String },
}

/// The key in `path`, or a fresh random one written there (mode 0600,
/// never replacing a file) when `create` and no file exists.
pub(crate) fn load_or_create(path: &Path, create: bool) -> Result<[u8; 32], KeyError> {
    let shown = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse(text.trim()).ok_or(KeyError::Malformed { path: shown }),
        Err(error) if error.kind() == ErrorKind::NotFound && create => {
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).map_err(|error| KeyError::Create {
                path: shown.clone(),
                reason: error.to_string(),
            })?;
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|error| KeyError::Create {
                    path: shown.clone(),
                    reason: error.to_string(),
                })?;
            file.write_all(format!("{}\n", hex(&key)).as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|error| KeyError::Create {
                    path: shown,
                    reason: error.to_string(),
                })?;
            Ok(key)
        }
        Err(error) => Err(KeyError::Read {
            path: shown,
            reason: error.to_string(),
        }),
    }
}

fn parse(text: &str) -> Option<[u8; 32]> {
    if text.len() != KEY_HEX_LEN || !text.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (byte, pair) in key.iter_mut().zip(text.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_key_is_created_private_once_and_read_back_the_same() {
        let dir = std::env::temp_dir().join(format!("acp-bridge-marmot-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("marmot.key");
        let _ = std::fs::remove_file(&path);
        let created = load_or_create(&path, true).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(load_or_create(&path, true).unwrap(), created);
        std::fs::write(&path, "not a key").unwrap();
        assert!(matches!(
            load_or_create(&path, true),
            Err(KeyError::Malformed { .. })
        ));
        let missing = dir.join("absent.key");
        assert!(matches!(
            load_or_create(&missing, false),
            Err(KeyError::Read { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Someone who can write where the key goes plants a dangling symlink
    /// there, aimed at a file of their choosing: the daemon (perhaps root)
    /// refuses to create the key through it, and the target never appears.
    #[test]
    fn a_planted_symlink_is_never_followed_to_create_the_key() {
        let dir = std::env::temp_dir().join(format!("acp-bridge-marmot-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (path, target) = (dir.join("marmot.key"), dir.join("chosen-by-them"));
        let _ = std::fs::remove_file(&path);
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(matches!(
            load_or_create(&path, true),
            Err(KeyError::Create { .. })
        ));
        assert!(!target.exists(), "the key was written through the link");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
