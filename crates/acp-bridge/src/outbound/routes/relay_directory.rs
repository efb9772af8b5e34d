//! Where a person reads: their NIP-17 DM inbox relays (kind 10050) and
//! their NIP-65 read relays (kind 10002 `r` tags marked `read` or not
//! marked), looked up on the bot's own relays and on its directory relays
//! (`--directory-relays`, indexers such as purplepag.es: where clients
//! publish their users' lists and look them up).
//!
//! Owns the lookup and its cache, nothing else: which of these relays an
//! event goes to is `routes`' decision. Only lists by the person, whose
//! signature we verified ourselves, count (a relay can serve anything under
//! any author, and the SDK's verification cache is keyed by id alone); the
//! newest of each kind wins. Which of the relays named may be tried is
//! `routes`' question too, asked at each event (a relay can be found
//! unusable after its list was read).
//! A lookup that finds nothing (or times out) answers "no lists", which
//! the caller reads as "use the bot's own relays"; that answer is cached
//! too, for a shorter time, so a person without lists costs one query per
//! [`NO_LISTS_TTL`], not one per message. The cache holds at most
//! [`MAX_DIRECTORY_ENTRIES`] people whatever the number of people the bot
//! hears from: when full, the entry closest to its expiry makes room.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nostr_sdk::prelude::{Client, Event, Filter, Kind, PublicKey, RelayMetadata, RelayUrl, nips};

use super::outbound_relays::OutboundRelays;
use crate::telemetry::metrics;

/// How long a lookup waits for the bot's relays to answer.
pub(super) const LIST_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// People whose lists are remembered at once.
pub(super) const MAX_DIRECTORY_ENTRIES: usize = 1024;
/// How long found lists are trusted before they are looked up again.
pub(super) const LISTS_TTL: Duration = Duration::from_secs(30 * 60);
/// How long "this person lists no relays" is trusted: shorter, so someone
/// who just published a list is soon found.
pub(super) const NO_LISTS_TTL: Duration = Duration::from_secs(5 * 60);
/// Relays taken from one list at most: NIP-17 and NIP-65 ask for short
/// lists, and a long one must not fan a message out without end.
pub(super) const MAX_RELAYS_PER_LIST: usize = 5;

/// The relays a person reads on, as their newest lists name them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RelayLists {
    /// Kind 10050: where DMs to them go (NIP-17).
    pub dm_inbox: Vec<RelayUrl>,
    /// Kind 10002 `read` (or unmarked) relays: where replies to them go
    /// besides the thread's relay (NIP-65).
    pub read: Vec<RelayUrl>,
}

impl RelayLists {
    /// The lists of `person` among `events` (any mix of kinds 10050 and
    /// 10002), newest first per kind; an event by another author or whose
    /// signature does not verify is ignored.
    pub(crate) fn from_events<'a>(
        person: PublicKey,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> RelayLists {
        let mut inbox: Option<&Event> = None;
        let mut relay_list: Option<&Event> = None;
        let theirs = events
            .into_iter()
            .filter(|event| event.pubkey == person && event.verify().is_ok());
        for event in theirs {
            let slot = match event.kind {
                Kind::InboxRelays => &mut inbox,
                Kind::RelayList => &mut relay_list,
                _ => continue,
            };
            if slot.is_none_or(|newest| event.created_at > newest.created_at) {
                *slot = Some(event);
            }
        }
        let dm_inbox = inbox
            .map(|event| nips::nip17::extract_relay_list(event).cloned().collect())
            .unwrap_or_default();
        let read = relay_list
            .map(|event| {
                nips::nip65::extract_relay_list(event)
                    .filter(|(_, marker)| !matches!(marker, Some(RelayMetadata::Write)))
                    .map(|(url, _)| url.clone())
                    .collect()
            })
            .unwrap_or_default();
        RelayLists {
            dm_inbox: bounded(dm_inbox),
            read: bounded(read),
        }
    }

    fn is_empty(&self) -> bool {
        self.dm_inbox.is_empty() && self.read.is_empty()
    }

    /// Keeps the relays `keep` allows.
    pub(super) fn retain(&mut self, keep: impl Fn(&RelayUrl) -> bool) {
        self.dm_inbox.retain(&keep);
        self.read.retain(&keep);
    }
}

/// `urls` without duplicates, the first [`MAX_RELAYS_PER_LIST`] of them.
fn bounded(urls: Vec<RelayUrl>) -> Vec<RelayUrl> {
    let mut kept: Vec<RelayUrl> = Vec::new();
    for url in urls {
        if kept.len() == MAX_RELAYS_PER_LIST {
            break;
        }
        if !kept.contains(&url) {
            kept.push(url);
        }
    }
    kept
}

/// The bounded, expiring memory of people's lists. No I/O, no clock of its
/// own (`now` comes in), so its bound and lifetimes are tested on their own.
#[derive(Debug)]
pub(super) struct ListCache {
    capacity: usize,
    entries: HashMap<PublicKey, Cached>,
}

#[derive(Debug)]
struct Cached {
    lists: RelayLists,
    expires: Instant,
}

impl ListCache {
    pub(super) fn new(capacity: usize) -> Self {
        ListCache {
            capacity,
            entries: HashMap::new(),
        }
    }

    /// The lists of `person` if known and not expired at `now`.
    pub(super) fn get(&mut self, person: &PublicKey, now: Instant) -> Option<RelayLists> {
        match self.entries.get(person) {
            Some(cached) if cached.expires > now => Some(cached.lists.clone()),
            Some(_) => {
                self.entries.remove(person);
                None
            }
            None => None,
        }
    }

    /// Remembers `lists` for `person` from `now`: [`LISTS_TTL`], or
    /// [`NO_LISTS_TTL`] when they are empty. When full, the expired entries
    /// go, and if none had expired, the one closest to expiring.
    pub(super) fn put(&mut self, person: PublicKey, lists: RelayLists, now: Instant) {
        let ttl = if lists.is_empty() { NO_LISTS_TTL } else { LISTS_TTL };
        if !self.entries.contains_key(&person) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, cached| cached.expires > now);
            if self.entries.len() >= self.capacity
                && let Some(soonest) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, cached)| cached.expires)
                    .map(|(key, _)| *key)
            {
                self.entries.remove(&soonest);
            }
        }
        self.entries.insert(
            person,
            Cached {
                lists,
                expires: now + ttl,
            },
        );
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Looks people's lists up on the bot's relays (the listening client's)
/// and on the directory relays (through the outbound connections, which
/// keep them out of the listening client), through the cache.
#[derive(Debug)]
pub(crate) struct RelayDirectory {
    client: Client,
    directory: Vec<RelayUrl>,
    outbound: Arc<OutboundRelays>,
    cache: Mutex<ListCache>,
}

impl RelayDirectory {
    pub(crate) fn new(client: Client, directory: Vec<RelayUrl>, outbound: Arc<OutboundRelays>) -> Self {
        RelayDirectory {
            client,
            directory,
            outbound,
            cache: Mutex::new(ListCache::new(MAX_DIRECTORY_ENTRIES)),
        }
    }

    /// The lists' events on the bot's relays and the directory relays;
    /// fails only when neither answered.
    async fn fetch(&self, filter: Filter) -> Result<Vec<Event>, nostr_sdk::client::Error> {
        let own = self.client.fetch_events(filter.clone(), LIST_LOOKUP_TIMEOUT);
        let directory = async {
            match self.directory.is_empty() {
                true => Ok(Vec::new()),
                false => {
                    self.outbound
                        .fetch_from(&self.directory, filter.clone(), LIST_LOOKUP_TIMEOUT)
                        .await
                }
            }
        };
        match tokio::join!(own, directory) {
            (Ok(own), Ok(directory)) => Ok(own.into_iter().chain(directory).collect()),
            (Ok(own), Err(error)) => {
                tracing::debug!(%error, "no directory relay answered a lookup of relay lists");
                Ok(own.into_iter().collect())
            }
            (Err(_), Ok(directory)) if !self.directory.is_empty() => Ok(directory),
            (Err(error), _) => Err(error),
        }
    }

    /// The lists of `person`: cached, or looked up within
    /// [`LIST_LOOKUP_TIMEOUT`]. A lookup that fails answers "no lists" (the
    /// bot's own relays) and is not cached, so the next message tries again.
    pub(crate) async fn lists(&self, person: PublicKey) -> RelayLists {
        if let Some(lists) = self.cache().get(&person, Instant::now()) {
            return lists;
        }
        let filter = Filter::new()
            .author(person)
            .kinds([Kind::InboxRelays, Kind::RelayList]);
        match self.fetch(filter).await {
            Ok(events) => {
                let lists = RelayLists::from_events(person, events.iter());
                metrics::relay_list_lookup(if lists.is_empty() { "none" } else { "found" });
                tracing::debug!(%person, dm_inbox = ?lists.dm_inbox, read = ?lists.read, "looked up a person's relay lists");
                self.cache().put(person, lists.clone(), Instant::now());
                lists
            }
            Err(error) => {
                metrics::relay_list_lookup("failed");
                tracing::debug!(%person, %error, "cannot look up a person's relay lists; using the bot's relays");
                RelayLists::default()
            }
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, ListCache> {
        self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_sdk::prelude::JsonUtil;
    use nostr_sdk::prelude::{EventBuilder, Keys, Tag, Timestamp};

    fn url(n: usize) -> RelayUrl {
        RelayUrl::parse(&format!("wss://relay{n}.example.com")).unwrap()
    }

    fn lists(n: usize) -> RelayLists {
        RelayLists {
            dm_inbox: vec![url(n)],
            read: Vec::new(),
        }
    }

    fn person() -> PublicKey {
        Keys::generate().public_key()
    }

    #[test]
    fn found_lists_live_their_ttl_and_no_lists_a_shorter_one() {
        let mut cache = ListCache::new(10);
        let start = Instant::now();
        let (found, none) = (person(), person());
        cache.put(found, lists(1), start);
        cache.put(none, RelayLists::default(), start);
        let before_short = start + NO_LISTS_TTL - Duration::from_secs(1);
        assert_eq!(cache.get(&found, before_short), Some(lists(1)));
        assert_eq!(cache.get(&none, before_short), Some(RelayLists::default()));
        let after_short = start + NO_LISTS_TTL;
        assert_eq!(cache.get(&none, after_short), None, "looked up again");
        assert_eq!(cache.get(&found, after_short), Some(lists(1)));
        assert_eq!(cache.get(&found, start + LISTS_TTL), None);
        assert_eq!(cache.len(), 0, "expired entries are dropped when read");
    }

    #[test]
    fn the_cache_never_holds_more_than_its_capacity_whatever_the_number_of_people() {
        let capacity = 8;
        let mut cache = ListCache::new(capacity);
        let start = Instant::now();
        let first = person();
        cache.put(first, lists(0), start);
        for n in 1..1000 {
            cache.put(person(), lists(n), start + Duration::from_millis(n as u64));
            assert!(cache.len() <= capacity, "{} entries", cache.len());
        }
        assert_eq!(cache.len(), capacity);
        assert_eq!(
            cache.get(&first, start + Duration::from_secs(1)),
            None,
            "the one closest to expiring made room"
        );
        // Expired entries make room before live ones.
        let later = start + LISTS_TTL + Duration::from_secs(1);
        let newcomer = person();
        cache.put(newcomer, lists(1), later);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(&newcomer, later), Some(lists(1)));
    }

    fn signed(keys: &Keys, kind: Kind, tags: Vec<Tag>, at: u64) -> Event {
        EventBuilder::new(kind, "")
            .tags(tags)
            .custom_created_at(Timestamp::from_secs(at))
            .sign_with_keys(keys)
            .unwrap()
    }

    #[test]
    fn the_newest_list_of_each_kind_wins_and_write_only_relays_are_not_read_relays() {
        let keys = Keys::generate();
        let relay = |n: usize| Tag::parse(["relay", url(n).as_str()]).unwrap();
        let r = |n: usize, marker: Option<&str>| {
            let mut parts = vec!["r".to_owned(), url(n).to_string()];
            parts.extend(marker.map(str::to_owned));
            Tag::parse(parts).unwrap()
        };
        let old_inbox = signed(&keys, Kind::InboxRelays, vec![relay(1)], 100);
        let new_inbox = signed(&keys, Kind::InboxRelays, vec![relay(2), relay(3), relay(2)], 200);
        let relay_list = signed(
            &keys,
            Kind::RelayList,
            vec![r(4, None), r(5, Some("read")), r(6, Some("write"))],
            150,
        );
        let lists = RelayLists::from_events(keys.public_key(), [&new_inbox, &relay_list, &old_inbox]);
        assert_eq!(lists.dm_inbox, [url(2), url(3)]);
        assert_eq!(lists.read, [url(4), url(5)]);

        let long = signed(&keys, Kind::InboxRelays, (0..20).map(relay).collect(), 300);
        assert_eq!(
            RelayLists::from_events(keys.public_key(), [&long]).dm_inbox.len(),
            MAX_RELAYS_PER_LIST
        );
    }

    /// A relay can serve a list under anyone's name: only the person's own,
    /// signed by them, counts.
    #[test]
    fn a_list_by_another_author_or_with_a_forged_signature_is_ignored() {
        let (person, stranger) = (Keys::generate(), Keys::generate());
        let relay = |n: usize| Tag::parse(["relay", url(n).as_str()]).unwrap();
        let genuine = signed(&person, Kind::InboxRelays, vec![relay(1)], 100);
        let by_another = signed(&stranger, Kind::InboxRelays, vec![relay(2)], 200);
        // The person's own list, newer, its tags changed after signing:
        // the id and signature no longer match the content.
        let mut json: serde_json::Value = serde_json::from_str(&genuine.as_json()).unwrap();
        json["tags"] = serde_json::json!([["relay", url(3).as_str()]]);
        json["created_at"] = serde_json::json!(300);
        let forged = Event::from_json(json.to_string()).unwrap();
        assert_eq!(forged.pubkey, person.public_key());
        // And one whose signature is another event's.
        let mut json: serde_json::Value =
            serde_json::from_str(&signed(&person, Kind::InboxRelays, vec![relay(4)], 400).as_json()).unwrap();
        json["sig"] = serde_json::json!(genuine.sig.to_string());
        let resigned = Event::from_json(json.to_string()).unwrap();
        let lists = RelayLists::from_events(person.public_key(), [&genuine, &by_another, &forged, &resigned]);
        assert_eq!(lists.dm_inbox, [url(1)], "only the genuine list");
    }
}
