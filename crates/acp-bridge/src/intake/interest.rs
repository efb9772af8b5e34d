//! What a relay link subscribes to ([`Interest`]) and the filters and ids
//! of its intake subscriptions (the mentions', the DMs' and the served
//! groups' chat).
//!
//! No I/O. Apart from `relay_link`, which sends these subscriptions, so that
//! `subscriptions`, which tracks where they stand, imports their ids from
//! here and not from the link that imports it (no import loop).

use nostr_sdk::prelude::{
    Alphabet, EventId, Filter, Kind, PublicKey, SingleLetterTag, SubscriptionId, Timestamp,
};
use std::time::Duration;

/// NIP-59 gift wraps carry a `created_at` randomized up to two days into
/// the past; their subscription reaches back that much further.
pub(super) const GIFT_WRAP_BACKDATE: Duration = Duration::from_secs(2 * 24 * 3600);

pub(super) const SUBSCRIPTION_ID: &str = "acp-bridge-mentions";
/// DMs (gift wraps to the bot), apart from the mentions: a relay may
/// refuse them (until the bot authenticated, or at all) and serve the rest.
pub(super) const DM_SUBSCRIPTION_ID: &str = "acp-bridge-dms";
/// The chat of the groups the bot serves on this relay (`--group`), whether
/// a message tags the bot or not: some clients (0xchat) name the bot only
/// in the text. Apart too: a relay may refuse it (a closed group before
/// the bot is a member) and serve the rest.
pub(super) const GROUPS_SUBSCRIPTION_ID: &str = "acp-bridge-groups";

/// What to subscribe to.
#[derive(Debug, Clone)]
pub(crate) struct Interest {
    pub bot: PublicKey,
    pub kinds: Vec<Kind>,
    /// Follow the threads the bot answered in (`--follow-threads involved`).
    pub follow_threads: bool,
    /// The ids of the groups the bot serves on this relay (`--group`).
    pub groups: Vec<String>,
}

impl Interest {
    pub(super) fn public_kinds(&self) -> Vec<Kind> {
        self.kinds
            .iter()
            .copied()
            .filter(|kind| *kind != Kind::GiftWrap)
            .collect()
    }

    /// Replies in the threads rooted at `roots` (empty: nothing to follow):
    /// events of the public kinds naming a root by `e` (NIP-10), and, when
    /// comments are read, comments whose root scope `E` is one (NIP-22: a
    /// reply deep in a comment thread names only its parent by `e`).
    pub(super) fn thread_filters(&self, roots: &[EventId]) -> Vec<Filter> {
        let public = self.public_kinds();
        if !self.follow_threads || roots.is_empty() || public.is_empty() {
            return Vec::new();
        }
        let mut filters = vec![Filter::new().kinds(public).events(roots.iter().copied())];
        if self.kinds.contains(&Kind::Comment) {
            let scopes = roots.iter().map(EventId::to_hex);
            filters.push(
                Filter::new()
                    .kind(Kind::Comment)
                    .custom_tags(SingleLetterTag::uppercase(Alphabet::E), scopes),
            );
        }
        filters
    }

    /// The subscriptions whose events are the bot's work, from `since`:
    /// the mentions (public kinds tagging the bot), the DMs (gift wraps to
    /// it) and the served groups' chat, each by id, and each only when its
    /// kinds are read. `acp-bridge check` sends the same ones.
    pub(crate) fn intake_subscriptions(&self, since: Timestamp) -> Vec<(SubscriptionId, Filter)> {
        let public = self.public_kinds();
        let mut subscriptions = Vec::new();
        if !public.is_empty() {
            let mentions = Filter::new().kinds(public).pubkey(self.bot).since(since);
            subscriptions.push((SubscriptionId::new(SUBSCRIPTION_ID), mentions));
        }
        if self.kinds.contains(&Kind::GiftWrap) {
            let wrapped_since =
                Timestamp::from_secs(since.as_secs().saturating_sub(GIFT_WRAP_BACKDATE.as_secs()));
            let dms = Filter::new()
                .kind(Kind::GiftWrap)
                .pubkey(self.bot)
                .since(wrapped_since);
            subscriptions.push((SubscriptionId::new(DM_SUBSCRIPTION_ID), dms));
        }
        let group_chat = Kind::Custom(9);
        if self.kinds.contains(&group_chat) && !self.groups.is_empty() {
            let chat = Filter::new()
                .kind(group_chat)
                .custom_tags(
                    SingleLetterTag::lowercase(Alphabet::H),
                    self.groups.iter().cloned(),
                )
                .since(since);
            subscriptions.push((SubscriptionId::new(GROUPS_SUBSCRIPTION_ID), chat));
        }
        subscriptions
    }
}
