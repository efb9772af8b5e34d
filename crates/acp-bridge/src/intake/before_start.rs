//! What this bot answered before this daemon started, as the relays show it.
//!
//! The store is one daemon's record of what it handled; a new state dir
//! (a replaced volume, a wiped directory, an operator's second try) or a
//! shard that never saw a conversation has none. Its subscriptions still
//! reach back (the catch-up window, see `relay_link`), and without this
//! every mention, DM and owner command in that window would be answered or
//! run a second time. The relays hold the truth: the bot's own replies,
//! each tagging what it answered.
//!
//! - Public mentions and commands: the relay link reads the bot's newest
//!   public replies once, before it subscribes (`own_replies`); the
//!   mentions they answer come here as [`Arrival::AnsweredOnRelay`]
//!   (and are journaled as seen). When the relay then offers one, it is
//!   dropped as answered before this start. One from before this start
//!   that those replies do not cover (a busy bot replied more often since)
//!   is held until its relay's end of stored events, and the held ones are
//!   then looked up by id in one query (`reply_lookup`).
//! - DMs: the bot's answers are gift-wrapped, so a relay cannot be asked
//!   for them by tag. But every DM answer is also wrapped to the bot itself
//!   (NIP-17), and the DM subscription delivers those copies with the DMs.
//!   A copy from before this start journals the rumor it replies to as
//!   answered; a DM from before this start that comes while its relay is
//!   still delivering stored events is held here until that relay's end of
//!   stored events (its copies are through by then), then screened again.
//!
//! Nothing live waits: only events dated before this start are held, and
//! only until their relay's stored events are through (and a public one's
//! lookup, at most `REPLY_LOOKUP_TIMEOUT`). When the relays cannot tell
//! (the read or the lookup fails or times out, more events wait than
//! [`MAX_HELD_EVENTS`], no end of stored events comes before the link's
//! periodic catch-up), the event is answered as before: a rare second
//! answer is better than a lost one.
//!
//! [`Arrival::AnsweredOnRelay`]: super::Arrival::AnsweredOnRelay

use std::collections::HashSet;

use nostr_sdk::prelude::{Event, EventId, RelayUrl, Timestamp};

/// Events from before this start held for their relay's end of stored
/// events at most; past it, one is screened at once (and answered, unless
/// the bot's reply to it was seen first).
pub(super) const MAX_HELD_EVENTS: usize = 256;

/// What the intake knows of the bot's answers from before this start.
#[derive(Debug)]
pub(super) struct BeforeStart {
    started_at: Timestamp,
    /// Public mentions the bot's replies on a relay answer, not offered yet.
    answered: HashSet<EventId>,
    /// Relays delivering their stored events (from a subscription to its
    /// end of stored events).
    catching_up: HashSet<RelayUrl>,
    /// Events from before this start, waiting for their relay's end of
    /// stored events.
    held: Vec<(RelayUrl, Event)>,
}

impl BeforeStart {
    pub(super) fn new(started_at: Timestamp) -> Self {
        BeforeStart {
            started_at,
            answered: HashSet::new(),
            catching_up: HashSet::new(),
            held: Vec::new(),
        }
    }

    /// Whether an event dated `created_at` was sent before this start.
    pub(super) fn predates_start(&self, created_at: Timestamp) -> bool {
        created_at < self.started_at
    }

    /// A (re)subscription on `relay`: its stored events come first.
    pub(super) fn subscribed(&mut self, relay: RelayUrl) {
        self.catching_up.insert(relay);
    }

    /// `relay` delivered its stored events: the events held for it, to be
    /// screened again (public ones after their lookup).
    pub(super) fn caught_up(&mut self, relay: &RelayUrl) -> Vec<Event> {
        self.catching_up.remove(relay);
        let (released, kept) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(held_for, _)| held_for == relay);
        self.held = kept;
        released.into_iter().map(|(_, event)| event).collect()
    }

    /// The bot's replies on a relay answer `mentions`.
    pub(super) fn answered_on_relay(&mut self, mentions: impl IntoIterator<Item = EventId>) {
        self.answered.extend(mentions);
    }

    /// Whether `event_id`, seen already, was seen as answered on a relay
    /// (and not yet reported so).
    pub(super) fn take_answered(&mut self, event_id: &EventId) -> bool {
        self.answered.remove(event_id)
    }

    /// Holds an event dated `created_at` from `relay` until that relay's end
    /// of stored events, when it predates this start and the relay is still
    /// delivering stored events, and there is room: true when held.
    pub(super) fn hold(&mut self, relay: &RelayUrl, created_at: Timestamp, event: &Event) -> bool {
        if !self.predates_start(created_at) || !self.catching_up.contains(relay) {
            return false;
        }
        if self.held.len() >= MAX_HELD_EVENTS {
            tracing::warn!(%relay, event_id = %event.id, max_held = MAX_HELD_EVENTS, "too many events from before this start wait for the relay's stored events; screening this one without checking for the bot's reply");
            return false;
        }
        self.held.push((relay.clone(), event.clone()));
        true
    }
}

#[cfg(test)]
mod tests {
    use nostr_sdk::prelude::{EventBuilder, Keys, Kind};

    use super::*;

    #[test]
    fn only_a_dm_from_before_the_start_is_held_and_only_while_its_relay_catches_up() {
        let started_at = Timestamp::from_secs(1_000);
        let mut before = BeforeStart::new(started_at);
        let (relay, other) = (
            RelayUrl::parse("ws://127.0.0.1:1").expect("url"),
            RelayUrl::parse("ws://127.0.0.1:2").expect("url"),
        );
        let event = EventBuilder::new(Kind::GiftWrap, "")
            .sign_with_keys(&Keys::generate())
            .expect("sign");
        let (old, new) = (Timestamp::from_secs(999), Timestamp::from_secs(1_000));

        assert!(!before.hold(&relay, old, &event), "not subscribed yet: live");
        before.subscribed(relay.clone());
        before.subscribed(other.clone());
        assert!(!before.hold(&relay, new, &event), "sent after the start");
        assert!(before.hold(&relay, old, &event));
        assert!(before.hold(&other, old, &event));

        assert_eq!(before.caught_up(&relay).len(), 1, "only its own relay's");
        assert!(!before.hold(&relay, old, &event), "caught up: live");
        assert_eq!(before.caught_up(&other).len(), 1);
    }
}
