//! The relay tap: the daemon's own subscriptions read straight off the
//! websocket, the SDK's relay pool kept for the rest.
//!
//! Every frame a relay sends passes through the daemon's transport
//! ([`crate::edge::transport`]) before the SDK sees it. The SDK reads each one
//! into a `serde_json::Value` and back out, verifies each event's signature
//! (once per id, in a cache keyed by the id alone), checks it against its
//! in-memory database and announces it on two broadcast channels: about
//! 1.5 M instructions per answered mention on top of two verifications
//! (BENCHMARKS §8). For the subscriptions whose events the daemon judges
//! itself, that is all done twice or for nothing, so the tap takes their
//! frames first:
//! - an `EVENT` of a routed subscription is read in place ([`frame`]) and
//!   handed to its route as an [`Event`], unverified: the route's reader
//!   verifies what it acts on (the intake every event it may hear, the
//!   thread context every event it quotes), over the very bytes it parsed,
//!   so each event is verified once and only when it matters;
//! - the bot's own events on a route that drops them are dropped on their
//!   `pubkey` alone, before the rest is read (no filter can leave an
//!   author out of a REQ, NIP-01);
//! - `EOSE` and `CLOSED` of a routed subscription go to the route in wire
//!   order after its events, and on to the SDK too when it registered the
//!   subscription ([`Route::sdk_registered`]), so its bookkeeping (NIP-42
//!   re-sends, `unsubscribe_all`) is what it was.
//!
//! Everything else (`OK`, `AUTH`, `NOTICE`, pings, other subscriptions)
//! reaches the SDK untouched: connecting, NIP-42 authentication and
//! publishing with its `OK` prefixes stay the SDK's. The limits the SDK
//! puts on what it reads (the message size, an event's size and tags,
//! NIP-40 expiry) are applied here to what the tap takes, with the SDK's
//! own values ([`RelayLimits::default`]), so routing changes no outcome.
//!
//! A route holds a bounded number of frames. The tap runs inside the SDK's
//! read of the socket and never waits (that read carries the publishes'
//! `OK`s and the intake's own lookups too): a full route drops the frame and
//! is marked lagged, and its reader re-subscribes from its watermark, as it
//! did when the SDK's broadcast channel lagged. That re-subscription replays
//! what the relay holds since the watermark (minus the clock-skew margin),
//! and a replay larger than the route would lag again, forever: each lag a
//! reader is told of doubles the route's bound, up to [`MAX_WIDENING`]
//! times its first, so the replay fits the next time (measured: a journal
//! locked under 60 mentions with `--relay-buffer 8` lagged 4,230 times
//! and lost mentions before the bound grew; `tests/e2e/faults.rs`).

mod fetch;
mod frame;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use nostr_sdk::pool::RelayLimits;
use nostr_sdk::prelude::{Event, PublicKey, RelayUrl, SubscriptionId};
use tokio::sync::mpsc;

use crate::telemetry::metrics;
use frame::Head;

pub(crate) use fetch::fetch_once;

/// How far lags may widen a route's bound: the most frames it may hold is
/// this times its first bound (`--relay-buffer` for the links: 4,096 frames
/// at first, 32,768 at most, some 32 MB of events).
const MAX_WIDENING: usize = 8;

/// The SDK's limits on what it reads from a relay, its defaults (the
/// daemon sets none), read once.
static LIMITS: LazyLock<RelayLimits> = LazyLock::new(RelayLimits::default);

/// What a route's reader gets, in the order the relay sent it.
#[derive(Debug)]
pub(crate) enum Tapped {
    Event(Box<Event>),
    EndOfStored(SubscriptionId),
    Closed {
        subscription: SubscriptionId,
        message: String,
    },
}

/// Which subscriptions a route takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Subscriptions {
    /// This id.
    Exactly(String),
    /// Every id that starts so (one-shot reads numbered per connection).
    StartingWith(String),
}

impl Subscriptions {
    pub(crate) fn takes(&self, id: &str) -> bool {
        match self {
            Subscriptions::Exactly(exact) => id == exact,
            Subscriptions::StartingWith(prefix) => id.starts_with(prefix.as_str()),
        }
    }
}

/// Where a relay's frames of some subscriptions go.
#[derive(Debug)]
pub(crate) struct Route {
    subscriptions: Vec<Subscriptions>,
    to: mpsc::UnboundedSender<Tapped>,
    /// Frames sent and not yet received, and how many it may hold.
    held: Arc<Holding>,
    lagged: Arc<AtomicBool>,
    /// The bot's key as hex: its own events are dropped unread.
    drop_authored_by: Option<String>,
    /// The SDK sent the REQ and tracks the subscription: its `EOSE` and
    /// `CLOSED` reach the SDK as well.
    sdk_registered: bool,
    /// Its events are the intake's: the ones dropped here count in
    /// `events_received_total` and `events_dropped_total` as the intake's
    /// own drops do (the intake counts those it is handed).
    intake: bool,
}

/// A route's count of frames in flight, and its bound.
#[derive(Debug)]
struct Holding {
    frames: AtomicUsize,
    bound: AtomicUsize,
    most: usize,
}

impl Holding {
    fn new(bound: usize) -> Self {
        let bound = bound.max(1);
        Holding {
            frames: AtomicUsize::new(0),
            bound: AtomicUsize::new(bound),
            most: bound.saturating_mul(MAX_WIDENING),
        }
    }

    /// Counts one more frame in, or `false` when the route is full.
    fn take_one(&self) -> bool {
        let bound = self.bound.load(Ordering::Acquire);
        self.frames
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held < bound).then_some(held + 1)
            })
            .is_ok()
    }

    fn give_back(&self, frames: usize) {
        self.frames.fetch_sub(frames, Ordering::AcqRel);
    }

    fn widen(&self) {
        let _ = self
            .bound
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |bound| {
                Some(bound.saturating_mul(2).min(self.most))
            });
    }
}

/// The reading end of a route.
#[derive(Debug)]
pub(crate) struct TapReceiver {
    from: mpsc::UnboundedReceiver<Tapped>,
    held: Arc<Holding>,
    lagged: Arc<AtomicBool>,
}

/// What a route's reader is told.
#[derive(Debug)]
pub(crate) enum Received {
    Frame(Tapped),
    /// A frame was dropped because the route was full: re-read from the
    /// watermark.
    Lagged,
    /// The route is gone (the daemon is stopping).
    Closed,
}

impl TapReceiver {
    /// Drops what the route holds, and a lag it told of.
    pub(crate) fn drain(&mut self) {
        while self.from.try_recv().is_ok() {
            self.held.give_back(1);
        }
        self.lagged.store(false, Ordering::Release);
    }

    /// The next frame; a lag is told before the frames after it, and
    /// widens the route (see the module's doc).
    pub(crate) async fn recv(&mut self) -> Received {
        if self.lagged.swap(false, Ordering::AcqRel) {
            self.held.widen();
            return Received::Lagged;
        }
        match self.from.recv().await {
            Some(tapped) => {
                self.held.give_back(1);
                Received::Frame(tapped)
            }
            None => Received::Closed,
        }
    }
}

/// The routes of every relay, by URL: shared by the transport (which reads
/// them per frame) and the readers (which add and remove theirs).
#[derive(Debug, Clone, Default)]
pub(crate) struct RelayTaps {
    relays: Arc<Mutex<HashMap<RelayUrl, Arc<RelayRoutes>>>>,
}

/// One relay's routes.
#[derive(Debug)]
pub(crate) struct RelayRoutes {
    url: RelayUrl,
    routes: Mutex<Vec<(u64, Arc<Route>)>>,
    next_route: AtomicU64,
}

/// Takes a route off its relay when dropped.
#[derive(Debug)]
pub(crate) struct RouteGuard {
    relay: Arc<RelayRoutes>,
    id: u64,
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        lock(&self.relay.routes).retain(|(id, _)| *id != self.id);
    }
}

/// What a new route asks for.
#[derive(Debug)]
pub(crate) struct RouteSpec {
    pub subscriptions: Vec<Subscriptions>,
    /// Frames the route holds before it lags, at first.
    pub capacity: usize,
    /// Drop this key's events unread (the bot's own).
    pub drop_authored_by: Option<PublicKey>,
    pub sdk_registered: bool,
    /// The intake reads the route (its drops are counted as the intake's).
    pub intake: bool,
}

impl RelayTaps {
    /// The routes of the relay at `url` (with or without its trailing
    /// slash: the SDK hands the transport the URL with one).
    pub(crate) fn relay(&self, url: &RelayUrl) -> Arc<RelayRoutes> {
        let mut relays = lock(&self.relays);
        let routes = relays.entry(url.clone()).or_insert_with(|| {
            Arc::new(RelayRoutes {
                url: url.clone(),
                routes: Mutex::default(),
                next_route: AtomicU64::default(),
            })
        });
        Arc::clone(routes)
    }

    /// Routes `spec`'s subscriptions on the relay at `url` to a new
    /// receiver, until the guard is dropped.
    pub(crate) fn route(&self, url: &RelayUrl, spec: RouteSpec) -> (TapReceiver, RouteGuard) {
        let (to, from) = mpsc::unbounded_channel();
        let held = Arc::new(Holding::new(spec.capacity));
        let lagged = Arc::new(AtomicBool::new(false));
        let route = Route {
            subscriptions: spec.subscriptions,
            to,
            held: Arc::clone(&held),
            lagged: Arc::clone(&lagged),
            drop_authored_by: spec.drop_authored_by.map(|key| key.to_hex()),
            sdk_registered: spec.sdk_registered,
            intake: spec.intake,
        };
        let relay = self.relay(url);
        let id = relay.next_route.fetch_add(1, Ordering::Relaxed);
        lock(&relay.routes).push((id, Arc::new(route)));
        (TapReceiver { from, held, lagged }, RouteGuard { relay, id })
    }
}

impl RelayRoutes {
    /// Takes `frame` when it belongs to a route; returns it when it goes on
    /// to the SDK (not routed, or an `EOSE`/`CLOSED` the SDK tracks too).
    pub(crate) fn sift(&self, frame: String) -> Option<String> {
        let head = Head::read(&frame);
        let Some(route) = head.subscription().and_then(|id| self.route_of(id)) else {
            return Some(frame);
        };
        let share = route.sdk_registered && matches!(head, Head::EndOfStored { .. } | Head::Closed { .. });
        if let Some(tapped) = self.take(&route, head, frame.len()) {
            route.deliver(tapped);
        }
        share.then_some(frame)
    }

    /// How many routes the relay holds (a read's is gone with the read).
    #[cfg(test)]
    pub(crate) fn routes_held(&self) -> usize {
        lock(&self.routes).len()
    }

    fn route_of(&self, subscription: &str) -> Option<Arc<Route>> {
        lock(&self.routes)
            .iter()
            .find(|(_, route)| route.subscriptions.iter().any(|taken| taken.takes(subscription)))
            .map(|(_, route)| Arc::clone(route))
    }

    /// What a routed frame hands on, or `None` when it is dropped here (the
    /// bot's own event, over a limit, expired, unreadable: each counted).
    fn take(&self, route: &Route, head: Head<'_>, frame_bytes: usize) -> Option<Tapped> {
        let subscription = |id: Cow<'_, str>| SubscriptionId::new(id);
        match head {
            Head::EndOfStored { subscription: id } => Some(Tapped::EndOfStored(subscription(id))),
            Head::Closed {
                subscription: id,
                message,
            } => Some(Tapped::Closed {
                subscription: subscription(id),
                message: message.into_owned(),
            }),
            Head::Event {
                subscription: id,
                event,
            } => {
                let dropped = |event_id: &str, reason: &'static str| {
                    route.count_dropped(reason);
                    tracing::debug!(relay = %self.url, subscription = %id, event_id, reason, "event dropped");
                    None
                };
                let limits = &*LIMITS;
                // The frame's size bounds the event's (the SDK measured the event as it
                // would write it again: a few bytes less).
                if limits
                    .messages
                    .max_size
                    .is_some_and(|max| frame_bytes > max as usize)
                {
                    tracing::warn!(relay = %self.url, subscription = %id, bytes = frame_bytes, "a relay message over the size limit was dropped");
                    return dropped(&event.id, "too_large");
                }
                if route
                    .drop_authored_by
                    .as_ref()
                    .is_some_and(|bot| event.is_by(bot))
                {
                    return dropped(&event.id, "own_event");
                }
                let claimed_id = event.id.clone().into_owned();
                let Ok(read) = event.decode() else {
                    return dropped(&claimed_id, "malformed");
                };
                let too_large = limits
                    .events
                    .get_max_size(&read.kind)
                    .is_some_and(|max| frame_bytes > max as usize);
                let too_many_tags = limits
                    .events
                    .get_max_num_tags(&read.kind)
                    .is_some_and(|max| read.tags.len() > usize::from(max));
                if too_large || too_many_tags {
                    tracing::warn!(relay = %self.url, subscription = %id, event_id = %read.id, "an event over the size or tag limit was dropped");
                    return dropped(&claimed_id, "too_large");
                }
                if read.is_expired() {
                    return dropped(&claimed_id, "expired");
                }
                Some(Tapped::Event(Box::new(read)))
            }
            Head::Unreadable { subscription: id } => {
                route.count_dropped("malformed");
                tracing::debug!(relay = %self.url, subscription = %id, reason = "malformed", "event dropped");
                None
            }
            Head::Other => None,
        }
    }
}

impl Route {
    fn count_dropped(&self, reason: &'static str) {
        if self.intake {
            metrics::event_received();
            metrics::event_dropped(reason);
        }
    }

    fn deliver(&self, tapped: Tapped) {
        if !self.held.take_one() {
            self.lagged.store(true, Ordering::Release);
            return;
        }
        if self.to.send(tapped).is_err() {
            // The reader is gone; its guard takes the route off shortly.
            self.held.give_back(1);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
