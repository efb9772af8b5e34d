//! The intake's task: takes the relay links' arrivals in batches, and
//! between them the finished profile and reply lookups; keeps each relay's
//! subscription floor and publishes it to housekeeping as it changes.

use nostr_sdk::prelude::{RelayUrl, Timestamp};
use tokio::sync::mpsc;

use super::admission::INTAKE_BATCH;
use super::reply_lookup::{self, ReplyLookup};
use super::{Arrival, Intake};

impl Intake {
    /// A (re)subscription from `floor`: older events are refused from now
    /// on, and the stored events come first (not live yet).
    pub(super) fn set_floor(&mut self, relay: RelayUrl, floor: Timestamp) {
        self.screener.caught_up.remove(&relay);
        self.screener.before_start.subscribed(relay.clone());
        self.screener.floors.insert(relay, floor);
        self.publish_floors();
    }

    /// Publishes each relay's floor, lowered to its oldest untaken event's
    /// reach-back, when either changed.
    pub(super) fn publish_floors(&self) {
        self.floors_published.send_if_modified(|published| {
            let mut changed = false;
            for (relay, floor) in &self.screener.floors {
                let reach = self
                    .untaken
                    .oldest(relay)
                    .map_or(*floor, |oldest| oldest.min(*floor));
                changed |= published.insert(relay.clone(), reach) != Some(reach);
            }
            changed
        });
    }

    /// Runs until every relay link is gone (the arrivals channel closes).
    /// Finished profile lookups are taken between batches: the events that
    /// waited for them are screened again.
    pub async fn run(mut self, mut arrivals: mpsc::Receiver<Arrival>) {
        let mut batch = Vec::with_capacity(INTAKE_BATCH);
        loop {
            tokio::select! {
                received = arrivals.recv_many(&mut batch, INTAKE_BATCH) => {
                    if received == 0 {
                        return;
                    }
                    self.take_in(batch.drain(..)).await;
                }
                author = self.gate.looked_up() => {
                    let waiting = self.screener.parked.unpark(&author);
                    self.take_in(waiting.into_iter().map(|(relay, event)| Arrival::Event { relay, event })).await;
                }
                looked = next_lookup(&mut self.reply_lookup) => self.take_looked(looked).await,
            }
        }
    }
}

/// The next finished reply lookup, if the intake makes them.
async fn next_lookup(lookup: &mut Option<ReplyLookup>) -> reply_lookup::Looked {
    match lookup {
        Some(lookup) => lookup.finished().await,
        None => std::future::pending().await,
    }
}
