//! A one-shot read through the tap: a REQ sent on the SDK's connection,
//! its events collected off the wire until `EOSE`, then a CLOSE.
//!
//! For the reads on a turn's path (the thread context before each first
//! prompt, the agent's `read_thread`): through the SDK's `fetch_events`
//! each returned event was read into a `Value` tree, checked in the SDK's
//! database and announced, and in a busy group a read returns dozens of
//! events the daemon has seen (BENCHMARKS §8). Here they are read in place,
//! the bot's own dropped unread, and none verified: the caller verifies what
//! it keeps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nostr_sdk::prelude::{ClientMessage, Event, Filter, PublicKey, Relay, SubscriptionId};

use super::{Received, RelayTaps, RouteSpec, Subscriptions, Tapped};

/// One-shot reads' subscription ids: this and a number, unique per daemon.
const READ_SUBSCRIPTION_PREFIX: &str = "acp-bridge-read-";
/// Room for a filter without a limit (the thread reads always set one).
const EVENTS_WITHOUT_A_LIMIT: usize = 500;

static READS: AtomicU64 = AtomicU64::new(0);

/// A one-shot read that returned nothing usable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error("the relay did not finish in {0:?}")]
    Timeout(Duration),
    #[error("the relay refused the read: {0}")]
    Closed(String),
    #[error("the relay returned more events than asked for")]
    TooMany,
    #[error("cannot send to the relay: {0}")]
    Send(String),
}

/// Reads what `relay` holds for `filters`, up to its `EOSE`, within
/// `timeout`; `drop_authored_by`'s events are left out unread.
pub(crate) async fn fetch_once(
    taps: &RelayTaps,
    relay: &Relay,
    filters: Vec<Filter>,
    timeout: Duration,
    drop_authored_by: Option<PublicKey>,
) -> Result<Vec<Event>, FetchError> {
    let id = format!(
        "{READ_SUBSCRIPTION_PREFIX}{}",
        READS.fetch_add(1, Ordering::Relaxed)
    );
    let capacity = filters
        .iter()
        .map(|filter| filter.limit.unwrap_or(EVENTS_WITHOUT_A_LIMIT))
        .sum::<usize>()
        // The EOSE, or a CLOSED.
        + 1;
    let (mut frames, _route) = taps.route(
        relay.url(),
        RouteSpec {
            subscriptions: vec![Subscriptions::Exactly(id.clone())],
            capacity,
            drop_authored_by,
            sdk_registered: false,
            intake: false,
        },
    );
    let subscription = SubscriptionId::new(id);
    relay
        .send_msg(ClientMessage::req(subscription.clone(), filters))
        .map_err(|error| FetchError::Send(error.to_string()))?;
    let read = tokio::time::timeout(timeout, async {
        let mut events = Vec::new();
        loop {
            match frames.recv().await {
                Received::Frame(Tapped::Event(event)) => events.push(*event),
                Received::Frame(Tapped::EndOfStored(_)) => return Ok(events),
                Received::Frame(Tapped::Closed { message, .. }) => return Err(FetchError::Closed(message)),
                Received::Lagged => return Err(FetchError::TooMany),
                Received::Closed => return Err(FetchError::Send("the read was cut off".to_owned())),
            }
        }
    })
    .await
    .unwrap_or(Err(FetchError::Timeout(timeout)));
    // A relay that sent CLOSED has closed it already; a CLOSE for an
    // unknown id is harmless (NIP-01).
    if let Err(error) = relay.send_msg(ClientMessage::close(subscription)) {
        tracing::debug!(%error, "cannot close a one-shot read (the connection is going)");
    }
    read
}
