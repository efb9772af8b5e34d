//! Events the intake could not take yet, and what they hold back.
//!
//! An event is *taken* once it is journaled or refused on its merits (not
//! heard, a duplicate, too old…). Some events can be neither for a while:
//! the journal write failed, or the author's standing waits on a profile
//! lookup. Such an event is *untaken*, and two promises follow from it:
//!
//! - the relay's watermark never moves past it, so a restart fetches it
//!   again (the watermark is where the next subscription starts);
//! - its relay link fetches it again (a re-subscription from where the
//!   filter reaches it: its date, or for a gift wrap two days later, see
//!   `relay_link::refetch_since`), so the running daemon takes it once the
//!   passing fault is over, unless it is waiting in memory for its lookup
//!   anyway. The intake publishes that reach to housekeeping, which keeps
//!   the seen entries it could replay.
//!
//! This type owns that bookkeeping per relay, and nothing else: it decides
//! neither what is transient nor when to give up.
//!
//! [`Parked`] holds the events that wait in memory for a lookup. It is
//! bounded in events and in bytes, overall and per author: an event past a
//! bound is not parked but left untaken with a request to fetch it again,
//! so a stranger's flood of large events costs the relay a re-read, never
//! the daemon its memory, and an event that would be heard is delayed, not
//! lost.

use std::collections::HashMap;

use nostr_sdk::prelude::{Event, EventId, PublicKey, RelayUrl, Tag, Timestamp};
use tokio::sync::watch;

use crate::telemetry::metrics;

/// Events waiting in memory for their author's profile lookup, at most.
const MAX_PARKED_EVENTS: usize = 1024;
/// Of them, from one author at most (one noisy author cannot fill it).
const MAX_PARKED_PER_AUTHOR: usize = 64;
/// One author may hold this share of the parked bytes (`--max-parked-bytes`),
/// as of the parked events: 1/16 of each.
const AUTHOR_SHARE_DIVISOR: usize = MAX_PARKED_EVENTS / MAX_PARKED_PER_AUTHOR;
/// The default of `--max-parked-bytes`: 16 MiB, room for the 1024 events at
/// 16 KiB each (a note is usually well under 1 KiB; relays commonly cap an
/// event at 64 to 512 KiB).
pub const DEFAULT_MAX_PARKED_BYTES: usize = 16 * 1024 * 1024;

/// A relay link's end: the date to fetch from again, when it should
/// (`None`: nothing is untaken). A new value is a new request.
pub(super) type RefetchFrom = watch::Receiver<Option<Timestamp>>;

/// Per relay, the untaken events by id with their dates, and the channel
/// that asks the link to fetch them again.
#[derive(Debug, Default)]
pub(super) struct Untaken {
    held: HashMap<RelayUrl, HashMap<EventId, Timestamp>>,
    refetch: HashMap<RelayUrl, watch::Sender<Option<Timestamp>>>,
}

impl Untaken {
    /// The receiver the link of `relay` watches.
    pub(super) fn link(&mut self, relay: RelayUrl) -> RefetchFrom {
        self.refetch
            .entry(relay)
            .or_insert_with(|| watch::Sender::new(None))
            .subscribe()
    }

    /// `event` came from `relay` and was not taken; a subscription from
    /// `refetch_from` delivers it again (its date, or for a gift wrap, see
    /// `relay_link::refetch_since`). With `fetch_again`, the link is asked
    /// to fetch it (and everything after it) once more; without, it waits
    /// in memory elsewhere.
    pub(super) fn hold(
        &mut self,
        relay: &RelayUrl,
        event: EventId,
        refetch_from: Timestamp,
        fetch_again: bool,
    ) {
        self.held
            .entry(relay.clone())
            .or_default()
            .insert(event, refetch_from);
        if fetch_again {
            let oldest = self.oldest(relay);
            if let Some(sender) = self.refetch.get(relay) {
                // Sent even when unchanged: every failure is a new request.
                sender.send_replace(oldest);
            }
        }
    }

    /// `event` was taken (from whichever relay): it holds nothing back.
    pub(super) fn release(&mut self, event: &EventId) {
        for (relay, held) in &mut self.held {
            if held.remove(event).is_some()
                && held.is_empty()
                && let Some(sender) = self.refetch.get(relay)
            {
                sender.send_if_modified(|from| from.take().is_some());
            }
        }
    }

    /// The date the watermark of `relay` may move to, given that the link
    /// has delivered everything up to `at`.
    pub(super) fn watermark(&self, relay: &RelayUrl, at: Timestamp) -> Timestamp {
        self.oldest(relay).map_or(at, |oldest| oldest.min(at))
    }

    /// Untaken events in all, for logs.
    pub(super) fn len(&self) -> usize {
        self.held.values().map(HashMap::len).sum()
    }

    /// Where the link of `relay` is to fetch from again, if anything is
    /// untaken there.
    pub(super) fn oldest(&self, relay: &RelayUrl) -> Option<Timestamp> {
        self.held.get(relay)?.values().min().copied()
    }
}

/// Events that wait in memory for their author's profile lookup, to be
/// screened again when it is done. Bounded in events and in bytes (as
/// [`held_bytes`] counts them), overall and per author: past a bound an
/// event is left to its relay to deliver again (see [`Untaken::hold`]).
#[derive(Debug)]
pub(super) struct Parked {
    by_author: HashMap<PublicKey, Waiting>,
    count: usize,
    bytes: usize,
    max_bytes: usize,
}

/// One author's parked events, in arrival order, and their bytes.
#[derive(Debug, Default)]
struct Waiting {
    events: Vec<(RelayUrl, Box<Event>)>,
    bytes: usize,
}

/// Whether an event was parked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Parking {
    /// Parked now, or already (delivered twice: kept once).
    Parked,
    /// No room by count, overall or for its author.
    Full,
    /// No room by bytes, overall or for its author.
    TooManyBytes,
}

impl Parking {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Parking::Parked => "parked",
            Parking::Full => "full",
            Parking::TooManyBytes => "too_many_bytes",
        }
    }
}

impl Parked {
    /// Parks at most `max_bytes` in all (`--max-parked-bytes`), and a
    /// sixteenth of it per author.
    pub(super) fn new(max_bytes: usize) -> Self {
        Parked {
            by_author: HashMap::new(),
            count: 0,
            bytes: 0,
            max_bytes,
        }
    }

    /// Keeps `event` until `author` is looked up, if there is room.
    pub(super) fn park(&mut self, author: PublicKey, relay: &RelayUrl, event: &Event) -> Parking {
        let size = held_bytes(event);
        let waiting = self.by_author.entry(author).or_default();
        if waiting.events.iter().any(|(_, parked)| parked.id == event.id) {
            return Parking::Parked;
        }
        let parking = if self.count >= MAX_PARKED_EVENTS || waiting.events.len() >= MAX_PARKED_PER_AUTHOR {
            Parking::Full
        } else if self.bytes + size > self.max_bytes
            || waiting.bytes + size > self.max_bytes / AUTHOR_SHARE_DIVISOR
        {
            Parking::TooManyBytes
        } else {
            waiting.events.push((relay.clone(), Box::new(event.clone())));
            waiting.bytes += size;
            self.count += 1;
            self.bytes += size;
            Parking::Parked
        };
        if waiting.events.is_empty() {
            self.by_author.remove(&author);
        }
        metrics::parked_events(self.count, self.bytes);
        parking
    }

    /// The events that waited for `author`, in arrival order.
    pub(super) fn unpark(&mut self, author: &PublicKey) -> Vec<(RelayUrl, Box<Event>)> {
        let waiting = self.by_author.remove(author).unwrap_or_default();
        self.count -= waiting.events.len();
        self.bytes -= waiting.bytes;
        metrics::parked_events(self.count, self.bytes);
        waiting.events
    }

    /// Events and bytes parked now, and of them `author`'s bytes (for logs).
    pub(super) fn held(&self, author: &PublicKey) -> (usize, usize, usize) {
        let author_bytes = self.by_author.get(author).map_or(0, |waiting| waiting.bytes);
        (self.count, self.bytes, author_bytes)
    }
}

/// The memory a parked event holds, as far as its sender decides it: its
/// content, its tag values twice (a tag the intake has read keeps a parsed
/// copy beside its strings), and the fixed size of the event and of each
/// tag and value. An estimate on the high side, cheap to compute.
pub(super) fn held_bytes(event: &Event) -> usize {
    let tags: usize = event
        .tags
        .iter()
        .map(|tag| {
            let values = tag.as_slice();
            size_of::<Tag>()
                + values
                    .iter()
                    .map(|value| size_of::<String>() + 2 * value.len())
                    .sum::<usize>()
        })
        .sum();
    size_of::<Event>() + event.content.len() + tags
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> EventId {
        EventId::from_slice(&[n; 32]).expect("32 bytes")
    }

    fn relay(port: u16) -> RelayUrl {
        RelayUrl::parse(&format!("ws://127.0.0.1:{port}")).expect("url")
    }

    #[test]
    fn an_untaken_event_holds_its_relays_watermark_until_taken() {
        let mut untaken = Untaken::default();
        let (a, b) = (relay(1), relay(2));
        untaken.hold(&a, id(1), Timestamp::from_secs(100), false);
        untaken.hold(&a, id(2), Timestamp::from_secs(90), false);
        assert_eq!(untaken.watermark(&a, Timestamp::from_secs(500)).as_secs(), 90);
        assert_eq!(untaken.watermark(&b, Timestamp::from_secs(500)).as_secs(), 500);
        untaken.release(&id(2));
        assert_eq!(untaken.watermark(&a, Timestamp::from_secs(500)).as_secs(), 100);
        untaken.release(&id(1));
        assert_eq!(untaken.watermark(&a, Timestamp::from_secs(500)).as_secs(), 500);
        assert_eq!(untaken.len(), 0);
    }

    fn note(keys: &nostr_sdk::prelude::Keys, text: &str) -> Event {
        nostr_sdk::prelude::EventBuilder::text_note(text)
            .sign_with_keys(keys)
            .expect("sign")
    }

    #[test]
    fn parking_is_bounded_per_author_and_keeps_a_redelivery_once() {
        let keys = nostr_sdk::prelude::Keys::generate();
        let a = relay(1);
        let mut parked = Parked::new(DEFAULT_MAX_PARKED_BYTES);
        let events: Vec<Event> = (0..=MAX_PARKED_PER_AUTHOR)
            .map(|n| note(&keys, &n.to_string()))
            .collect();
        for event in &events[..MAX_PARKED_PER_AUTHOR] {
            assert_eq!(parked.park(keys.public_key(), &a, event), Parking::Parked);
        }
        assert_eq!(
            parked.park(keys.public_key(), &a, &events[0]),
            Parking::Parked,
            "already parked"
        );
        assert_eq!(
            parked.park(keys.public_key(), &a, &events[MAX_PARKED_PER_AUTHOR]),
            Parking::Full
        );
        let back = parked.unpark(&keys.public_key());
        assert_eq!(back.len(), MAX_PARKED_PER_AUTHOR);
        assert_eq!(back[0].1.id, events[0].id);
        assert_eq!((parked.count, parked.bytes), (0, 0));
        assert!(parked.unpark(&keys.public_key()).is_empty());
    }

    #[test]
    fn parked_bytes_never_exceed_the_bound_overall_or_per_author() {
        use nostr_sdk::prelude::Keys;
        const MAX_BYTES: usize = 256 * 1024;
        const CONTENT_BYTES: usize = 5_000;
        let a = relay(1);
        let mut parked = Parked::new(MAX_BYTES);
        let authors: Vec<Keys> = (0..2 * AUTHOR_SHARE_DIVISOR).map(|_| Keys::generate()).collect();
        let (mut taken, mut left) = (0, 0);
        for keys in &authors {
            for n in 0..10 {
                let event = note(keys, &format!("{n:0>CONTENT_BYTES$}"));
                match parked.park(keys.public_key(), &a, &event) {
                    Parking::Parked => taken += 1,
                    Parking::TooManyBytes => left += 1,
                    Parking::Full => panic!("the count bounds are far off"),
                }
                let (_, bytes, author_bytes) = parked.held(&keys.public_key());
                assert!(bytes <= MAX_BYTES, "{bytes} bytes parked");
                assert!(author_bytes <= MAX_BYTES / AUTHOR_SHARE_DIVISOR);
            }
        }
        println!(
            "parked {taken} events, left {left} to the relay: {} of {MAX_BYTES} bytes",
            parked.bytes
        );
        assert!(taken > 0 && left > 0);
        assert!(
            parked.bytes > MAX_BYTES - 2 * (CONTENT_BYTES + 1024),
            "filled up to the bound"
        );
        let first = authors[0].public_key();
        let (_, before, author_bytes) = parked.held(&first);
        assert_eq!(parked.unpark(&first).len(), 3, "16 KiB of 5 KB events");
        assert_eq!(
            parked.bytes,
            before - author_bytes,
            "unparking gives the bytes back"
        );
    }

    #[test]
    fn held_bytes_count_the_content_and_the_tags() {
        let keys = nostr_sdk::prelude::Keys::generate();
        let small = note(&keys, "x");
        let large = note(&keys, &"x".repeat(10_001));
        assert_eq!(held_bytes(&large) - held_bytes(&small), 10_000);
        let tagged = nostr_sdk::prelude::EventBuilder::text_note("x")
            .tag(Tag::hashtag("y".repeat(500)))
            .sign_with_keys(&keys)
            .expect("sign");
        assert!(held_bytes(&tagged) >= held_bytes(&small) + 500);
    }

    #[tokio::test]
    async fn each_failure_asks_the_link_again_and_the_last_release_withdraws_it() {
        let mut untaken = Untaken::default();
        let a = relay(1);
        let mut link = untaken.link(a.clone());
        untaken.hold(&a, id(1), Timestamp::from_secs(100), true);
        link.changed().await.expect("asked");
        assert_eq!(*link.borrow_and_update(), Some(Timestamp::from_secs(100)));
        untaken.hold(&a, id(1), Timestamp::from_secs(100), true);
        assert!(link.has_changed().expect("open"), "the same date, asked again");
        link.borrow_and_update();
        untaken.hold(&a, id(3), Timestamp::from_secs(300), false);
        assert!(
            !link.has_changed().expect("open"),
            "waiting in memory asks nothing"
        );
        untaken.release(&id(1));
        assert!(!link.has_changed().expect("open"), "one is still untaken");
        untaken.release(&id(3));
        assert!(link.has_changed().expect("open"));
        assert_eq!(*link.borrow_and_update(), None);
    }
}
