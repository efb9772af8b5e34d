//! Connections to other people's relays (their DM inboxes, their read
//! relays), for publishing only, and to the directory relays.
//!
//! They live in a client of their own, apart from the listening client, so
//! that nothing else (the publisher's "every relay" fallback, thread
//! context, the author gate's lookups, housekeeping) ever starts using a
//! stranger's relay. The client answers NIP-42 challenges with the bot's
//! keys (inbox relays often ask) and sends an event refused
//! `auth-required:` again once authenticated, as the listening one does.
//!
//! Directory relays (`--directory-relays`) are reached through it too,
//! for reading people's relay lists and publishing the bot's own.
//!
//! A relay the operator did not name is reached over `wss://` only and at
//! a public address only, unless the operator allows more
//! ([`StrangersRelays`], checked in the transport on the address connected
//! to): someone's list cannot point the daemon at its own host, its
//! network or a cloud metadata address, nor make it answer AUTH there. A
//! relay refused so is remembered ([`RelayGuard`]): routing leaves it out
//! ([`OutboundRelays::may_try`]) and the event goes to the bot's relays.
//!
//! A connection is opened on first use and kept for the next message to
//! the same relay; at most [`MAX_OUTBOUND_RELAYS`] are open (opening one
//! more closes the least recently used), and one unused for
//! [`OUTBOUND_RELAY_IDLE`] is closed ([`OutboundRelays::close_idle`], run
//! by the publisher's loop). Which connections to keep is [`PoolBook`]'s
//! decision, without I/O, so that it is tested on its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nostr_sdk::prelude::{Client, ClientOptions, Event, EventId, Filter, Output, RelayUrl};

use crate::edge::signer::BotSigner;
use crate::edge::transport::{NoDelayTransport, RelayGuard, RelayRefusal, StrangersRelays};

/// Connections to other people's relays open at once.
pub(super) const MAX_OUTBOUND_RELAYS: usize = 32;
/// A connection unused this long is closed.
pub(super) const OUTBOUND_RELAY_IDLE: Duration = Duration::from_secs(5 * 60);
/// How long opening a connection may take before the attempt counts as
/// failed (and the message is retried).
const OUTBOUND_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which connections are open and when each was last used. No I/O: it
/// says what to open and close, [`OutboundRelays`] does it.
#[derive(Debug)]
pub(super) struct PoolBook {
    capacity: usize,
    idle_after: Duration,
    last_used: HashMap<RelayUrl, Instant>,
}

/// What using a relay takes.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Use {
    /// Not open yet: open it.
    pub open: bool,
    /// Close this one first to stay within the bound.
    pub close: Option<RelayUrl>,
}

impl PoolBook {
    pub(super) fn new(capacity: usize, idle_after: Duration) -> Self {
        PoolBook {
            capacity,
            idle_after,
            last_used: HashMap::new(),
        }
    }

    /// Records a use of `url` at `now`.
    pub(super) fn use_relay(&mut self, url: &RelayUrl, now: Instant) -> Use {
        if let Some(last) = self.last_used.get_mut(url) {
            *last = now;
            return Use {
                open: false,
                close: None,
            };
        }
        let close = (self.last_used.len() >= self.capacity)
            .then(|| {
                self.last_used
                    .iter()
                    .min_by_key(|(_, last)| **last)
                    .map(|(url, _)| url.clone())
            })
            .flatten();
        if let Some(closed) = &close {
            self.last_used.remove(closed);
        }
        self.last_used.insert(url.clone(), now);
        Use { open: true, close }
    }

    /// Forgets the connections idle at `now` and returns them, to close.
    pub(super) fn take_idle(&mut self, now: Instant) -> Vec<RelayUrl> {
        let idle: Vec<RelayUrl> = self
            .last_used
            .iter()
            .filter(|(_, last)| now.saturating_duration_since(**last) >= self.idle_after)
            .map(|(url, _)| url.clone())
            .collect();
        for url in &idle {
            self.last_used.remove(url);
        }
        idle
    }

    /// Forgets `url` (it could not be opened).
    pub(super) fn forget(&mut self, url: &RelayUrl) {
        self.last_used.remove(url);
    }

    #[cfg(test)]
    pub(super) fn open(&self) -> usize {
        self.last_used.len()
    }
}

/// The pooled connections to other people's relays.
#[derive(Debug)]
pub(crate) struct OutboundRelays {
    /// Built on first use: an SDK client holds about 6 MB from the start
    /// (its verification cache of 128,000 ids, allocated up front, and its
    /// notification channel), and many bots never reach another's relay
    /// (BENCHMARKS §10).
    client: OnceLock<Client>,
    signer: BotSigner,
    book: Mutex<PoolBook>,
    guard: Arc<RelayGuard>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum OutboundError {
    #[error(transparent)]
    Client(#[from] nostr_sdk::client::Error),
    #[error("refused: {0}")]
    Refused(#[from] RelayRefusal),
}

impl OutboundRelays {
    /// Within [`MAX_OUTBOUND_RELAYS`] and [`OUTBOUND_RELAY_IDLE`], reaching
    /// the relays `guard` allows.
    pub(crate) fn new(signer: BotSigner, guard: StrangersRelays) -> Self {
        Self::with_bounds(signer, guard, MAX_OUTBOUND_RELAYS, OUTBOUND_RELAY_IDLE)
    }

    fn with_bounds(signer: BotSigner, guard: StrangersRelays, capacity: usize, idle_after: Duration) -> Self {
        OutboundRelays {
            client: OnceLock::new(),
            signer,
            book: Mutex::new(PoolBook::new(capacity, idle_after)),
            guard: Arc::new(RelayGuard::new(guard)),
        }
    }

    fn client(&self) -> &Client {
        self.client.get_or_init(|| {
            Client::builder()
                .signer(self.signer.clone())
                .database(crate::edge::seen_ids::tracker())
                .websocket_transport(NoDelayTransport::guarded(Arc::clone(&self.guard)))
                .opts(ClientOptions::new().automatic_authentication(true))
                .build()
        })
    }

    /// Whether `url` may be tried: not refused by its URL, nor refused
    /// lately as it was connected to (a name that resolved to a private
    /// address, [`crate::edge::transport::REFUSAL_MEMORY`]).
    pub(crate) fn may_try(&self, url: &RelayUrl) -> bool {
        self.guard.vet(url).is_ok()
    }

    /// Sends `event` to `urls`, opening (or reusing) a connection to each.
    /// A relay that cannot be reached shows in the output's failures, like
    /// one that refused.
    pub(crate) async fn send_event_to(
        &self,
        urls: &[RelayUrl],
        event: &Event,
    ) -> Result<Output<EventId>, OutboundError> {
        let mut unreachable = HashMap::new();
        let mut reachable = Vec::new();
        for url in urls {
            match self.open(url).await {
                Ok(()) => reachable.push(url.clone()),
                Err(error) => {
                    unreachable.insert(url.clone(), error.to_string());
                }
            }
        }
        let mut output = if reachable.is_empty() {
            Output {
                val: event.id,
                success: Default::default(),
                failed: HashMap::new(),
            }
        } else {
            self.client().send_event_to(reachable, event).await?
        };
        output.failed.extend(unreachable);
        Ok(output)
    }

    /// The events matching `filter` on those of `urls` that can be reached,
    /// within `timeout`; fails when none can.
    pub(crate) async fn fetch_from(
        &self,
        urls: &[RelayUrl],
        filter: Filter,
        timeout: Duration,
    ) -> Result<Vec<Event>, OutboundError> {
        let mut reachable = Vec::new();
        let mut last_error = None;
        for url in urls {
            match self.open(url).await {
                Ok(()) => reachable.push(url.clone()),
                Err(error) => last_error = Some(error),
            }
        }
        match (reachable.is_empty(), last_error) {
            (true, Some(error)) => Err(error),
            _ => Ok(self
                .client()
                .fetch_events_from(reachable, filter, timeout)
                .await?
                .into_iter()
                .collect()),
        }
    }

    /// Makes sure a connection to `url` is open, within the bound.
    async fn open(&self, url: &RelayUrl) -> Result<(), OutboundError> {
        self.guard.vet(url)?;
        let used = self.book().use_relay(url, Instant::now());
        if let Some(closed) = used.close {
            tracing::debug!(relay = %closed, "closing the least recently used connection to another's relay");
            self.close(&closed).await;
        }
        if used.open || self.client().relay(url).await.is_err() {
            self.client().add_relay(url.clone()).await?;
            if let Err(error) = self
                .client()
                .try_connect_relay(url.clone(), OUTBOUND_CONNECT_TIMEOUT)
                .await
            {
                self.book().forget(url);
                self.close(url).await;
                return Err(error.into());
            }
            tracing::debug!(relay = %url, "connected to another's relay");
        }
        Ok(())
    }

    /// Closes the connections unused for [`OUTBOUND_RELAY_IDLE`].
    pub(crate) async fn close_idle(&self) {
        let idle = self.book().take_idle(Instant::now());
        for url in idle {
            tracing::debug!(relay = %url, "closing an idle connection to another's relay");
            self.close(&url).await;
        }
    }

    async fn close(&self, url: &RelayUrl) {
        let Some(client) = self.client.get() else { return };
        if let Err(error) = client.force_remove_relay(url.clone()).await {
            tracing::debug!(relay = %url, %error, "cannot close a connection to another's relay");
        }
    }

    /// Closes every connection (at shutdown).
    pub(crate) async fn shutdown(&self) {
        if let Some(client) = self.client.get() {
            client.shutdown().await;
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, PoolBook> {
        self.book.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::embedded_relay::EmbeddedRelay;
    use nostr_sdk::prelude::{EventBuilder, Keys};

    fn url(n: usize) -> RelayUrl {
        RelayUrl::parse(&format!("wss://inbox{n}.example.com")).unwrap()
    }

    #[test]
    fn a_used_connection_is_reused_and_one_more_than_the_bound_closes_the_least_recently_used() {
        let mut book = PoolBook::new(3, OUTBOUND_RELAY_IDLE);
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        for n in 0..3 {
            assert_eq!(
                book.use_relay(&url(n), at(n as u64)),
                Use {
                    open: true,
                    close: None
                }
            );
        }
        assert_eq!(
            book.use_relay(&url(0), at(10)),
            Use {
                open: false,
                close: None
            },
            "reused"
        );
        assert_eq!(
            book.use_relay(&url(3), at(11)),
            Use {
                open: true,
                close: Some(url(1))
            },
            "relay 1 was used least recently"
        );
        for n in 4..100 {
            book.use_relay(&url(n), at(11 + n as u64));
            assert!(book.open() <= 3);
        }
    }

    #[test]
    fn connections_unused_for_the_idle_lifetime_are_closed_and_busy_ones_kept() {
        let idle_after = Duration::from_secs(60);
        let mut book = PoolBook::new(8, idle_after);
        let start = Instant::now();
        book.use_relay(&url(0), start);
        book.use_relay(&url(1), start);
        book.use_relay(&url(1), start + Duration::from_secs(50));
        assert!(book.take_idle(start + Duration::from_secs(59)).is_empty());
        assert_eq!(book.take_idle(start + idle_after), [url(0)]);
        assert_eq!(book.open(), 1);
        assert!(
            book.use_relay(&url(0), start + idle_after).open,
            "opened again on the next use"
        );
        assert_eq!(
            book.take_idle(start + Duration::from_secs(50) + idle_after),
            [url(1)]
        );
    }

    /// The tests' relays are on loopback over ws://.
    fn anywhere() -> StrangersRelays {
        StrangersRelays {
            operators: Vec::new(),
            plain_websockets: true,
            private: crate::edge::public_address::PrivateAddresses::Allowed,
        }
    }

    async fn open_relays(pool: &OutboundRelays) -> Vec<RelayUrl> {
        pool.client().relays().await.into_keys().collect()
    }

    #[tokio::test]
    async fn the_pool_reuses_a_connection_and_closes_the_least_recently_used_past_its_bound() {
        let (a, b) = (
            EmbeddedRelay::start(None).await.unwrap(),
            EmbeddedRelay::start(None).await.unwrap(),
        );
        let keys = Keys::generate();
        let note = |text: &str| EventBuilder::text_note(text).sign_with_keys(&keys).unwrap();
        let pool = OutboundRelays::with_bounds(
            BotSigner::from_keys(keys.clone()),
            anywhere(),
            1,
            OUTBOUND_RELAY_IDLE,
        );
        assert!(pool.client.get().is_none(), "no SDK client before the first use");
        pool.close_idle().await;
        pool.shutdown().await;
        assert!(pool.client.get().is_none(), "closing nothing builds nothing");

        for text in ["one", "two"] {
            let sent = pool.send_event_to(&[a.url().clone()], &note(text)).await.unwrap();
            assert!(sent.success.contains(a.url()), "{sent:?}");
        }
        let connection = pool.client().relay(a.url()).await.unwrap();
        assert_eq!(connection.stats().success(), 1, "one connection for both");

        let sent = pool
            .send_event_to(&[b.url().clone()], &note("three"))
            .await
            .unwrap();
        assert!(sent.success.contains(b.url()), "{sent:?}");
        assert_eq!(
            open_relays(&pool).await,
            [b.url().clone()],
            "a closed to make room"
        );
        assert!(!connection.is_connected());
    }

    #[tokio::test]
    async fn the_pool_closes_idle_connections_and_reports_an_unreachable_relay_as_a_failure() {
        let relay = EmbeddedRelay::start(None).await.unwrap();
        let keys = Keys::generate();
        let note = EventBuilder::text_note("hi").sign_with_keys(&keys).unwrap();
        let pool =
            OutboundRelays::with_bounds(BotSigner::from_keys(keys.clone()), anywhere(), 8, Duration::ZERO);
        pool.send_event_to(&[relay.url().clone()], &note).await.unwrap();
        assert_eq!(open_relays(&pool).await.len(), 1);
        pool.close_idle().await;
        assert!(open_relays(&pool).await.is_empty());

        let nowhere = RelayUrl::parse("ws://127.0.0.1:1").unwrap();
        let sent = pool
            .send_event_to(std::slice::from_ref(&nowhere), &note)
            .await
            .unwrap();
        assert!(sent.success.is_empty());
        assert!(sent.failed.contains_key(&nowhere), "{sent:?}");
        assert!(open_relays(&pool).await.is_empty(), "not kept");
    }
}
