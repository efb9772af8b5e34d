//! From screened events to journaled mentions, a batch at a time.
//!
//! The intake takes whatever the relay links have already queued, up to
//! [`INTAKE_BATCH`] arrivals, screens each in arrival order, and journals
//! the admitted ones in one transaction before any of them is acted on
//! (reaction, notice, hand-off to the heart). An idle daemon sees batches of
//! one and behaves as if there were no batching; a flood pays one commit
//! per batch instead of one per mention, which is most of the journal's
//! cost (BENCHMARKS.md). A watermark never moves past a mention that is not
//! journaled yet: a `CaughtUp` arrival commits the batch so far first, and
//! an untaken event (a failed journal write, a lookup under way) holds it
//! back until it is taken. A mention of another shard's conversation
//! (`--shard`) is journaled in the same transaction, finished at once: it
//! is a duplicate when offered again, and nothing else.

use acp_bridge_core::mention::{Intent, Mention};
use nostr_sdk::prelude::{Event, EventId, PublicKey, RelayUrl, Timestamp};

use super::relay_link::refetch_since;
use super::{Arrival, DropReason, Intake};
use crate::intake::inbound::Inbound;
use crate::outbound::reply::Reaction;
use crate::state::ledger::OtherShards;
use crate::telemetry::metrics;

/// Arrivals taken in one go at most. A batch's first mention waits for the
/// screening of the rest (a signature check each, ~30 µs), so a full batch
/// delays it by about a millisecond; smaller batches give back the commit
/// savings.
pub const INTAKE_BATCH: usize = 32;

/// An event that passed screening: a mention to act on, or one of a
/// conversation another shard answers, to be journaled as seen only.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "lives for one batch; boxing would cost an allocation per mention"
)]
pub(super) enum Screened {
    Ours(Mention),
    OtherShards(OtherShards),
}

/// An admitted mention and where its outcome goes in the batch's results.
pub(super) struct Pending {
    index: usize,
    relay: RelayUrl,
    /// Where a subscription must start to deliver the event again (see
    /// [`refetch_since`]), should it stay untaken.
    refetch_from: Timestamp,
    admitted: Screened,
}

impl Screened {
    fn event_id(&self) -> EventId {
        match self {
            Screened::Ours(mention) => mention.event_id,
            Screened::OtherShards(other) => other.event_id,
        }
    }

    fn author(&self) -> &PublicKey {
        match self {
            Screened::Ours(mention) => &mention.author,
            Screened::OtherShards(other) => &other.author,
        }
    }
}

impl Intake {
    /// Handles arrivals in order: subscriptions set floors, events are
    /// screened, admitted mentions are journaled together and then acted
    /// on, watermarks move. Returns the outcome of each event, in order.
    pub async fn take_in(
        &mut self,
        arrivals: impl IntoIterator<Item = Arrival>,
    ) -> Vec<Result<(), DropReason>> {
        let mut outcomes = Vec::new();
        let mut pending = Vec::new();
        for arrival in arrivals {
            match arrival {
                Arrival::Subscribed { relay, floor } => self.set_floor(relay, floor),
                Arrival::CaughtUp { relay, at } => {
                    self.release_held(&relay, &mut pending, &mut outcomes).await;
                    self.commit(&mut pending, &mut outcomes).await;
                    let watermark = self.untaken.watermark(&relay, at);
                    if let Err(error) = self.watermarks.advance(&relay, watermark) {
                        tracing::error!(%relay, %error, "cannot store the watermark");
                    }
                    self.screener.caught_up.insert(relay, at);
                }
                Arrival::AnsweredOnRelay { answered } => {
                    self.screener.before_start.answered_on_relay(answered)
                }
                Arrival::Event { relay, event } => {
                    // The moment a mention reaches the bridge (benchmarks
                    // measure steer latency from here).
                    tracing::trace!(target: "acp_bridge::arrival", event_id = %event.id, "event arrived");
                    metrics::event_received();
                    self.screener.heard(&relay, &event);
                    self.take_event(relay, &event, &mut pending, &mut outcomes).await;
                }
            }
        }
        self.commit(&mut pending, &mut outcomes).await;
        self.publish_floors();
        outcomes
    }

    /// Screens one event: admitted, it joins the batch to journal;
    /// otherwise its outcome is booked.
    pub(super) async fn take_event(
        &mut self,
        relay: RelayUrl,
        event: &Event,
        pending: &mut Vec<Pending>,
        outcomes: &mut Vec<Result<(), DropReason>>,
    ) {
        let outcome = match self.screen(&relay, event).await {
            Ok(admitted) => {
                pending.push(Pending {
                    index: outcomes.len(),
                    relay,
                    refetch_from: refetch_since(event),
                    admitted,
                });
                Ok(())
            }
            Err(reason) => {
                self.settle_untaken(&relay, event, reason);
                Err(reason)
            }
        };
        outcomes.push(outcome);
    }

    /// Journals the pending mentions in one transaction, then acts on each
    /// that was new. One already journaled (another relay, a replay, twice
    /// in this batch) is a duplicate.
    pub(super) async fn commit(
        &mut self,
        pending: &mut Vec<Pending>,
        outcomes: &mut [Result<(), DropReason>],
    ) {
        if pending.is_empty() {
            return;
        }
        let fresh = self.journal(pending);
        for (entry, fresh) in pending.drain(..).zip(fresh) {
            let (relay, event_id) = (&entry.relay, entry.admitted.event_id());
            match (fresh, entry.admitted) {
                (Ok(()), Screened::Ours(mention)) => {
                    self.untaken.release(&event_id);
                    if let Some(root) = mention.thread.root_event() {
                        self.loop_guard.taken_in_thread(root, mention.chain_depth);
                    }
                    self.act(mention).await;
                }
                (Ok(()), Screened::OtherShards(other)) => {
                    self.book_untaken(relay, event_id, entry.refetch_from, DropReason::OtherShard);
                    self.dropped(relay, event_id, &other.author, DropReason::OtherShard);
                    outcomes[entry.index] = Err(DropReason::OtherShard);
                }
                (Err(reason), admitted) => {
                    self.book_untaken(relay, event_id, entry.refetch_from, reason);
                    self.dropped(relay, event_id, admitted.author(), reason);
                    outcomes[entry.index] = Err(reason);
                }
            }
        }
    }

    /// Books an event that was not admitted: refused on its merits, it
    /// holds nothing back; untaken, it holds its relay's watermark and,
    /// unless it waits in memory for a lookup, is fetched again.
    fn settle_untaken(&mut self, relay: &RelayUrl, event: &Event, reason: DropReason) {
        self.book_untaken(relay, event.id, refetch_since(event), reason);
        self.dropped(relay, event.id, &event.pubkey, reason);
    }

    fn book_untaken(
        &mut self,
        relay: &RelayUrl,
        event_id: EventId,
        refetch_from: Timestamp,
        reason: DropReason,
    ) {
        if !reason.is_passing() {
            self.untaken.release(&event_id);
            return;
        }
        // Waiting in memory (for a lookup, for the relay's stored events):
        // screened again from there, not fetched.
        let fetch_again = !matches!(reason, DropReason::AwaitingProfile | DropReason::AwaitingCatchUp);
        self.untaken.hold(relay, event_id, refetch_from, fetch_again);
        // A failed journal write is the operator's business; waiting for a
        // lookup is routine, and a stranger's flood must not flood the log.
        let untaken = self.untaken.len();
        if reason == DropReason::NotJournaled {
            tracing::info!(%relay, %event_id, reason = reason.as_str(), untaken, fetch_again, "event not taken yet");
        } else {
            tracing::debug!(%relay, %event_id, reason = reason.as_str(), untaken, fetch_again, "event not taken yet");
        }
    }

    /// One outcome per pending mention. Without the journal nothing could
    /// be promised: a failed write leaves the batch untaken, and the relay
    /// offers the events again when the link fetches them anew.
    fn journal(&self, pending: &[Pending]) -> Vec<Result<(), DropReason>> {
        let mut ours: Vec<&Mention> = Vec::new();
        let mut others: Vec<&OtherShards> = Vec::new();
        for entry in pending {
            match &entry.admitted {
                Screened::Ours(mention) => ours.push(mention),
                Screened::OtherShards(other) => others.push(other),
            }
        }
        match self.ledger.take_in(&ours, &others) {
            Ok((ours, others)) => {
                let (mut ours, mut others) = (ours.into_iter(), others.into_iter());
                pending
                    .iter()
                    .map(|entry| match entry.admitted {
                        Screened::Ours(_) => ours.next(),
                        Screened::OtherShards(_) => others.next(),
                    })
                    .map(|fresh| match fresh {
                        Some(true) => Ok(()),
                        _ => Err(DropReason::Duplicate),
                    })
                    .collect()
            }
            Err(error) => {
                tracing::error!(mentions = pending.len(), %error, "cannot journal mentions; they will be fetched again");
                vec![Err(DropReason::NotJournaled); pending.len()]
            }
        }
    }

    async fn act(&self, mention: Mention) {
        match mention.intent.clone() {
            Intent::Turn => {
                metrics::event_accepted();
                tracing::info!(
                    conversation = %mention.conversation, event_id = %mention.event_id, author = %mention.author_short(),
                    "mention accepted"
                );
                self.replier.react(&mention, Reaction::Heard);
                self.hand_on(Inbound::Mention(mention)).await;
            }
            Intent::Command(command) => self.hand_on(Inbound::Command { mention, command }).await,
            // The intake never makes answers or task results: the heart does.
            Intent::Answer | Intent::TaskResult { .. } | Intent::Task { .. } | Intent::Scheduled { .. } => {
                self.hand_on(Inbound::Mention(mention)).await
            }
            Intent::Notice(text) => {
                if let Err(error) = self.replier.notify(std::slice::from_ref(&mention), &text).await {
                    tracing::error!(event_id = %mention.event_id, %error, "cannot store a notice");
                }
            }
        }
    }

    async fn hand_on(&self, inbound: Inbound) {
        if self.inbound.send(inbound).await.is_err() {
            // Shutting down: the mention is journaled and resumes at next start.
            tracing::debug!("heart gone; mention stays in the journal");
        }
    }

    /// Counts and logs (at debug) an event that was not taken; one
    /// answered before this start also at info, and a mention the gate
    /// refused at info once per author a while (`unheard_log`): each
    /// explains a silence.
    fn dropped(&mut self, relay: &RelayUrl, event_id: EventId, author: &PublicKey, reason: DropReason) {
        metrics::event_dropped(reason.as_str());
        tracing::debug!(%relay, %event_id, %author, reason = reason.as_str(), "event dropped");
        match reason {
            DropReason::AnsweredBeforeStart => {
                tracing::info!(%relay, %event_id, "already answered before this start")
            }
            DropReason::Gate(refusal) => {
                let respond_to = self.gate.respond_to();
                self.unheard
                    .refused(std::time::Instant::now(), relay, author, refusal, respond_to)
            }
            _ => {}
        }
    }
}
