//! Events the intake could not take yet, and what they hold back.
//!
//! An event is *taken* once it is journaled or refused on its merits (not
//! heard, a duplicate, too old…). Some events can be neither for a while:
//! the journal write failed, or the author's standing waits on a profile
//! lookup. Such an event is *untaken*, and two promises follow from it:
//!
//! - the relay's watermark never moves past it, so a restart fetches it
//!   again (the watermark is where the next subscription starts);
//! - its relay link fetches it again (a re-subscription from its date), so
//!   the running daemon takes it once the passing fault is over, unless it
//!   is waiting in memory for its lookup anyway.
//!
//! This type owns that bookkeeping per relay, and nothing else: it decides
//! neither what is transient nor when to give up.

use std::collections::HashMap;

use nostr_sdk::prelude::{Event, EventId, PublicKey, RelayUrl, Timestamp};
use tokio::sync::watch;

/// Events waiting in memory for their author's profile lookup, at most.
const MAX_PARKED_EVENTS: usize = 1024;
/// Of them, from one author at most (one noisy author cannot fill it).
const MAX_PARKED_PER_AUTHOR: usize = 64;

/// A relay link's end: the date to fetch from again, when it should
/// (`None`: nothing is untaken). A new value is a new request.
pub type RefetchFrom = watch::Receiver<Option<Timestamp>>;

/// Per relay, the untaken events by id with their dates, and the channel
/// that asks the link to fetch them again.
#[derive(Debug, Default)]
pub struct Untaken {
    held: HashMap<RelayUrl, HashMap<EventId, Timestamp>>,
    refetch: HashMap<RelayUrl, watch::Sender<Option<Timestamp>>>,
}

impl Untaken {
    /// The receiver the link of `relay` watches.
    pub fn link(&mut self, relay: RelayUrl) -> RefetchFrom {
        self.refetch
            .entry(relay)
            .or_insert_with(|| watch::Sender::new(None))
            .subscribe()
    }

    /// `event` (dated `created_at`) came from `relay` and was not taken.
    /// With `fetch_again`, the link is asked to fetch it (and everything
    /// after it) once more; without, it waits in memory elsewhere.
    pub fn hold(&mut self, relay: &RelayUrl, event: EventId, created_at: Timestamp, fetch_again: bool) {
        self.held
            .entry(relay.clone())
            .or_default()
            .insert(event, created_at);
        if fetch_again {
            let oldest = self.oldest(relay);
            if let Some(sender) = self.refetch.get(relay) {
                // Sent even when unchanged: every failure is a new request.
                sender.send_replace(oldest);
            }
        }
    }

    /// `event` was taken (from whichever relay): it holds nothing back.
    pub fn release(&mut self, event: &EventId) {
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
    pub fn watermark(&self, relay: &RelayUrl, at: Timestamp) -> Timestamp {
        self.oldest(relay).map_or(at, |oldest| oldest.min(at))
    }

    /// Untaken events in all, for logs.
    pub fn len(&self) -> usize {
        self.held.values().map(HashMap::len).sum()
    }

    fn oldest(&self, relay: &RelayUrl) -> Option<Timestamp> {
        self.held.get(relay)?.values().min().copied()
    }
}

/// Events that wait in memory for their author's profile lookup, to be
/// screened again when it is done. Bounded: past the bounds an event is
/// left to its relay to deliver again (see [`Untaken::hold`]).
#[derive(Debug, Default)]
pub struct Parked {
    by_author: HashMap<PublicKey, Vec<(RelayUrl, Box<Event>)>>,
    count: usize,
}

impl Parked {
    /// Keeps `event` until `author` is looked up. False when there is no
    /// room. An event parked already (delivered twice) is kept once.
    pub fn park(&mut self, author: PublicKey, relay: &RelayUrl, event: &Event) -> bool {
        let waiting = self.by_author.entry(author).or_default();
        if waiting.iter().any(|(_, parked)| parked.id == event.id) {
            return true;
        }
        if self.count >= MAX_PARKED_EVENTS || waiting.len() >= MAX_PARKED_PER_AUTHOR {
            if waiting.is_empty() {
                self.by_author.remove(&author);
            }
            return false;
        }
        waiting.push((relay.clone(), Box::new(event.clone())));
        self.count += 1;
        true
    }

    /// The events that waited for `author`, in arrival order.
    pub fn unpark(&mut self, author: &PublicKey) -> Vec<(RelayUrl, Box<Event>)> {
        let waiting = self.by_author.remove(author).unwrap_or_default();
        self.count -= waiting.len();
        waiting
    }
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

    #[test]
    fn parking_is_bounded_per_author_and_keeps_a_redelivery_once() {
        use nostr_sdk::prelude::{EventBuilder, Keys};
        let keys = Keys::generate();
        let a = relay(1);
        let mut parked = Parked::default();
        let events: Vec<Event> = (0..=MAX_PARKED_PER_AUTHOR)
            .map(|n| {
                EventBuilder::text_note(n.to_string())
                    .sign_with_keys(&keys)
                    .expect("sign")
            })
            .collect();
        for event in &events[..MAX_PARKED_PER_AUTHOR] {
            assert!(parked.park(keys.public_key(), &a, event));
        }
        assert!(parked.park(keys.public_key(), &a, &events[0]), "already parked");
        assert!(!parked.park(keys.public_key(), &a, &events[MAX_PARKED_PER_AUTHOR]));
        let back = parked.unpark(&keys.public_key());
        assert_eq!(back.len(), MAX_PARKED_PER_AUTHOR);
        assert_eq!(back[0].1.id, events[0].id);
        assert_eq!(parked.count, 0);
        assert!(parked.unpark(&keys.public_key()).is_empty());
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
