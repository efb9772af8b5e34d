//! Marmot encrypted groups at the intake (docs/marmot.md): the feed of
//! their kind 445 messages, a subscription (`#h`) to every group the bot is
//! a member of, renewed when it joins or leaves one, whose events go to
//! the intake like any relay link's; and what the shell does with a
//! welcome (kind 444 in a gift wrap) and a group message.
//!
//! Exactly once: the journal deduplicates on the 445 wrapper's id, as a
//! DM's on its gift wrap, and is the commit point of "taken"; the MLS door
//! never decrypts a wrapper twice but reads back what it decrypted before
//! (`state::mls::MlsState::read_message`). So a crash between mdk's commit
//! and the journal's row neither loses the message nor answers it twice.

use nostr_sdk::prelude::{
    Alphabet, Client, EventId, Filter, Kind, PublicKey, RelayPoolNotification, SingleLetterTag,
    SubscriptionId, UnsignedEvent,
};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::Arrival;
use crate::policy::gate::{AuthorFacts, AuthorGate, Hearing};
use crate::state::mls::{MlsState, Welcomed};

/// The feed's subscription id: one for every group, replaced as they change.
const FEED_SUBSCRIPTION_ID: &str = "acp-bridge-marmot";

/// What the intake holds of Marmot: the MLS state, and the signal that the
/// bot's groups changed (joined, left, removed).
#[derive(Debug, Clone)]
pub(crate) struct MarmotIntake {
    pub mls: MlsState,
    pub groups_changed: watch::Sender<u64>,
}

impl MarmotIntake {
    /// The groups changed: the feed subscribes again, a key package used by
    /// a welcome is replaced.
    pub(crate) fn changed(&self) {
        self.groups_changed.send_modify(|count| *count += 1);
    }

    /// A welcome `rumor` (kind 444) from `sender`, in the gift wrap
    /// `wrapper`: joined when the gate hears `sender`, else declined and
    /// logged. A welcome is never a mention.
    pub(super) async fn welcome(
        &self,
        gate: &mut AuthorGate,
        wrapper: EventId,
        sender: PublicKey,
        rumor: UnsignedEvent,
    ) {
        let heard = matches!(
            gate.admit(AuthorFacts {
                author: sender,
                kind: rumor.kind,
                created_at: rumor.created_at,
                tags: rumor.tags.as_slice(),
                direct_message: true,
            }),
            Hearing::Heard(_)
        );
        match self.mls.welcome(wrapper, rumor, heard).await {
            Ok(Welcomed::Joined(joined)) => {
                tracing::info!(group = %joined.group, from = %acp_bridge_core::mention::short_npub(&sender), "joined a Marmot encrypted group");
                self.changed();
            }
            Ok(Welcomed::Before) => {}
            Ok(Welcomed::Declined) => tracing::info!(
                from = %acp_bridge_core::mention::short_npub(&sender),
                "declined a Marmot welcome: its sender is not heard"
            ),
            Err(error) => tracing::warn!(%error, "cannot read a Marmot welcome"),
        }
    }
}

/// Subscribes to the bot's groups' messages and hands them to the intake.
#[derive(Debug)]
pub(crate) struct MarmotFeed {
    pub client: Client,
    pub mls: MlsState,
    pub groups_changed: watch::Receiver<u64>,
    pub arrivals: mpsc::Sender<Arrival>,
}

impl MarmotFeed {
    /// Runs until `stop`. Each (re)subscription asks for every stored
    /// message of the groups: the journal drops those already taken, mdk
    /// those already processed, and a commit missed while down is read in
    /// order before what follows it.
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        let mut notifications = self.client.notifications();
        let id = SubscriptionId::new(FEED_SUBSCRIPTION_ID);
        loop {
            self.subscribe(&id).await;
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    changed = self.groups_changed.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        break;
                    }
                    notification = notifications.recv() => match notification {
                        Ok(RelayPoolNotification::Event { relay_url, subscription_id, event }) if subscription_id == id => {
                            if self.arrivals.send(Arrival::Event { relay: relay_url, event }).await.is_err() {
                                return;
                            }
                        }
                        Ok(_) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                            tracing::warn!(missed, "the Marmot feed fell behind; subscribing again");
                            break;
                        }
                        Err(_) => return,
                    }
                }
            }
        }
    }

    async fn subscribe(&self, id: &SubscriptionId) {
        let groups = match self.mls.groups().await {
            Ok(groups) => groups,
            Err(error) => return tracing::error!(%error, "cannot read the bot's Marmot groups"),
        };
        if groups.is_empty() {
            self.client.unsubscribe(id).await;
            return;
        }
        let filter = Filter::new().kind(Kind::MlsGroupMessage).custom_tags(
            SingleLetterTag::lowercase(Alphabet::H),
            groups.into_iter().map(|joined| joined.group),
        );
        if let Err(error) = self.client.subscribe_with_id(id.clone(), filter, None).await {
            tracing::warn!(%error, "cannot subscribe to the Marmot groups' messages");
        }
    }
}
