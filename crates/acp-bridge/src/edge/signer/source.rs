//! Where the bot's signatures come from, as configured: the bot's own key
//! (`--secret-key-file`, `ACP_BRIDGE_SECRET_KEY`) or a remote signer
//! (`--signer bunker://…`, `--signer-file PATH`, NIP-46). Validation only;
//! [`super::open`] connects.

use std::fmt;
use std::path::Path;

use nostr_connect::prelude::NostrConnectURI;
use nostr_sdk::prelude::{Keys, PublicKey};

/// The configured signer. `Debug` shows no secret.
#[derive(Clone)]
pub enum SignerSource {
    /// The bot's key, held by the daemon.
    Keys(Keys),
    /// A NIP-46 remote signer reached through its `bunker://` URI.
    Bunker(BunkerUri),
}

impl SignerSource {
    /// The bot's public key when it is known without asking anyone (a key
    /// file); a remote signer tells it at start.
    pub fn known_public_key(&self) -> Option<PublicKey> {
        match self {
            SignerSource::Keys(keys) => Some(keys.public_key()),
            SignerSource::Bunker(_) => None,
        }
    }
}

impl fmt::Debug for SignerSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignerSource::Keys(keys) => f.debug_tuple("Keys").field(&keys.public_key()).finish(),
            SignerSource::Bunker(uri) => f.debug_tuple("Bunker").field(uri).finish(),
        }
    }
}

/// A `bunker://` URI. Its `secret` (a one-time connection token) never
/// reaches a log: `Debug` and [`BunkerUri::redacted`] leave it out.
#[derive(Clone)]
pub struct BunkerUri(NostrConnectURI);

impl BunkerUri {
    /// Parses `text` (surrounding whitespace ignored). Only `bunker://`:
    /// `nostrconnect://` pairing is not supported (the daemon has no one to
    /// show a pairing code to).
    pub fn parse(text: &str) -> Result<Self, String> {
        let uri = NostrConnectURI::parse(text.trim()).map_err(|_| {
            "is not a valid bunker:// URI (bunker://<signer-pubkey>?relay=wss://…&secret=…)".to_owned()
        })?;
        match uri {
            NostrConnectURI::Bunker { ref relays, .. } if relays.is_empty() => {
                Err("names no relay (add ?relay=wss://…)".to_owned())
            }
            NostrConnectURI::Bunker { .. } => Ok(BunkerUri(uri)),
            NostrConnectURI::Client { .. } => {
                Err("is a nostrconnect:// pairing URI; give the signer's bunker:// URI instead".to_owned())
            }
        }
    }

    /// Reads the URI from `path` (a secret file, like the key file).
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            secret_file_unreadable(path, &error, "write the signer's bunker:// URI there")
        })?;
        Self::parse(&text).map_err(|problem| format!("`{}` {problem}", path.display()))
    }

    pub fn uri(&self) -> &NostrConnectURI {
        &self.0
    }

    /// The URI without its secret, fit for a log line.
    pub fn redacted(&self) -> String {
        match &self.0 {
            NostrConnectURI::Bunker {
                remote_signer_public_key,
                relays,
                ..
            } => NostrConnectURI::Bunker {
                remote_signer_public_key: *remote_signer_public_key,
                relays: relays.clone(),
                secret: None,
            }
            .to_string(),
            NostrConnectURI::Client { .. } => unreachable!("BunkerUri::parse admits bunker:// only"),
        }
    }
}

/// Why the secret file at `path` (the key file, the bunker URI file)
/// could not be read, and what to do about it; `create` says how to make
/// one that does not exist yet.
pub(crate) fn secret_file_unreadable(path: &Path, error: &std::io::Error, create: &str) -> String {
    let path = path.display();
    match error.kind() {
        std::io::ErrorKind::NotFound => format!("`{path}` does not exist: {create}, or fix the path"),
        std::io::ErrorKind::PermissionDenied => format!(
            "`{path}` is not readable by the daemon's user (permission denied): make that user its owner, with mode 0600"
        ),
        std::io::ErrorKind::IsADirectory => format!("`{path}` is a directory: name the file itself"),
        _ => format!("cannot read `{path}`: {error}"),
    }
}

impl fmt::Debug for BunkerUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGNER: &str = "79dff8f82963424e0bb02708a22e44b4980893e3a4be0fa3cb60a43b946764e3";

    #[test]
    fn the_connection_secret_never_shows() {
        let uri = BunkerUri::parse(&format!(
            " bunker://{SIGNER}?relay=wss%3A%2F%2Frelay.example&secret=hunter2\n"
        ))
        .expect("a bunker URI");
        assert!(!uri.redacted().contains("hunter2"), "{}", uri.redacted());
        assert!(!format!("{uri:?}").contains("hunter2"));
        let source = SignerSource::Bunker(uri);
        assert!(!format!("{source:?}").contains("hunter2"));
        assert_eq!(source.known_public_key(), None);
    }

    #[test]
    fn a_uri_without_relay_or_of_the_wrong_kind_is_refused() {
        assert!(BunkerUri::parse(&format!("bunker://{SIGNER}")).is_err());
        assert!(BunkerUri::parse("nsec1notauri").is_err());
        let pairing = format!("nostrconnect://{SIGNER}?relay=wss%3A%2F%2Frelay.example&metadata=%7B%7D");
        assert!(BunkerUri::parse(&pairing).is_err());
    }
}
