//! The bot's membership of its groups, settled once at start.
//!
//! For each configured group, once its relay's link is connected: read the
//! group's metadata (kind 39000) and members (kind 39002) from that relay,
//! keep the metadata for the prompts, and when the bot is not listed as a
//! member of a group that needs membership (closed, private or restricted,
//! or one whose metadata the relay hides) send a join request (kind 9021,
//! with `--group-invite-code` as its `code`). The relay's answer is logged
//! as what it means: accepted (joined), `duplicate:` (a member already),
//! a message that says "pending" (the admins decide), or a refusal with the
//! relay's message. A group the bot is found in, joined, or asked to join
//! is remembered in the store; a remembered group that is no longer
//! configured gets a leave request (kind 9022) and is forgotten once its
//! relay answered. Stopping the daemon leaves no group: membership follows
//! the configuration, not the process.
//!
//! Every read and write goes through the daemon's one client, on the
//! connection the relay link keeps, so a relay that asks for NIP-42
//! authentication (closed groups do) gets it. A request that could not be
//! sent (relay gone, timeout) is logged and tried again at the next start.

use std::time::Duration;

use nostr_sdk::pool::relay::Error as RelayError;
use nostr_sdk::prelude::{
    Client, Event, EventBuilder, Filter, Kind, PublicKey, Relay, RelayUrl, ReqExitPolicy, Tag, TagKind,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::metadata::{
    GROUP_MEMBERS, GROUP_METADATA, GroupMetadata, JOIN_REQUEST, LEAVE_REQUEST, lists_member, newest,
};
use super::relay_key::relay_key;
use super::{GroupAddress, GroupDirectory, GroupSettings, same_relay};
use crate::edge::signer::BotSigner;
use crate::state::store::JoinedGroups;
use crate::telemetry::metrics;

/// How long the read of a group's metadata and members may take.
const GROUP_FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The prefix of a relay's refusal of a join request from a member.
const ALREADY_A_MEMBER: &str = "duplicate:";

/// What a group's relay says of it, as far as the bot is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupState {
    /// Its metadata (kind 39000), when the relay shows it.
    pub metadata: Option<GroupMetadata>,
    /// Whether its newest members list (kind 39002) names the bot.
    pub member: bool,
}

impl GroupState {
    /// Whether the bot should ask to join: it is not listed, and the group
    /// needs membership or hides its metadata (a hidden group does so from
    /// non-members).
    pub(crate) fn needs_join_request(&self) -> bool {
        !self.member && self.metadata.as_ref().is_none_or(GroupMetadata::needs_membership)
    }
}

/// Reads group `id`'s metadata and members from `relay`: only those that
/// `signer` signed when the relay's key is known (see `relay_key`),
/// otherwise as the relay serves them.
pub(crate) async fn read_group(
    relay: &Relay,
    id: &str,
    bot: &PublicKey,
    signer: Option<PublicKey>,
) -> Result<GroupState, RelayError> {
    let mut filter = Filter::new()
        .kinds([Kind::from(GROUP_METADATA), Kind::from(GROUP_MEMBERS)])
        .identifier(id);
    if let Some(signer) = signer {
        filter = filter.author(signer);
    }
    let events: Vec<Event> = relay
        .fetch_events(filter, GROUP_FETCH_TIMEOUT, ReqExitPolicy::ExitOnEOSE)
        .await?
        .into_iter()
        .collect();
    Ok(GroupState {
        metadata: newest(&events, GROUP_METADATA, signer).map(GroupMetadata::from_event),
        member: newest(&events, GROUP_MEMBERS, signer).is_some_and(|members| lists_member(members, bot)),
    })
}

/// The key that signs `group`'s metadata, from its relay's NIP-11
/// document; `None` (a warning) when the document or its key is missing:
/// the metadata is then taken as the group's relay serves it, verified
/// (why not refused: see `metadata`'s module doc).
async fn relay_signer(group: &GroupAddress) -> Option<PublicKey> {
    match relay_key(&group.relay).await {
        Ok(Some(key)) => {
            tracing::info!(%group, relay_key = %key, "the group relay's key (NIP-11): only what it signed is read");
            Some(key)
        }
        Ok(None) => {
            tracing::warn!(%group, "the group relay's NIP-11 document names no key: its metadata is taken as the relay serves it");
            None
        }
        Err(error) => {
            tracing::warn!(%group, %error, "cannot read the group relay's NIP-11 document: its metadata is taken as the relay serves it");
            None
        }
    }
}

/// Settles the bot's membership of its groups at start.
#[derive(Debug)]
pub(crate) struct Membership {
    pub client: Client,
    pub signer: BotSigner,
    pub joined: JoinedGroups,
    pub settings: GroupSettings,
    pub directory: GroupDirectory,
    /// Each relay the bot reads, with whether its link is connected and
    /// subscribed.
    pub relays: Vec<(RelayUrl, watch::Receiver<bool>)>,
}

/// What became of a join request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Joining {
    Accepted,
    AlreadyMember,
    Pending,
    Refused,
    Unsent,
}

impl Joining {
    fn as_str(self) -> &'static str {
        match self {
            Joining::Accepted => "accepted",
            Joining::AlreadyMember => "member",
            Joining::Pending => "pending",
            Joining::Refused => "refused",
            Joining::Unsent => "unsent",
        }
    }

    /// Whether the bot is (or asked to be) in the group afterwards: then it
    /// is remembered, so that dropping the group from the configuration
    /// leaves it (or withdraws the request).
    fn remembered(self) -> bool {
        matches!(
            self,
            Joining::Accepted | Joining::AlreadyMember | Joining::Pending
        )
    }
}

impl Membership {
    /// Settles every configured group and leaves the unconfigured ones,
    /// each as soon as its relay is connected, until `stop`.
    pub(crate) async fn run(self, stop: CancellationToken) {
        // Read before any group is entered: a group remembered now is one
        // the bot was in before this start.
        let remembered = self.joined.all().unwrap_or_else(|error| {
            tracing::error!(%error, "cannot read the groups the bot joined; none is left at this start");
            Vec::new()
        });
        let entering = self.settings.groups.iter().map(|group| self.enter(group, &stop));
        let leaving = remembered
            .into_iter()
            .filter(|(relay, id)| !self.configured(relay, id))
            .map(|(relay, id)| self.leave(relay, id, &stop));
        // Each group waits for its own relay only: one that stays down
        // holds up no other.
        futures_util::future::join(
            futures_util::future::join_all(entering),
            futures_util::future::join_all(leaving),
        )
        .await;
    }

    fn configured(&self, relay: &str, id: &str) -> bool {
        self.settings
            .groups
            .iter()
            .any(|group| group.id == id && group.relay.as_str_without_trailing_slash() == relay)
    }

    /// The client's relay `url` once its link is connected; `None` when
    /// the bot does not read it, or at `stop`.
    async fn connected(&self, url: &RelayUrl, stop: &CancellationToken) -> Option<Relay> {
        let (url, connected) = self.relays.iter().find(|(read, _)| same_relay(read, url))?;
        let mut connected = connected.clone();
        tokio::select! {
            () = stop.cancelled() => return None,
            _ = connected.wait_for(|connected| *connected) => {}
        }
        self.client.relay(url).await.ok()
    }

    /// Reads `group`'s metadata and joins it where it must.
    async fn enter(&self, group: &GroupAddress, stop: &CancellationToken) {
        let Some(relay) = self.connected(&group.relay, stop).await else {
            return;
        };
        let Some(state) = self.read(&relay, group).await else {
            return;
        };
        if state.member {
            tracing::info!(%group, "the bot is a member of the group; no join request");
            return self.remember(group);
        }
        if !state.needs_join_request() {
            return tracing::info!(%group, "the group is open to everyone; no join request needed");
        }
        let joining = self.join(&relay, group).await;
        metrics::group_request("join", joining.as_str());
        if joining.remembered() {
            self.remember(group);
        }
        if joining == Joining::Accepted && state.metadata.is_none() {
            // A hidden group shows its metadata to members only.
            self.read(&relay, group).await;
        }
    }

    /// What the relay says of the group (its metadata is also kept in
    /// the directory); `None` when the relay did not answer.
    async fn read(&self, relay: &Relay, group: &GroupAddress) -> Option<GroupState> {
        let signer = relay_signer(group).await;
        let state = match read_group(relay, &group.id, &self.signer.public_key(), signer).await {
            Ok(state) => state,
            Err(error) => {
                tracing::warn!(%group, %error, "cannot read the group's metadata; its mentions are answered without it, and no join request is sent before the next start");
                return None;
            }
        };
        let member = state.member;
        match &state.metadata {
            Some(metadata) => {
                tracing::info!(
                    %group, name = metadata.name.as_deref().unwrap_or(""), closed = metadata.closed,
                    private = metadata.private, restricted = metadata.restricted, member,
                    "read the group's metadata"
                );
                self.directory.learn(group, metadata.clone());
            }
            None => {
                tracing::warn!(%group, member, "the group's relay shows no metadata for it (kind 39000): a hidden group, or a wrong group id")
            }
        }
        Some(state)
    }

    /// Sends a join request and reads the relay's answer.
    async fn join(&self, relay: &Relay, group: &GroupAddress) -> Joining {
        let mut tags = vec![Tag::custom(TagKind::h(), [group.id.clone()])];
        if let Some(code) = &self.settings.invite_code {
            tags.push(Tag::custom(TagKind::custom("code"), [code.clone()]));
        }
        let Some(request) = self.sign(JOIN_REQUEST, tags).await else {
            return Joining::Unsent;
        };
        let event_id = request.id.to_hex();
        match relay.send_event(&request).await {
            Ok(_) => {
                tracing::info!(%group, event_id, "join request accepted: the bot joined the group");
                Joining::Accepted
            }
            Err(RelayError::RelayMessage(message)) => {
                let joining = if message.starts_with(ALREADY_A_MEMBER) {
                    Joining::AlreadyMember
                } else if message.to_lowercase().contains("pending") {
                    Joining::Pending
                } else {
                    Joining::Refused
                };
                match joining {
                    Joining::AlreadyMember => {
                        tracing::info!(%group, event_id, relay_message = %message, "join request answered: the bot is a member already")
                    }
                    Joining::Pending => {
                        tracing::info!(%group, event_id, relay_message = %message, "join request pending: the group's admins decide")
                    }
                    _ => tracing::warn!(%group, event_id, relay_message = %message, "join request refused"),
                }
                joining
            }
            Err(error) => {
                tracing::warn!(%group, %error, "could not send the join request; tried again at the next start");
                Joining::Unsent
            }
        }
    }

    /// Sends a leave request for a group no longer configured, and forgets
    /// it once the relay answered (either way: a refusal means the bot is
    /// not in it).
    async fn leave(&self, relay: String, id: String, stop: &CancellationToken) {
        let group = match RelayUrl::parse(&relay) {
            Ok(url) => GroupAddress::new(url, &id),
            Err(error) => {
                tracing::error!(relay, group_id = id, %error, "a remembered group has a broken relay URL; forgetting it");
                return self.forget(&relay, &id);
            }
        };
        if !self.relays.iter().any(|(read, _)| same_relay(read, &group.relay)) {
            return tracing::warn!(%group, "cannot leave a group no longer configured: the bot no longer reads its relay; it is left once the relay is configured again");
        }
        let Some(connection) = self.connected(&group.relay, stop).await else {
            return;
        };
        let Some(request) = self
            .sign(LEAVE_REQUEST, vec![Tag::custom(TagKind::h(), [id.clone()])])
            .await
        else {
            return;
        };
        let event_id = request.id.to_hex();
        match connection.send_event(&request).await {
            Ok(_) => {
                metrics::group_request("leave", "accepted");
                tracing::info!(%group, event_id, "left the group: it is no longer configured");
                self.forget(&relay, &id);
            }
            Err(RelayError::RelayMessage(message)) => {
                metrics::group_request("leave", "refused");
                tracing::warn!(%group, event_id, relay_message = %message, "leave request refused; the group is forgotten");
                self.forget(&relay, &id);
            }
            Err(error) => {
                metrics::group_request("leave", "unsent");
                tracing::warn!(%group, %error, "could not send the leave request; tried again at the next start");
            }
        }
    }

    async fn sign(&self, kind: u16, tags: Vec<Tag>) -> Option<Event> {
        EventBuilder::new(Kind::from(kind), "")
            .tags(tags)
            .sign(&self.signer)
            .await
            .inspect_err(|error| tracing::error!(%error, kind, "cannot sign a group request"))
            .ok()
    }

    fn remember(&self, group: &GroupAddress) {
        let relay = group.relay.as_str_without_trailing_slash();
        if let Err(error) = self.joined.record(relay, &group.id) {
            tracing::error!(%group, %error, "cannot remember the group; it is not left when dropped from the configuration");
        }
    }

    fn forget(&self, relay: &str, id: &str) {
        if let Err(error) = self.joined.forget(relay, id) {
            tracing::error!(relay, group_id = id, %error, "cannot forget a group the bot left");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(metadata: Option<GroupMetadata>, member: bool) -> GroupState {
        GroupState { metadata, member }
    }

    #[test]
    fn a_join_request_goes_only_where_membership_is_needed_and_missing() {
        let closed = GroupMetadata {
            closed: true,
            ..GroupMetadata::default()
        };
        let open = GroupMetadata::default();
        assert!(state(Some(closed.clone()), false).needs_join_request());
        assert!(!state(Some(closed), true).needs_join_request());
        assert!(!state(Some(open), false).needs_join_request());
        // A hidden group shows its metadata to members only.
        assert!(state(None, false).needs_join_request());
        assert!(!state(None, true).needs_join_request());
    }
}
