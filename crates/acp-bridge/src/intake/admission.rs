//! From screened events to journaled mentions, a batch at a time.
//!
//! The intake takes whatever the relay links have already queued, up to
//! [`INTAKE_BATCH`] arrivals, screens each in arrival order, and journals
//! the admitted ones in one transaction before any of them is acted on
//! (reaction, notice, hand-off to the heart). An idle daemon sees batches of
//! one and behaves as if there were no batching; a flood pays one commit
//! per batch instead of one per mention, which is most of the journal's
//! cost (BENCHMARKS.md). A watermark never moves past a mention that is not
//! journaled yet: a `CaughtUp` arrival commits the batch so far first.

use nostr_sdk::prelude::{EventId, PublicKey, RelayUrl};

use super::{Arrival, DropReason, Inbound, Intake};
use crate::commands::OwnerCommand;
use crate::mention::Mention;
use crate::store::sql_seconds;
use crate::telemetry::metrics;

/// Arrivals taken in one go at most. A batch's first mention waits for the
/// screening of the rest (a signature check each, ~30 µs), so a full batch
/// delays it by about a millisecond; smaller batches give back the commit
/// savings.
pub const INTAKE_BATCH: usize = 32;

/// A mention that passed every check and waits for the journal.
#[derive(Debug)]
pub(super) struct Admitted {
    pub(super) mention: Mention,
    pub(super) next: NextStep,
}

/// What an admitted mention does once it is journaled.
#[derive(Debug)]
pub(super) enum NextStep {
    /// A turn: react, and hand it to the heart.
    Turn,
    /// An owner command for the heart.
    Command(OwnerCommand),
    /// A notice instead of a turn (too long, rate-limited).
    Notice(String),
}

/// An admitted mention and where its outcome goes in the batch's results.
struct Pending {
    index: usize,
    relay: RelayUrl,
    admitted: Admitted,
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
                    self.commit(&mut pending, &mut outcomes).await;
                    if let Err(error) = self
                        .store
                        .advance_watermark(relay.as_str(), sql_seconds(at.as_secs()))
                    {
                        tracing::error!(%relay, %error, "cannot store the watermark");
                    }
                }
                Arrival::Event { relay, event } => {
                    // The moment a mention reaches the bridge (benchmarks
                    // measure steer latency from here).
                    tracing::trace!(target: "acp_bridge::arrival", event_id = %event.id, "event arrived");
                    metrics::event_received();
                    let outcome = match self.screen(&relay, &event).await {
                        Ok(admitted) => {
                            pending.push(Pending {
                                index: outcomes.len(),
                                relay,
                                admitted,
                            });
                            Ok(())
                        }
                        Err(reason) => {
                            dropped(&relay, event.id, &event.pubkey, reason);
                            Err(reason)
                        }
                    };
                    outcomes.push(outcome);
                }
            }
        }
        self.commit(&mut pending, &mut outcomes).await;
        outcomes
    }

    /// Journals the pending mentions in one transaction, then acts on each
    /// that was new. One already journaled (another relay, a replay, twice
    /// in this batch) is a duplicate.
    async fn commit(&mut self, pending: &mut Vec<Pending>, outcomes: &mut [Result<(), DropReason>]) {
        if pending.is_empty() {
            return;
        }
        let fresh = self.journal(pending);
        for (entry, fresh) in pending.drain(..).zip(fresh) {
            match fresh {
                Ok(()) => self.act(entry.admitted).await,
                Err(reason) => {
                    let mention = &entry.admitted.mention;
                    dropped(&entry.relay, mention.event_id, &mention.author, reason);
                    outcomes[entry.index] = Err(reason);
                }
            }
        }
    }

    /// One outcome per pending mention. Without the journal nothing could
    /// be promised: a failed write refuses the batch, and the relay offers
    /// the events again after a resubscribe.
    fn journal(&self, pending: &[Pending]) -> Vec<Result<(), DropReason>> {
        let mentions: Vec<&Mention> = pending.iter().map(|entry| &entry.admitted.mention).collect();
        match self.ledger.accept(&mentions) {
            Ok(fresh) => fresh
                .into_iter()
                .map(|fresh| if fresh { Ok(()) } else { Err(DropReason::Duplicate) })
                .collect(),
            Err(error) => {
                tracing::error!(mentions = pending.len(), %error, "cannot journal mentions");
                vec![Err(DropReason::Malformed); pending.len()]
            }
        }
    }

    async fn act(&self, admitted: Admitted) {
        let Admitted { mention, next } = admitted;
        match next {
            NextStep::Turn => {
                metrics::event_accepted();
                tracing::info!(
                    conversation = %mention.conversation, event_id = %mention.event_id, author = %mention.author_short(),
                    "mention accepted"
                );
                self.replier.react(&mention);
                self.hand_on(Inbound::Mention(mention)).await;
            }
            NextStep::Command(command) => self.hand_on(Inbound::Command { mention, command }).await,
            NextStep::Notice(text) => {
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
}

/// Counts and logs (at debug) an event that was not taken.
fn dropped(relay: &RelayUrl, event_id: EventId, author: &PublicKey, reason: DropReason) {
    metrics::event_dropped(reason.as_str());
    tracing::debug!(%relay, %event_id, %author, reason = reason.as_str(), "event dropped");
}
