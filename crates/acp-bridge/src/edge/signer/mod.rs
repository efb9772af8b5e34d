//! The bot's one signer: every signature the daemon makes (replies,
//! reactions, gift wraps and seals, NIP-42 AUTH, profile and relay lists)
//! and every NIP-44 decryption goes through a [`BotSigner`].
//!
//! Behind it is either the bot's [`Keys`] (`--secret-key-file`) or a
//! remote signer (`--signer bunker://…`, NIP-46; see [`remote`]). The
//! bot's public key is asked of the signer once, at start, and kept:
//! building an event then needs no round trip for it.
//!
//! A remote signer may be slow, gone, or refuse (a bunker whose policy or
//! approval does not cover a request yet). Then a signature is not failed
//! but waits: it is asked again with backoff until the signer signs or the
//! daemon stops. So an answer whose signature is due waits in its turn (it
//! is not re-run, and not dropped), and the signer's state is one log line
//! per change, the health endpoint and the `acp_bridge_signer_up` gauge.
//! A decryption waits the same way only while the signer is silent or
//! unreachable: one it refuses is a message it cannot read (anyone can send
//! the bot a broken gift wrap), dropped as before, so it cannot stall the
//! intake.

mod app_keys;
pub(crate) mod args;
mod remote;
mod source;

use std::fmt;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nostr_sdk::prelude::{
    BoxedFuture, Event, Keys, NostrSigner, PublicKey, SignerBackend, SignerError, UnsignedEvent,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub(crate) use app_keys::AppKeyError;
pub(crate) use source::{BunkerUri, SignerSource, secret_file_unreadable};

use crate::base::backoff::Backoff;
use crate::telemetry::metrics;

/// The shortest wait before asking a silent signer again.
const SIGNER_RETRY_MIN: Duration = Duration::from_secs(1);
/// The longest wait before asking a silent signer again.
const SIGNER_RETRY_MAX: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum SignerOpenError {
    #[error(transparent)]
    AppKey(#[from] AppKeyError),
    #[error("stopped before the remote signer answered")]
    Stopped,
}

/// The signer every part of the daemon signs and decrypts with. Cheap to
/// clone; `Debug` shows the public key only.
#[derive(Clone)]
pub struct BotSigner {
    inner: Arc<dyn NostrSigner>,
    public_key: PublicKey,
    /// For a remote signer: how requests wait through an outage.
    patience: Option<Arc<Patience>>,
}

impl BotSigner {
    /// The bot's own keys, held in memory: never slow, never gone.
    pub fn from_keys(keys: Keys) -> Self {
        BotSigner {
            public_key: keys.public_key(),
            inner: Arc::new(keys),
            patience: None,
        }
    }

    /// The signer `source` names. A remote one is asked for the bot's
    /// public key, again with backoff while it does not answer (each
    /// failure logged), until `stop`: a bunker that is down at start holds
    /// the start, it does not crash it (mentions wait on the relays).
    pub async fn open(
        source: &SignerSource,
        state_dir: &Path,
        request_timeout: Duration,
        stop: &CancellationToken,
    ) -> Result<Self, SignerOpenError> {
        let uri = match source {
            SignerSource::Keys(keys) => return Ok(Self::from_keys(keys.clone())),
            SignerSource::Bunker(uri) => uri,
        };
        let inner = remote::connect(uri, state_dir, request_timeout)?;
        let patience = Arc::new(Patience::new(stop.clone()));
        let public_key = patience
            .wait_for(|| inner.get_public_key(), always)
            .await
            .map_err(|_| SignerOpenError::Stopped)?;
        tracing::info!(bot = %public_key, "the remote signer answered");
        Ok(BotSigner {
            inner,
            public_key,
            patience: Some(patience),
        })
    }

    /// The bot's public key, as the signer gave it at start.
    pub fn public_key(&self) -> PublicKey {
        self.public_key
    }

    /// True while the signer answers (always, for a key held in memory).
    pub fn answering(&self) -> watch::Receiver<bool> {
        match &self.patience {
            Some(patience) => patience.answering.subscribe(),
            None => watch::Sender::new(true).subscribe(),
        }
    }

    /// `call` on the inner signer; for a remote one, asked again while its
    /// error is one to `wait_out`.
    async fn patiently<'a, T, F, Fut>(
        &'a self,
        call: F,
        wait_out: fn(&SignerError) -> bool,
    ) -> Result<T, SignerError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, SignerError>> + 'a,
    {
        match &self.patience {
            Some(patience) => patience.wait_for(call, wait_out).await,
            None => call().await,
        }
    }
}

/// Every error is waited out: what the bot signs or encrypts is its own.
fn always(_: &SignerError) -> bool {
    true
}

/// How requests to a remote signer wait through an outage, and what the
/// daemon knows of the signer's state.
#[derive(Debug)]
struct Patience {
    answering: watch::Sender<bool>,
    /// When the current outage began (`None` while the signer answers).
    down_since: std::sync::Mutex<Option<Instant>>,
    stop: CancellationToken,
}

impl Patience {
    fn new(stop: CancellationToken) -> Self {
        metrics::signer_up(false);
        Patience {
            answering: watch::Sender::new(false),
            down_since: std::sync::Mutex::new(None),
            stop,
        }
    }

    /// Runs `call` until it succeeds, fails with an error that is not one
    /// to `wait_out`, or the daemon stops (then the last error).
    async fn wait_for<T, F, Fut>(&self, call: F, wait_out: fn(&SignerError) -> bool) -> Result<T, SignerError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, SignerError>>,
    {
        let mut backoff = Backoff::new(SIGNER_RETRY_MIN, SIGNER_RETRY_MAX);
        loop {
            let error = match call().await {
                Ok(value) => {
                    self.answered();
                    return Ok(value);
                }
                Err(error) if !wait_out(&error) => {
                    self.answered();
                    return Err(error);
                }
                Err(error) => error,
            };
            let delay = backoff.next_delay();
            self.silent(&error, delay);
            tokio::select! {
                () = self.stop.cancelled() => return Err(error),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    fn answered(&self) {
        let was_down = self.down_since.lock().expect("not poisoned").take();
        if let Some(since) = was_down {
            tracing::info!(
                down_ms = since.elapsed().as_millis() as u64,
                "signer: the remote signer signs again; waiting signatures go out"
            );
        }
        // At start too: the state is "not answering" until the first answer.
        if !self.answering.send_replace(true) {
            metrics::signer_up(true);
        }
    }

    fn silent(&self, error: &SignerError, retry_in: Duration) {
        let newly = {
            let mut down_since = self.down_since.lock().expect("not poisoned");
            let newly = down_since.is_none();
            down_since.get_or_insert_with(Instant::now);
            newly
        };
        metrics::signer_request_failed();
        if newly {
            tracing::warn!(%error, retry_in_ms = retry_in.as_millis() as u64, "signer: no signature from the remote signer; signatures and DM decryption wait for it (mentions stay in the journal)");
            metrics::signer_up(false);
            self.answering.send_replace(false);
        } else {
            tracing::info!(%error, retry_in_ms = retry_in.as_millis() as u64, "signer: still no signature from the remote signer");
        }
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
        Box::pin(async move {
            self.patiently(|| self.inner.sign_event(unsigned.clone()), always)
                .await
        })
    }

    fn nip04_encrypt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        content: &'a str,
    ) -> BoxedFuture<'a, Result<String, SignerError>> {
        Box::pin(self.patiently(|| self.inner.nip04_encrypt(public_key, content), always))
    }

    fn nip04_decrypt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        encrypted_content: &'a str,
    ) -> BoxedFuture<'a, Result<String, SignerError>> {
        Box::pin(self.patiently(
            || self.inner.nip04_decrypt(public_key, encrypted_content),
            remote::is_outage,
        ))
    }

    fn nip44_encrypt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        content: &'a str,
    ) -> BoxedFuture<'a, Result<String, SignerError>> {
        Box::pin(self.patiently(|| self.inner.nip44_encrypt(public_key, content), always))
    }

    fn nip44_decrypt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        payload: &'a str,
    ) -> BoxedFuture<'a, Result<String, SignerError>> {
        Box::pin(self.patiently(
            || self.inner.nip44_decrypt(public_key, payload),
            remote::is_outage,
        ))
    }
}
