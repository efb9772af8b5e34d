//! `acp-bridge keygen --out PATH`: a fresh bot key pair.
//!
//! The secret (nsec) goes to a new file readable by its owner only (0600,
//! never overwriting an existing file); the public key (npub) is printed,
//! since that is what people and the owner's config need.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nostr_sdk::prelude::{Keys, ToBech32};

/// Writes a new key to `path`; returns the npub.
pub fn write_new_key(path: &Path) -> Result<String, String> {
    let keys = Keys::generate();
    let nsec = keys
        .secret_key()
        .to_bech32()
        .map_err(|error| format!("cannot encode the key: {error}"))?;
    let npub = keys
        .public_key()
        .to_bech32()
        .map_err(|error| format!("cannot encode the key: {error}"))?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::AlreadyExists => {
                format!("`{}` already exists; refusing to overwrite a key", path.display())
            }
            _ => format!("cannot create `{}`: {error}", path.display()),
        })?;
    writeln!(file, "{nsec}")
        .and_then(|()| file.sync_all())
        .map_err(|error| format!("cannot write `{}`: {error}", path.display()))?;
    Ok(npub)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn writes_a_0600_nsec_and_refuses_to_overwrite() {
        let dir = std::env::temp_dir().join(format!("acp-bridge-keygen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("bot.nsec");
        let npub = write_new_key(&path).expect("written");
        assert!(npub.starts_with("npub1"));
        let mode = std::fs::metadata(&path).expect("metadata").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let written = std::fs::read_to_string(&path).expect("read");
        let keys = Keys::parse(written.trim()).expect("a valid nsec");
        assert_eq!(keys.public_key().to_bech32().expect("npub"), npub);
        assert!(
            write_new_key(&path)
                .expect_err("exists")
                .contains("already exists")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
