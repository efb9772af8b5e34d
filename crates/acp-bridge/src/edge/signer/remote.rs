//! The NIP-46 client side: requests to the operator's bunker, signed
//! with the app keys from the state dir, and the line between a signer
//! that is gone (wait and try again) and one that answered "no" (give up
//! on that one request).
//!
//! A small transport of its own over the SDK's relay pool rather than
//! nostr-connect's [`NostrConnect`] client (issue 35 §5): that client
//! publishes each request with `send_event`, which waits up to 10 s for the
//! relay's `OK` before it reads the answer already received, and relays
//! need not acknowledge ephemeral events (nostr-rs-relay 0.8 sends no `OK`
//! for kind 24133). Here a request is published without waiting for an
//! `OK` and its answer is awaited on the subscription at once, so a
//! signature takes the bunker's time. The protocol types (requests,
//! messages, answers) are nostr's own; answers are NIP-44, as the spec
//! says, with NIP-04 read too (older bunkers).
//!
//! Requests go together (issue 39): one task reads the answers and routes
//! each to its request by id ([`answers`]), and up to [`IN_FLIGHT`] are out
//! at once, so independent signatures (a DM's two gift wraps) overlap their
//! round trips instead of queueing.
//!
//! [`NostrConnect`]: nostr_connect::prelude::NostrConnect

mod answers;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nostr_connect::error::Error;
use nostr_sdk::nips::nip46::{NostrConnectMessage, NostrConnectRequest, ResponseResult};
use nostr_sdk::pool::pool;
use nostr_sdk::prelude::{
    BoxedFuture, ClientMessage, Event, EventBuilder, Filter, Keys, Kind, NostrConnectURI, NostrSigner,
    PublicKey, RelayOptions, RelayPool, SignerBackend, SignerError, SubscribeOptions, UnsignedEvent,
};
use tokio::sync::{OnceCell, Semaphore};

use self::answers::Reader;
use super::app_keys::{self, AppKeyError};
use super::source::BunkerUri;
use crate::edge::transport::NoDelayTransport;

/// Requests out to the bunker at once; more wait for a slot. Enough for a
/// DM's two gift wraps (and a burst's few) to overlap their round trips,
/// few enough not to flood a phone's signer app with prompts or its relay
/// with events: 4, as Amethyst allows a NIP-46 signer.
const IN_FLIGHT: usize = 4;

/// What the signer errors say when the signer did not answer in time.
const TIMEOUT_TEXT: &str = "timeout";
/// What the relay pool's errors say when the signer's relay is unusable
/// (not connected, gone, shut down): the request never reached the signer.
const UNREACHABLE_TEXTS: [&str; 4] = ["relay", "not connected", "no relays", "shutdown"];

/// The remote signer for `uri`, not connected yet (the first request
/// connects it). `request_timeout` bounds each request's round trip.
pub(super) fn connect(
    uri: &BunkerUri,
    state_dir: &Path,
    request_timeout: Duration,
) -> Result<Arc<dyn NostrSigner>, AppKeyError> {
    let app = app_keys::load_or_create(state_dir)?;
    tracing::info!(bunker = %uri.redacted(), app = %app.public_key(), "signing through a remote signer (NIP-46)");
    Ok(Arc::new(Bunker {
        uri: uri.uri().clone(),
        app,
        // The operator's bunker relays, over the daemon's own transport:
        // with Nagle's algorithm on, the second of two requests out at once
        // (a DM's gift wraps) waits a round trip for the first's ACK.
        pool: RelayPool::builder()
            .websocket_transport(NoDelayTransport::default())
            .build(),
        timeout: request_timeout,
        joined: OnceCell::new(),
        slots: Semaphore::new(IN_FLIGHT),
        connected: OnceCell::new(),
        user: OnceCell::new(),
    }))
}

/// A `bunker://` remote signer, spoken to with the app keys.
#[derive(Debug)]
struct Bunker {
    uri: NostrConnectURI,
    app: Keys,
    pool: RelayPool,
    timeout: Duration,
    /// Its relays added, the answers subscribed to and read.
    joined: OnceCell<Reader>,
    /// One per request out at once.
    slots: Semaphore,
    /// The bunker's own key, once it answered `connect`.
    connected: OnceCell<PublicKey>,
    /// The key it signs as (the bot's), once asked.
    user: OnceCell<PublicKey>,
}

impl Bunker {
    /// Joins the bunker's relays and reads the answers to the app key:
    /// once (a subscription per failed `connect` would pile up during an
    /// outage).
    async fn joined(&self) -> Result<&Reader, Error> {
        self.joined
            .get_or_try_init(|| async {
                let bunker = *self
                    .uri
                    .remote_signer_public_key()
                    .ok_or(Error::SignerPublicKeyNotFound)?;
                for url in self.uri.relays() {
                    self.pool.add_relay(url, RelayOptions::default()).await?;
                }
                self.pool.connect().await;
                // Read from before the subscription: no answer comes earlier.
                let reader = Reader::start(self.pool.notifications(), self.app.clone(), bunker);
                let answers = Filter::new()
                    .pubkey(self.app.public_key())
                    .kind(Kind::NostrConnect)
                    .limit(0);
                self.pool.subscribe(answers, SubscribeOptions::default()).await?;
                Ok::<_, Error>(reader)
            })
            .await
    }

    /// The bunker's key, once it answered `connect` (with the URI's
    /// secret); asked until it does.
    async fn connected(&self) -> Result<PublicKey, Error> {
        self.joined().await?;
        let bunker = *self
            .connected
            .get_or_try_init(|| async {
                let bunker = *self
                    .uri
                    .remote_signer_public_key()
                    .ok_or(Error::SignerPublicKeyNotFound)?;
                let secret = match &self.uri {
                    NostrConnectURI::Bunker { secret, .. } => secret.clone(),
                    NostrConnectURI::Client { .. } => None,
                };
                let connect = NostrConnectRequest::Connect {
                    remote_signer_public_key: bunker,
                    secret: secret.clone(),
                };
                let said = self.ask_raw(bunker, connect).await?;
                if said != "ack" && Some(said.as_str()) != secret.as_deref() {
                    return Err(Error::Response(format!("unexpected answer to connect: {said}")));
                }
                Ok::<_, Error>(bunker)
            })
            .await?;
        Ok(bunker)
    }

    /// Asks the bunker `request`; its answer.
    async fn ask(&self, request: NostrConnectRequest) -> Result<ResponseResult, Error> {
        let bunker = self.connected().await?;
        let method = request.method();
        let said = self.ask_raw(bunker, request).await?;
        Ok(ResponseResult::parse(method, said)?)
    }

    /// Publishes `request` to `bunker` without waiting for the relays'
    /// `OK`, and waits (up to the timeout) for the answer the reader routes
    /// to its id. Waits first for one of the [`IN_FLIGHT`] slots.
    async fn ask_raw(&self, bunker: PublicKey, request: NostrConnectRequest) -> Result<String, Error> {
        let reader = self.joined().await?;
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| Error::Pool(pool::Error::Shutdown))?;
        let message = NostrConnectMessage::request(&request);
        let id = message.id().to_owned();
        let event = EventBuilder::nostr_connect(&self.app, bunker, message)?.sign_with_keys(&self.app)?;
        // Waiting before publishing: the answer can come at once.
        let mut wait = reader.wait_for(id);
        let sent = self
            .pool
            .send_msg_to(self.uri.relays().to_vec(), ClientMessage::event(event))
            .await?;
        if sent.success.is_empty() {
            tracing::debug!(failed = ?sent.failed, "signer: the request reached no relay yet; waiting for the answer anyway");
        }
        match tokio::time::timeout(self.timeout, wait.answer()).await {
            Ok(Some(answer)) => answer,
            Ok(None) => Err(Error::Pool(pool::Error::Shutdown)),
            Err(_) => Err(Error::Timeout),
        }
    }
}

/// Each method is one request to the bunker (the user's key is asked
/// once and kept).
impl NostrSigner for Bunker {
    fn backend(&self) -> SignerBackend<'_> {
        SignerBackend::NostrConnect
    }

    fn get_public_key(&self) -> BoxedFuture<'_, Result<PublicKey, SignerError>> {
        Box::pin(async move {
            let user = self
                .user
                .get_or_try_init(|| async {
                    Ok::<_, Error>(
                        self.ask(NostrConnectRequest::GetPublicKey)
                            .await?
                            .to_get_public_key()?,
                    )
                })
                .await
                .map_err(SignerError::backend)?;
            Ok(*user)
        })
    }

    fn sign_event(&self, unsigned: UnsignedEvent) -> BoxedFuture<'_, Result<Event, SignerError>> {
        Box::pin(async move {
            let answer = self.ask(NostrConnectRequest::SignEvent(unsigned)).await;
            answer
                .and_then(|answer| Ok(answer.to_sign_event()?))
                .map_err(SignerError::backend)
        })
    }

    fn nip04_encrypt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        content: &'a str,
    ) -> BoxedFuture<'a, Result<String, SignerError>> {
        let request = NostrConnectRequest::Nip04Encrypt {
            public_key: *public_key,
            text: content.to_owned(),
        };
        Box::pin(async move { self.text(request, ResponseResult::to_nip04_encrypt).await })
    }

    fn nip04_decrypt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        content: &'a str,
    ) -> BoxedFuture<'a, Result<String, SignerError>> {
        let request = NostrConnectRequest::Nip04Decrypt {
            public_key: *public_key,
            ciphertext: content.to_owned(),
        };
        Box::pin(async move { self.text(request, ResponseResult::to_nip04_decrypt).await })
    }

    fn nip44_encrypt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        content: &'a str,
    ) -> BoxedFuture<'a, Result<String, SignerError>> {
        let request = NostrConnectRequest::Nip44Encrypt {
            public_key: *public_key,
            text: content.to_owned(),
        };
        Box::pin(async move { self.text(request, ResponseResult::to_nip44_encrypt).await })
    }

    fn nip44_decrypt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        payload: &'a str,
    ) -> BoxedFuture<'a, Result<String, SignerError>> {
        let request = NostrConnectRequest::Nip44Decrypt {
            public_key: *public_key,
            ciphertext: payload.to_owned(),
        };
        Box::pin(async move { self.text(request, ResponseResult::to_nip44_decrypt).await })
    }
}

impl Bunker {
    /// A request whose answer is text, read by `read`.
    async fn text(
        &self,
        request: NostrConnectRequest,
        read: fn(ResponseResult) -> Result<String, nostr_sdk::nips::nip46::Error>,
    ) -> Result<String, SignerError> {
        let answer = self.ask(request).await.map_err(SignerError::backend)?;
        read(answer).map_err(|error| SignerError::backend(Error::from(error)))
    }
}

/// True when `error` means the signer could not be reached or did not
/// answer in time; false when it answered and refused (a bad payload, a
/// request it does not approve): trying again would not help.
pub(super) fn is_outage(error: &SignerError) -> bool {
    let text = error.to_string().to_lowercase();
    text == TIMEOUT_TEXT
        || UNREACHABLE_TEXTS
            .iter()
            .any(|unreachable| text.contains(unreachable))
}

#[cfg(test)]
mod tests {
    use nostr_connect::error::Error;
    use nostr_sdk::pool::pool;

    use super::*;

    #[test]
    fn a_silent_or_unreachable_signer_is_an_outage_a_refusal_is_not() {
        let outage = |error: Error| is_outage(&SignerError::backend(error));
        assert!(outage(Error::Timeout));
        assert!(outage(Error::Pool(pool::Error::NoRelays)));
        assert!(outage(Error::Pool(pool::Error::Shutdown)));
        assert!(!outage(Error::Response("Rejected".into())));
        assert!(!outage(Error::Response("invalid payload length".into())));
    }
}
