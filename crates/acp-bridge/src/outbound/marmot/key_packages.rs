//! The bot's Marmot key package (MIP-00) and key-package relay list, as a
//! member that wants to add the bot reads them: a kind 30443 event (the
//! addressable key package, its `d` the bot's public key in hex: MIP-00
//! wants 32 bytes of hex, and a stable one makes every relay keep only the
//! newest), the same content as a legacy kind 443
//! for clients of the transition, and a kind 10051 naming the relays the
//! key packages are on.
//!
//! Published once a relay is connected, through the one signer and the
//! outbox like the bot's identity (retried until a relay takes them), and
//! again whenever a welcome consumed the key package. mdk marks the key
//! package last-resort: its private part stays in the MLS state until it
//! is replaced, so an invitation built on the previous copy still joins.

use nostr_sdk::prelude::{Event, EventBuilder, Kind, Tag, TagKind};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::edge::signer::BotSigner;
use crate::outbound::reply::publisher::Outlet;
use crate::state::mls::{MlsError, MlsState};
use crate::state::store::Outbox;
use nostr_sdk::prelude::RelayUrl;

/// The addressable key package's kind (MIP-00).
pub(crate) const KEY_PACKAGE_KIND: Kind = Kind::Custom(30443);

#[derive(Debug, thiserror::Error)]
pub(crate) enum KeyPackageError {
    #[error(transparent)]
    Mls(#[from] MlsError),
    #[error("could not sign the kind {kind} event: {reason}")]
    Sign { kind: u16, reason: String },
    #[error(transparent)]
    Store(#[from] crate::state::store::StoreError),
}

/// Publishes the bot's key package and key-package relay list.
#[derive(Debug, Clone)]
pub(crate) struct KeyPackages {
    pub mls: MlsState,
    pub signer: BotSigner,
    pub outbox: Outbox,
    pub outlet: Outlet,
    /// The bot's relays: where members find the key package and send the
    /// welcome.
    pub relays: Vec<RelayUrl>,
    /// Changes when the bot joined (or left) a group: a welcome used the
    /// key package.
    pub groups_changed: watch::Receiver<u64>,
}

impl KeyPackages {
    /// Publishes at start, and again each time the bot's groups changed,
    /// until `stop`. Call once a relay is connected.
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        loop {
            self.publish().await;
            tokio::select! {
                () = stop.cancelled() => return,
                changed = self.groups_changed.changed() => if changed.is_err() { return },
            }
        }
    }

    /// A fresh key package and the relay list, signed and stored for the
    /// publisher; logged, never failing the daemon.
    async fn publish(&self) {
        match self.store_for_publishing().await {
            Ok(kinds) => {
                self.outlet.stored();
                tracing::info!(?kinds, "Marmot key package published");
            }
            Err(error) => tracing::error!(%error, "cannot publish the bot's Marmot key package"),
        }
    }

    async fn store_for_publishing(&self) -> Result<Vec<u16>, KeyPackageError> {
        let bot = self.signer.public_key();
        let package = self.mls.key_package(bot, self.relays.clone()).await?;
        let slot_tags = package.tags_30443.into_iter().map(|tag| {
            if tag.kind() == TagKind::d() {
                Tag::identifier(bot.to_hex())
            } else {
                tag
            }
        });
        let relay_list = self
            .relays
            .iter()
            .map(|url| Tag::custom(TagKind::Relay, [url.to_string()]));
        let events = [
            (
                KEY_PACKAGE_KIND,
                package.content.clone(),
                slot_tags.collect::<Vec<_>>(),
            ),
            (Kind::MlsKeyPackage, package.content, package.tags_443),
            (Kind::MlsKeyPackageRelays, String::new(), relay_list.collect()),
        ];
        let mut stored = Vec::new();
        for (kind, content, tags) in events {
            let event = self.sign(kind, content, tags).await?;
            self.outbox.put_unanswering(&event)?;
            stored.push(kind.as_u16());
        }
        Ok(stored)
    }

    async fn sign(&self, kind: Kind, content: String, tags: Vec<Tag>) -> Result<Event, KeyPackageError> {
        EventBuilder::new(kind, content)
            .tags(tags)
            .sign(&self.signer)
            .await
            .map_err(|error| KeyPackageError::Sign {
                kind: kind.as_u16(),
                reason: error.to_string(),
            })
    }
}
