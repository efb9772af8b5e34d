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

/// What a session has seen of its thread: every event dated before `at`
/// (unix seconds), and of those dated `at`, the ones in `ids`. Relays
/// filter by whole seconds and event ids do not order events within one,
/// so the second's other events stay new until they are seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Mark {
    at: i64,
    ids: BTreeSet<String>,
}

impl Mark {
    /// From the store's row: the second and its ids, comma-separated (a
    /// single id or none in rows written before ids were listed).
    fn read(at: i64, ids: &str) -> Self {
        let ids = ids
            .split(',')
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .collect();
        Mark { at, ids }
    }

    fn ids_text(&self) -> String {
        self.ids.iter().map(String::as_str).collect::<Vec<_>>().join(",")
    }

    fn has_seen(&self, at: i64, id: &str) -> bool {
        at < self.at || (at == self.at && self.ids.contains(id))
    }

    /// The mark once `seen` (dates and ids) were seen as well.
    fn advanced(mut self, seen: impl IntoIterator<Item = (i64, String)>) -> Self {
        let seen: Vec<(i64, String)> = seen.into_iter().collect();
        if let Some(newest) = seen
            .iter()
            .map(|(at, _)| *at)
            .max()
            .filter(|newest| *newest > self.at)
        {
            self = Mark {
                at: newest,
                ids: BTreeSet::new(),
            };
        }
        let at = self.at;
        self.ids.extend(
            seen.into_iter()
                .filter(|(seen_at, _)| *seen_at == at)
                .map(|(_, id)| id),
        );
        self
    }
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
        let mark = self
            .store
            .context_mark(conversation)
            .ok()
            .flatten()
            .map(|(at, ids)| Mark::read(at, &ids));
        let filters = self.filters(&first.thread, mark.as_ref().map(|mark| mark.at));
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
        // the newest second it saw, so it reads only what came since.
        let seen_batch = batch
            .iter()
            .map(|mention| (mention.created_at.as_secs() as i64, mention.event_id.to_hex()));
        let seen_context = earlier
            .iter()
            .map(|event| (event.created_at.as_secs() as i64, event.id.to_hex()));
        let next = mark
            .clone()
            .unwrap_or_default()
            .advanced(seen_batch.chain(seen_context));
        if Some(&next) != mark.as_ref()
            && let Err(error) = self
                .store
                .advance_context_mark(conversation, next.at, &next.ids_text())
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
    fn is_new_context(&self, event: &Event, batch: &[Mention], mark: Option<&Mark>) -> bool {
        let created_at = event.created_at.as_secs();
        let unseen = mark.is_none_or(|mark| !mark.has_seen(created_at as i64, &event.id.to_hex()));
        let not_future = created_at <= Timestamp::now().as_secs() + MAX_FUTURE_SKEW_SECS;
        unseen
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

#[cfg(test)]
mod tests {
    use super::Mark;

    fn seen(events: &[(i64, &str)]) -> Vec<(i64, String)> {
        events.iter().map(|(at, id)| (*at, (*id).to_owned())).collect()
    }

    #[test]
    fn events_of_the_marks_second_stay_new_until_seen_whatever_their_ids() {
        let mark = Mark::default().advanced(seen(&[(5, "aa"), (10, "ff"), (10, "cc")]));
        assert_eq!(mark.at, 10);
        assert!(mark.has_seen(9, "zz") && mark.has_seen(10, "ff") && mark.has_seen(10, "cc"));
        assert!(
            !mark.has_seen(10, "00"),
            "a lower id in the same second is not seen"
        );
        assert!(!mark.has_seen(11, "00"));
        let same_second = mark.clone().advanced(seen(&[(10, "00")]));
        assert!(same_second.has_seen(10, "00") && same_second.has_seen(10, "ff"));
        let later = same_second.clone().advanced(seen(&[(12, "bb"), (3, "ee")]));
        assert_eq!(later, Mark::read(12, "bb"));
        assert_eq!(Mark::read(later.at, &later.ids_text()), later);
        assert_eq!(
            later.clone().advanced(Vec::new()),
            later,
            "nothing seen: unchanged"
        );
    }

    #[test]
    fn marks_written_before_ids_were_listed_still_read() {
        assert_eq!(
            Mark::read(7, ""),
            Mark {
                at: 7,
                ids: Default::default()
            }
        );
        assert!(Mark::read(7, "abc").has_seen(7, "abc"));
    }
}
