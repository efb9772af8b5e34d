//! What the bot's own replies on a relay say about what it has done: which
//! threads it answered in, and which mentions a daemon of this bot took.
//!
//! The store records both, but the store is one daemon's: after the shard
//! count changes (`--shard i/n`) a conversation may hash to a shard that
//! never saw it, and a state dir may be new. The bot's replies on the
//! relay are the one record every shard can read. So at its first
//! connection, before it subscribes to mentions, each relay link reads the
//! bot's newest public replies there and
//! - journals the mentions they reply to (NIP-10 `reply` marker) or quote
//!   (`q`, the other mentions of a merged answer) as seen: the relay
//!   offering them again after the subscription's look-back is then a
//!   duplicate, not a second answer;
//! - with `--follow-threads involved`, records the threads they answered
//!   in, oldest first (the first answer dates the thread: replies before
//!   it are no follow-ups), so the shard that owns a thread now follows it.
//!
//! A reply of the bot's that was a notice or a question (not an answer)
//! also marks its mention seen: some daemon of this bot took that mention
//! and journaled it, which is what "seen" means. DMs are left out: their
//! replies are gift-wrapped to the reader, and the intake learns them from
//! the bot's own copies instead (`before_start`).
//!
//! Owns no subscription: one bounded query; the relay link then follows
//! the threads from the store as it always does.

use std::collections::BTreeSet;
use std::time::Duration;

use acp_bridge_core::mention;
use nostr_sdk::prelude::{
    Event, EventId, Filter, Kind, Marker, PublicKey, Relay, ReqExitPolicy, TagKind, TagStandard, Tags,
};

use crate::outbound::reply::is_interim;
use crate::state::ledger::Ledger;
use crate::state::store::AnsweredThreads;

/// How long the relay may take to return the bot's replies.
const OWN_REPLIES_FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// What the relay link asks of its relay's copy of the bot's replies.
#[derive(Debug)]
pub(super) struct OwnReplies<'a> {
    pub relay: &'a Relay,
    pub bot: PublicKey,
    /// The public kinds the bot answers in (never empty).
    pub kinds: Vec<Kind>,
    /// The bot's newest replies read at most.
    pub limit: usize,
    /// Record the threads answered in (`--follow-threads involved`).
    pub follow_threads: bool,
}

impl OwnReplies<'_> {
    /// Reads the replies and records what they say in `store` (see the
    /// module doc). Returns the mentions they answer that the store did not
    /// know as seen (the intake reports them when the relay offers them:
    /// `before_start`). A relay that does not answer costs the log line,
    /// and the daemon goes on with what its own store knows (answering
    /// again rather than not at all).
    pub(super) async fn learn(self, ledger: &Ledger, threads: &AnsweredThreads) -> Vec<EventId> {
        let filter = Filter::new().author(self.bot).kinds(self.kinds).limit(self.limit);
        let fetched = self
            .relay
            .fetch_events(filter, OWN_REPLIES_FETCH_TIMEOUT, ReqExitPolicy::ExitOnEOSE)
            .await;
        let mut replies: Vec<Event> = match fetched {
            Ok(events) => events
                .into_iter()
                .filter(|event| event.pubkey == self.bot)
                .collect(),
            Err(error) => {
                tracing::warn!(relay = %self.relay.url(), %error, "cannot read the bot's own replies; going on with what this daemon's store knows");
                return Vec::new();
            }
        };
        replies.sort_by_key(|event| event.created_at);
        let answered: BTreeSet<EventId> = replies
            .iter()
            .flat_map(|reply| answered_mentions(&reply.tags))
            .collect();
        let answered: Vec<EventId> = answered.into_iter().collect();
        let seen = ledger
            .taken_elsewhere(&answered)
            .unwrap_or_else(|error| {
                tracing::warn!(relay = %self.relay.url(), %error, "cannot journal the mentions the bot's replies answer");
                Vec::new()
            });
        let new_threads = match self.follow_threads {
            true => record_threads(threads, &replies),
            false => 0,
        };
        tracing::info!(
            relay = %self.relay.url(),
            replies = replies.len(),
            newly_seen = seen.len(),
            new_threads,
            "learned from the bot's own replies"
        );
        seen
    }
}

/// Records the threads `replies` (oldest first) answered in; how many were
/// new to the store.
fn record_threads(threads: &AnsweredThreads, replies: &[Event]) -> usize {
    let mut new_threads = 0;
    for reply in replies {
        let Some(root) = mention::followed_root(reply) else {
            continue;
        };
        match threads.answered(root, reply.created_at) {
            Ok(new) => new_threads += usize::from(new),
            Err(error) => {
                tracing::warn!(%error, "cannot record a thread the bot answered in");
                break;
            }
        }
    }
    new_threads
}

/// The events a reply of the bot's with `tags` answers (a public reply, or
/// the rumor of a DM answer): its NIP-10 `reply` marker, a comment's
/// parent (NIP-22 `e`, in an answer carrying a root kind `K`), and what it
/// quotes (`q`). Never its `root`: a thread's root may be someone's note
/// the bot never answered. Nothing for an interim message (a waiting
/// notice, a question): it tells, it does not answer.
pub(super) fn answered_mentions(tags: &Tags) -> impl Iterator<Item = EventId> + '_ {
    let interim = is_interim(tags);
    let comment = tags.iter().any(|tag| tag.kind() == TagKind::custom("K"));
    tags.iter().filter(move |_| !interim).filter_map(move |tag| {
        if tag.kind() == TagKind::q() || (comment && tag.kind() == TagKind::e()) {
            return tag.content().and_then(|id| EventId::from_hex(id).ok());
        }
        match tag.as_standardized()? {
            TagStandard::Event {
                event_id,
                marker: Some(Marker::Reply),
                ..
            } => Some(*event_id),
            _ => None,
        }
    })
}
