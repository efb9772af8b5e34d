//! NIP-29 timeline references: the `previous` tags of the bot's events in
//! a group.
//!
//! NIP-29 lets a group event name recent events of its group by the first
//! 8 hex characters of their ids (`["previous", "1a2b3c4d"]`), so that it
//! cannot be replayed out of context on another relay holding a fork of
//! the group; a relay may reject an event naming ids it does not hold, and
//! may require a few. The NIP recommends at least 3, picked among the last
//! 50 events the client saw in the group, excluding its own. Which relays
//! want them cannot be told (no NIP-11 field says so), and a relay that
//! does not check them ignores them, so every group event the bot
//! publishes carries them, as clients' do: answers, notices, progress
//! messages and reactions.
//!
//! Owns, per group and relay, the ids of the last [`PREVIOUS_REFS`] events
//! the intake heard there, in memory: the mentions and the served groups'
//! chat, which the relay links read anyway (nothing is fetched for this),
//! not the bot's own (NIP-29: "excluding events by themselves"). Bounded in
//! groups too ([`MAX_GROUPS`]): a stranger can mention the bot in any
//! number of group ids. Lost at a restart: until a group speaks again the
//! bot's events there carry none, which a relay that requires them
//! refuses; the mention that wakes the bot is always among them, since it
//! is heard before it is answered.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use acp_bridge_core::mention::group_id;
use nostr_sdk::prelude::{Event, EventId, PublicKey, RelayUrl, Tag, TagKind};

/// How many recent events of its group a group event names. Three is the
/// least NIP-29 recommends; 6 is what applesauce-based clients add, and it
/// keeps an event acceptable when some of the ids have since left the
/// relay's timeline window, without naming so many that a moderator's
/// deletion of any one of them is likely to get the next event refused.
pub(crate) const PREVIOUS_REFS: usize = 6;
/// How many groups' timelines are kept; past it the one heard from least
/// recently is dropped.
const MAX_GROUPS: usize = 1024;
/// How many hex characters of an id a `previous` tag carries (NIP-29).
const PREFIX_CHARS: usize = 8;

/// One group on one relay, as the timelines key it.
type GroupKey = (String, String);

/// The recent events heard per group (see the module doc); cheap to clone,
/// shared by the intake (which records) and the replier (which tags).
#[derive(Debug, Clone, Default)]
pub(crate) struct Timelines {
    inner: Arc<Mutex<Heard>>,
}

#[derive(Debug, Default)]
struct Heard {
    groups: HashMap<GroupKey, Timeline>,
    /// Counts recordings, to tell which group was heard from last.
    clock: u64,
}

#[derive(Debug, Default)]
struct Timeline {
    /// Newest last.
    ids: VecDeque<EventId>,
    heard_at: u64,
}

fn key(relay: &RelayUrl, group: &str) -> GroupKey {
    (relay.as_str_without_trailing_slash().to_owned(), group.to_owned())
}

impl Timelines {
    /// Records `event`, heard on `relay`, in its group's timeline when it
    /// has an `h` tag and is not by `bot`.
    pub(crate) fn heard(&self, relay: &RelayUrl, event: &Event, bot: &PublicKey) {
        if event.pubkey == *bot {
            return;
        }
        let Some(group) = group_id(&event.tags) else {
            return;
        };
        let mut heard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        heard.clock += 1;
        let now = heard.clock;
        let key = key(relay, &group);
        if !heard.groups.contains_key(&key) && heard.groups.len() >= MAX_GROUPS {
            let stalest = heard
                .groups
                .iter()
                .min_by_key(|(_, timeline)| timeline.heard_at)
                .map(|(key, _)| key.clone());
            if let Some(stalest) = stalest {
                heard.groups.remove(&stalest);
            }
        }
        let timeline = heard.groups.entry(key).or_default();
        timeline.heard_at = now;
        if timeline.ids.contains(&event.id) {
            return;
        }
        if timeline.ids.len() == PREVIOUS_REFS {
            timeline.ids.pop_front();
        }
        timeline.ids.push_back(event.id);
    }

    /// The `previous` tags of an event the bot publishes in `group` on
    /// `relay`: the recent events heard there, newest first.
    pub(crate) fn previous_tags(&self, relay: &RelayUrl, group: &str) -> Vec<Tag> {
        let heard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        heard
            .groups
            .get(&key(relay, group))
            .map(|timeline| {
                timeline
                    .ids
                    .iter()
                    .rev()
                    .map(|id| {
                        let prefix = &id.to_hex()[..PREFIX_CHARS];
                        Tag::custom(TagKind::custom("previous"), [prefix.to_owned()])
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_sdk::prelude::{EventBuilder, Keys, Kind};

    fn relay(url: &str) -> RelayUrl {
        RelayUrl::parse(url).unwrap()
    }

    fn chat(keys: &Keys, group: &str, text: &str) -> Event {
        EventBuilder::new(Kind::Custom(9), text)
            .tag(Tag::custom(TagKind::h(), [group]))
            .sign_with_keys(keys)
            .unwrap()
    }

    fn prefixes(tags: &[Tag]) -> Vec<String> {
        tags.iter()
            .map(|tag| {
                assert_eq!(tag.kind().as_str(), "previous");
                tag.content().unwrap().to_owned()
            })
            .collect()
    }

    #[test]
    fn a_group_names_its_last_events_by_prefix_newest_first_and_never_the_bots_or_another_groups() {
        let (bot, person) = (Keys::generate(), Keys::generate());
        let timelines = Timelines::default();
        let (a, b) = (relay("ws://a.example"), relay("ws://b.example/"));
        let events: Vec<Event> = (0..PREVIOUS_REFS + 2)
            .map(|n| chat(&person, "pizza", &format!("message {n}")))
            .collect();
        for event in &events {
            timelines.heard(&a, event, &bot.public_key());
        }
        timelines.heard(&a, &events[events.len() - 1], &bot.public_key());
        timelines.heard(&a, &chat(&bot, "pizza", "the bot's own"), &bot.public_key());
        timelines.heard(&a, &chat(&person, "pasta", "another group"), &bot.public_key());
        timelines.heard(&b, &chat(&person, "pizza", "another relay"), &bot.public_key());

        let expected: Vec<String> = events
            .iter()
            .rev()
            .take(PREVIOUS_REFS)
            .map(|event| event.id.to_hex()[..8].to_owned())
            .collect();
        assert_eq!(
            prefixes(&timelines.previous_tags(&relay("ws://a.example/"), "pizza")),
            expected
        );
        assert_eq!(timelines.previous_tags(&b, "pizza").len(), 1);
        assert!(timelines.previous_tags(&a, "unheard").is_empty());
    }

    #[test]
    fn past_the_bound_the_group_heard_from_least_recently_is_dropped() {
        let (bot, person) = (Keys::generate(), Keys::generate());
        let timelines = Timelines::default();
        let url = relay("ws://a.example");
        for n in 0..=MAX_GROUPS {
            timelines.heard(&url, &chat(&person, &format!("g{n}"), "hi"), &bot.public_key());
        }
        assert!(timelines.previous_tags(&url, "g0").is_empty());
        assert_eq!(timelines.previous_tags(&url, "g1").len(), 1);
        assert_eq!(timelines.previous_tags(&url, &format!("g{MAX_GROUPS}")).len(), 1);
    }
}
