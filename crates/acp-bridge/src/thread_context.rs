//! Thread context for a turn (`--thread-context N`): the thread's last
//! messages that the conversation's agent session has not seen, fetched
//! from the relay once, before the turn's first prompt, and quoted ahead of
//! it with each author's standing.
//!
//! What a thread is follows the conversation: a note thread is its root and
//! the kind-1 replies that reference it; a group conversation is its
//! channel's chat (kinds 9, 11 and 1111 with its `h` tag, the kinds this
//! codebase keys group conversations by). DMs get none: the relay holds
//! only gift wraps. Left out: the turn's own mentions, every event the
//! journal took in (mentions already prompted, or refused), and the bot's
//! own messages. A new session (after `!rotate`, or one the agent lost)
//! gets the thread again from its last messages, still without the bot's
//! exchange (the mentions it was prompted with and its answers): `!rotate`
//! asks for a fresh start, and handing the old exchange back would undo it.
//!
//! Runs on the turn's driver task, never on the intake's or the heart's:
//! the fetch is bounded by [`CONTEXT_FETCH_TIMEOUT`], and a timeout or a
//! relay failure costs the context (one log line), never the turn.
//!
//! Standing: the owner and the allowlist are known here; a sibling bot is
//! known only to the intake's gate (its attestation), so a sibling's
//! earlier message reads as from someone.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use nostr_sdk::prelude::{Alphabet, Client, Event, Filter, Kind, PublicKey, SingleLetterTag, Timestamp};

use crate::framing::{self, Earlier};
use crate::gate::Standing;
use crate::intake::MAX_FUTURE_SKEW_SECS;
use crate::mention::{Mention, Thread, short_npub};
use crate::store::Store;
use crate::telemetry::metrics;

/// How long the relay may take to return a thread's earlier messages.
pub(crate) const CONTEXT_FETCH_TIMEOUT: Duration = Duration::from_secs(3);
/// Group chat kinds: chat message, thread, comment.
const GROUP_KINDS: [u16; 3] = [9, 11, 1111];

/// What a turn needs to fetch and frame its thread's context.
#[derive(Debug, Clone)]
pub(crate) struct ThreadContext {
    pub client: Client,
    pub store: Arc<Store>,
    pub bot: PublicKey,
    pub owner: Option<PublicKey>,
    pub allowlist: BTreeSet<PublicKey>,
    /// `--thread-context`: earlier messages at most (never 0 here).
    pub limit: usize,
}

impl ThreadContext {
    /// The context block for a turn answering `batch`, and marks the
    /// conversation's session as having seen it; empty when there is
    /// nothing new, or the relay did not answer in time.
    pub async fn for_turn(&self, batch: &[Mention]) -> String {
        let Some(first) = batch.first() else {
            return String::new();
        };
        let conversation = first.conversation.as_str();
        let mark = self.store.context_mark(conversation).ok().flatten();
        let filters = self.filters(&first.thread, mark.as_ref().map(|(at, _)| *at));
        let asked_the_relay = !filters.is_empty();
        let fetches = filters.into_iter().map(|filter| async {
            match &first.origin {
                Some(relay) => {
                    self.client
                        .fetch_events_from([relay.clone()], filter, CONTEXT_FETCH_TIMEOUT)
                        .await
                }
                None => self.client.fetch_events(filter, CONTEXT_FETCH_TIMEOUT).await,
            }
        });
        let mut earlier: Vec<Event> = Vec::new();
        for fetched in futures_util::future::join_all(fetches).await {
            match fetched {
                Ok(events) => earlier.extend(events),
                Err(error) => {
                    metrics::thread_context("failed");
                    tracing::warn!(%error, "no thread context: the relay did not answer; prompting without it");
                    return String::new();
                }
            }
        }
        earlier.retain(|event| self.is_new_context(event, batch, mark.as_ref()));
        self.leave_out_journaled(&mut earlier);
        earlier.sort_by_key(|event| (event.created_at, event.id));
        earlier.dedup_by_key(|event| event.id);
        let skip = earlier.len().saturating_sub(self.limit);
        let earlier = &earlier[skip..];
        // The session sees the batch too: the next turn's fetch starts at
        // its newest mention (an id of "" keeps that second's other events
        // new), so it reads only what came since, not the whole exchange.
        let seen_batch = batch
            .iter()
            .map(|mention| (mention.created_at.as_secs() as i64, String::new()));
        let seen_context = earlier
            .iter()
            .map(|event| (event.created_at.as_secs() as i64, event.id.to_hex()));
        if let Some((at, id)) = seen_batch.chain(seen_context).max()
            && let Err(error) = self.store.advance_context_mark(conversation, at, &id)
        {
            tracing::warn!(%error, "cannot record the thread context given to the session");
        }
        if asked_the_relay {
            metrics::thread_context(if earlier.is_empty() {
                "nothing_new"
            } else {
                "included"
            });
        }
        if earlier.is_empty() {
            return String::new();
        }
        tracing::info!(messages = earlier.len(), "thread context for the prompt");
        let quoted: Vec<Earlier<'_>> = earlier
            .iter()
            .map(|event| Earlier {
                author: short_npub(&event.pubkey),
                standing: self.standing(&event.pubkey),
                event_id: event.id.to_hex(),
                content: &event.content,
            })
            .collect();
        framing::context_block(&quoted)
    }

    /// The relay queries for the thread's earlier messages, after `since`
    /// (a note thread's root only the first time: it is never new later).
    fn filters(&self, thread: &Thread, since: Option<i64>) -> Vec<Filter> {
        let (replies, root) = match thread {
            // A new top-level note is its own root: nothing came before it,
            // so a first turn on it costs no round trip.
            Thread::Note { root, mention } if root == mention && since.is_none() => return Vec::new(),
            Thread::Note { root, .. } => (
                Filter::new().kind(Kind::TextNote).event(*root),
                since.is_none().then(|| Filter::new().id(*root)),
            ),
            Thread::Group { channel, .. } => (
                Filter::new()
                    .kinds(GROUP_KINDS.map(Kind::from))
                    .custom_tag(SingleLetterTag::lowercase(Alphabet::H), channel.clone()),
                None,
            ),
            Thread::Direct { .. } => return Vec::new(),
        };
        // Room for the events left out (the turn's own, the bot's).
        let replies = replies.limit(self.limit.saturating_mul(4));
        let replies = match since {
            Some(since) => replies.since(Timestamp::from_secs(since.max(0) as u64)),
            None => replies,
        };
        std::iter::once(replies).chain(root).collect()
    }

    /// Whether `event` is context the session has not seen. An event dated
    /// further ahead than the intake accepts for a mention is left out: it
    /// would carry the mark into the future, and every later fetch (from
    /// the mark on) would come back empty.
    fn is_new_context(&self, event: &Event, batch: &[Mention], mark: Option<&(i64, String)>) -> bool {
        let after_mark = mark.is_none_or(|(at, id)| {
            (event.created_at.as_secs() as i64, event.id.to_hex()) > (*at, id.clone())
        });
        let not_future = event.created_at.as_secs() <= Timestamp::now().as_secs() + MAX_FUTURE_SKEW_SECS;
        after_mark
            && not_future
            && event.pubkey != self.bot
            && !batch.iter().any(|mention| mention.event_id == event.id)
    }

    /// Leaves out the events the journal took in: mentions already
    /// prompted, or refused. Kept when the journal cannot be read (the
    /// agent sees a message twice rather than not at all).
    fn leave_out_journaled(&self, events: &mut Vec<Event>) {
        let ids: Vec<String> = events.iter().map(|event| event.id.to_hex()).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        match self.store.journal_contains_any(&ids) {
            Ok(journaled) => {
                // `retain` visits the events in order, as `ids` holds them.
                let mut fresh = ids.iter().map(|id| !journaled.contains(id));
                events.retain(|_| fresh.next().unwrap_or(true));
            }
            Err(error) => {
                tracing::warn!(%error, "cannot check the thread context against the journal; keeping it all")
            }
        }
    }

    fn standing(&self, author: &PublicKey) -> Standing {
        if Some(*author) == self.owner {
            Standing::Owner
        } else if self.allowlist.contains(author) {
            Standing::Allowlisted
        } else {
            Standing::Stranger
        }
    }
}
