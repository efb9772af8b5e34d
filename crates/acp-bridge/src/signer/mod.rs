//! The bot's one signer: every signature the daemon makes (replies,
//! reactions, gift wraps and seals, NIP-42 AUTH, profile and relay lists)
//! and every NIP-44 decryption goes through a [`BotSigner`].
//!
//! Behind it is either the bot's [`Keys`] (`--secret-key-file`) or a remote
//! signer. The bot's public key is asked of the signer once, at start, and
//! kept: building an event then needs no round trip for it. This module
//! owns no key material of its own and decides nothing about retries.

use std::fmt;
use std::sync::Arc;

use nostr_sdk::prelude::{
    BoxedFuture, Event, Keys, NostrSigner, PublicKey, SignerBackend, SignerError, UnsignedEvent,
};

/// The signer every part of the daemon signs and decrypts with. Cheap to
/// clone; `Debug` shows the public key only.
#[derive(Clone)]
pub struct BotSigner {
    inner: Arc<dyn NostrSigner>,
    public_key: PublicKey,
}

impl BotSigner {
    /// The bot's own keys, held in memory.
    pub fn from_keys(keys: Keys) -> Self {
        BotSigner {
            public_key: keys.public_key(),
            inner: Arc::new(keys),
        }
    }

    /// The bot's public key, as the signer gave it at start.
    pub fn public_key(&self) -> PublicKey {
        self.public_key
    }
}

impl fmt::Debug for BotSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BotSigner")
            .field("backend", &self.inner.backend())
            .field("public_key", &self.public_key)
            .finish()
    }
}

impl NostrSigner for BotSigner {
    fn backend(&self) -> SignerBackend<'_> {
        self.inner.backend()
    }

    fn get_public_key(&self) -> BoxedFuture<'_, Result<PublicKey, SignerError>> {
        let public_key = self.public_key;
        Box::pin(async move { Ok(public_key) })
    }

    fn sign_event(&self, unsigned: UnsignedEvent) -> BoxedFuture<'_, Result<Event, SignerError>> {
        self.inner.sign_event(unsigned)
    }

    fn nip04_encrypt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        content: &'a str,
    ) -> BoxedFuture<'a, Result<String, SignerError>> {
        self.inner.nip04_encrypt(public_key, content)
    }

    fn nip04_decrypt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        encrypted_content: &'a str,
    ) -> BoxedFuture<'a, Result<String, SignerError>> {
        self.inner.nip04_decrypt(public_key, encrypted_content)
    }

    fn nip44_encrypt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        content: &'a str,
    ) -> BoxedFuture<'a, Result<String, SignerError>> {
        self.inner.nip44_encrypt(public_key, content)
    }

    fn nip44_decrypt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        payload: &'a str,
    ) -> BoxedFuture<'a, Result<String, SignerError>> {
        self.inner.nip44_decrypt(public_key, payload)
    }
}
