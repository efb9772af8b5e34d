//! Publishes the outbox: every stored, signed reply goes to the relays until
//! one of them accepts it (`OK true`), and only then is it marked sent.
//!
//! An unsent entry is retried with backoff; after a restart the same signed
//! event (same id) is published again, so relays deduplicate it and a reply
//! is never posted twice. Publishing is idempotent by construction; the
//! publisher can therefore run at any time, and runs once more at shutdown
//! to flush what is left.

use std::sync::Arc;
use std::time::Duration;

use nostr_sdk::prelude::{Client, Event, JsonUtil};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::store::{Store, sql_now};

/// Re-check the outbox this often even without a wake-up (a relay that
/// came back, an entry that failed before).
const OUTBOX_POLL_INTERVAL: Duration = Duration::from_secs(5);
const RETRY_BACKOFF_MIN: Duration = Duration::from_millis(500);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct Publisher {
    client: Client,
    store: Arc<Store>,
    wake: Arc<Notify>,
}

impl Publisher {
    pub fn new(client: Client, store: Arc<Store>, wake: Arc<Notify>) -> Self {
        Publisher { client, store, wake }
    }

    /// Runs until `stop` is cancelled.
    pub async fn run(&self, stop: CancellationToken) {
        let mut backoff = Backoff::new(RETRY_BACKOFF_MIN, RETRY_BACKOFF_MAX);
        loop {
            let pause = if self.flush().await {
                backoff.reset();
                OUTBOX_POLL_INTERVAL
            } else {
                backoff.next_delay()
            };
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Publishes every unsent entry once. Returns true when none is left.
    pub async fn flush(&self) -> bool {
        let entries = match self.store.outbox_unsent() {
            Ok(entries) => entries,
            Err(error) => {
                tracing::error!(%error, "cannot read the outbox");
                return false;
            }
        };
        let mut all_sent = true;
        for entry in entries {
            let event = match Event::from_json(&entry.json) {
                Ok(event) => event,
                Err(error) => {
                    // Cannot happen for what we stored; never retry it forever.
                    tracing::error!(event_id = %entry.event_id, %error, "outbox entry is not an event; dropping it");
                    self.mark_sent(&entry.event_id);
                    continue;
                }
            };
            match self.client.send_event(&event).await {
                Ok(output) if !output.success.is_empty() => {
                    tracing::debug!(event_id = %entry.event_id, relays = output.success.len(), "published");
                    self.mark_sent(&entry.event_id);
                }
                Ok(output) => {
                    all_sent = false;
                    let reasons: Vec<String> = output.failed.values().cloned().collect();
                    tracing::warn!(event_id = %entry.event_id, ?reasons, "no relay accepted a reply; will retry");
                }
                Err(error) => {
                    all_sent = false;
                    tracing::warn!(event_id = %entry.event_id, %error, "publishing a reply failed; will retry");
                }
            }
        }
        all_sent
    }

    fn mark_sent(&self, event_id: &str) {
        if let Err(error) = self.store.outbox_mark_sent(event_id, sql_now()) {
            tracing::error!(%event_id, %error, "cannot mark a reply sent (it may be published again, same id)");
        }
    }
}
