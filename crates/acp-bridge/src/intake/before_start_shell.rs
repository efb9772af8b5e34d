//! The intake's side of `before_start`: what it does with events from
//! before this start once a relay can tell whether the bot answered them.
//! A relay that delivered its stored events releases the DMs held for it
//! and has its held public events looked up; a finished lookup journals
//! what the bot replied to; the bot's own DM copies journal the DMs they
//! answered.

use nostr_sdk::prelude::{Event, EventId, Kind, RelayUrl, Timestamp, UnsignedEvent};

use super::admission::Pending;
use super::reply_lookup::Looked;
use super::{DropReason, Intake, own_replies};

impl Intake {
    /// `relay` delivered its stored events: the DMs held for it are
    /// screened again (the bot's copies of its answers are through), the
    /// public events held are looked up in one query (see `reply_lookup`).
    pub(super) async fn release_held(
        &mut self,
        relay: &RelayUrl,
        pending: &mut Vec<Pending>,
        outcomes: &mut Vec<Result<(), DropReason>>,
    ) {
        let (dms, public): (Vec<Event>, Vec<Event>) = self
            .screener
            .before_start
            .caught_up(relay)
            .into_iter()
            .partition(|event| event.kind == Kind::GiftWrap);
        let unchecked = match (&self.reply_lookup, public.is_empty()) {
            (Some(lookup), false) => {
                lookup.start(relay.clone(), public);
                Vec::new()
            }
            _ => public,
        };
        for held in dms.iter().chain(&unchecked) {
            self.take_event(relay.clone(), held, pending, outcomes).await;
        }
    }

    /// A finished reply lookup: what the bot replied to is journaled as
    /// answered before this start; then the events are screened again,
    /// those dropped as such and the rest taken. A relay that could not
    /// tell leaves them to be answered.
    pub(super) async fn take_looked(&mut self, looked: Looked) {
        let Looked {
            relay,
            events,
            answered,
        } = looked;
        match answered.map(|answered| self.ledger.taken_elsewhere(&answered)) {
            Ok(Ok(new)) => self.screener.before_start.answered_on_relay(new),
            Ok(Err(error)) => {
                tracing::warn!(%relay, %error, "cannot journal what the bot answered before this start; answering it again");
            }
            Err(error) => {
                tracing::warn!(%relay, events = events.len(), %error, "cannot ask the relay which events from before this start the bot answered; answering them");
            }
        }
        let (mut pending, mut outcomes) = (Vec::new(), Vec::new());
        self.screener.replaying_held = true;
        for event in &events {
            self.take_event(relay.clone(), event, &mut pending, &mut outcomes)
                .await;
        }
        self.screener.replaying_held = false;
        self.commit(&mut pending, &mut outcomes).await;
        self.publish_floors();
    }

    /// The bot's copy of a DM it sent before this start (NIP-17): the
    /// message its rumor replies to was answered, by this bot key if not by
    /// this daemon. Journaled as seen by its rumor id, which is how a DM's
    /// answer names it (see `before_start`). Only a copy dated within the
    /// subscription's window: an answer is never older than the DM it
    /// answers, and a DM older than the window is refused anyway (the DM
    /// filter reaches two days further back, for the wraps' dates).
    pub(super) fn learn_own_answer(&self, relay: &RelayUrl, rumor: &UnsignedEvent) {
        let in_window = self
            .screener
            .check_time_window(relay, rumor.created_at, Timestamp::now())
            .is_ok();
        if !in_window || !self.screener.before_start.predates_start(rumor.created_at) {
            return;
        }
        let answered: Vec<EventId> = own_replies::answered_mentions(&rumor.tags)
            .filter(|answered| !self.ledger.seen(&answered.to_hex()))
            .collect();
        if answered.is_empty() {
            return;
        }
        if let Err(error) = self.ledger.taken_elsewhere(&answered) {
            tracing::warn!(%error, messages = ?answered, "cannot journal a DM the bot answered before this start");
        }
    }
}
