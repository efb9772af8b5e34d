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
//! [`NostrConnect`]: nostr_connect::prelude::NostrConnect

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nostr_connect::error::Error;
use nostr_sdk::JsonUtil;
use nostr_sdk::nips::nip46::{NostrConnectMessage, NostrConnectRequest, ResponseResult};
use nostr_sdk::prelude::{
    BoxedFuture, ClientMessage, Event, EventBuilder, Filter, Keys, Kind, NostrConnectURI, NostrSigner,
    PublicKey, RelayOptions, RelayPool, RelayPoolNotification, SignerBackend, SignerError, SubscribeOptions,
    UnsignedEvent, Url, nip04, nip44,
};
use tokio::sync::OnceCell;

use super::app_keys::{self, AppKeyError};
use super::source::BunkerUri;

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
        pool: RelayPool::default(),
        timeout: request_timeout,
        joined: OnceCell::new(),
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
    /// Its relays added and the answers subscribed to.
    joined: OnceCell<()>,
    /// The bunker's own key, once it answered `connect`.
    connected: OnceCell<PublicKey>,
    /// The key it signs as (the bot's), once asked.
    user: OnceCell<PublicKey>,
}

impl Bunker {
    /// Joins the bunker's relays and listens for answers to the app key:
    /// once (a subscription per failed `connect` would pile up during an
    /// outage).
    async fn joined(&self) -> Result<(), Error> {
        self.joined
            .get_or_try_init(|| async {
                for url in self.uri.relays() {
                    self.pool.add_relay(url, RelayOptions::default()).await?;
                }
                self.pool.connect().await;
                let answers = Filter::new()
                    .pubkey(self.app.public_key())
                    .kind(Kind::NostrConnect)
                    .limit(0);
                self.pool.subscribe(answers, SubscribeOptions::default()).await?;
                Ok::<_, Error>(())
            })
            .await?;
        Ok(())
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
    /// `OK`, and waits (up to the timeout) for the answer of the same id
    /// from the bunker's key.
    async fn ask_raw(&self, bunker: PublicKey, request: NostrConnectRequest) -> Result<String, Error> {
        let message = NostrConnectMessage::request(&request);
        let id = message.id().to_owned();
        let event = EventBuilder::nostr_connect(&self.app, bunker, message)?.sign_with_keys(&self.app)?;
        // Listening before publishing: the answer can come at once.
        let mut notifications = self.pool.notifications();
        let sent = self
            .pool
            .send_msg_to(self.uri.relays().to_vec(), ClientMessage::event(event))
            .await?;
        if sent.success.is_empty() {
            tracing::debug!(failed = ?sent.failed, "signer: the request reached no relay yet; waiting for the answer anyway");
        }
        let answer = async {
            while let Ok(notification) = notifications.recv().await {
                let RelayPoolNotification::Event { event, .. } = notification else {
                    continue;
                };
                if let Some(said) = self.answer_to(&id, bunker, &event).await? {
                    return Ok(said);
                }
            }
            Err(Error::Timeout)
        };
        tokio::time::timeout(self.timeout, answer)
            .await
            .map_err(|_| Error::Timeout)?
    }

    /// The answer `event` carries to request `id`, if it is one: from the
    /// bunker's key, NIP-44 (or NIP-04) to the app key. An approval URL is
    /// logged and the wait goes on.
    async fn answer_to(&self, id: &str, bunker: PublicKey, event: &Event) -> Result<Option<String>, Error> {
        if event.kind != Kind::NostrConnect || event.pubkey != bunker || event.verify().is_err() {
            return Ok(None);
        }
        let secret = self.app.secret_key();
        let Ok(text) = nip44::decrypt(secret, &event.pubkey, &event.content)
            .or_else(|_| nip04::decrypt(secret, &event.pubkey, &event.content))
        else {
            tracing::debug!(event = %event.id, "signer: an answer the app key cannot decrypt; skipped");
            return Ok(None);
        };
        let Ok(NostrConnectMessage::Response {
            id: answered,
            result,
            error,
        }) = NostrConnectMessage::from_json(text)
        else {
            return Ok(None);
        };
        if answered != id {
            return Ok(None);
        }
        if result.as_deref() == Some("auth_url") {
            match error.as_deref().map(Url::parse) {
                Some(Ok(auth_url)) => {
                    tracing::warn!(%auth_url, "signer: the remote signer asks for approval; open this URL to approve the daemon's requests");
                }
                _ => tracing::warn!("signer: the remote signer asks for approval with no URL it could read"),
            }
            return Ok(None);
        }
        match (result, error) {
            (_, Some(error)) => Err(Error::Response(error)),
            (Some(result), None) => Ok(Some(result)),
            (None, None) => Err(Error::Response(
                "an answer with neither result nor error".to_owned(),
            )),
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
