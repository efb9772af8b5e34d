//! One relay connection: connect, subscribe from the durable watermark,
//! pump events to the intake, reconnect with backoff and jitter. At stop it
//! closes its subscriptions and no more: the connection stays up for the
//! outbox, and the daemon closes it once the outbox has drained.
//!
//! Owns the connection state of one relay and nothing else; it never looks
//! at what an event says. The SDK's own reconnect is off: it would re-send
//! the original `since` and keep its de-duplication in memory only. Here,
//! every (re)subscribe uses `since = watermark − skew`, so mentions posted
//! while we were cut off are fetched once we are back, and the seen set in
//! `store` drops the ones already handled.
//!
//! The tap's route drops frames when we lag behind (it never blocks the
//! SDK's read of the socket, which carries the publishes' `OK`s too); a
//! lag is a gap, and a gap is closed by subscribing again from the
//! watermark, into a route that holds twice as much since (`relay_tap`).
//! The intake may ask for the same ([`RefetchFrom`]): an event it could not
//! take for a passing reason (the journal write failed, say) holds the
//! watermark back and is fetched again a little later.
//!
//! No subscription reaches below the seen horizon ([`subscription_since`]):
//! housekeeping may have pruned the seen entries of older events, and the
//! date check is then all that keeps them from being answered twice.
//!
//! The subscriptions' `EVENT`, `EOSE` and `CLOSED` frames come from the
//! relay tap ([`crate::edge::relay_tap`]), in wire order, straight off the
//! websocket: the SDK never reads, verifies or stores these events, and
//! the bot's own (its replies coming back in the threads it follows) are
//! dropped unread. The intake verifies what it may hear, once.
//! De-duplication is the intake's (the journal). The SDK's notifications
//! still say when the connection drops and when NIP-42 authentication
//! succeeded or failed.
//!
//! Relays that ask for authentication (NIP-42) close a subscription with
//! `auth-required:` and send a challenge. That is no broken link: the SDK
//! answers the challenge with the bot's keys, and once it is authenticated
//! the link sends the closed subscriptions again on the same connection
//! ([`Subscriptions`]). The SDK would re-send them too, but only those it
//! had registered when the CLOSED came, and it registers a subscription
//! after sending its REQ: a quick relay's CLOSED can come first. DMs have a subscription of their own, so a relay
//! that serves gift wraps only to their authenticated recipient (as DM
//! inbox relays do), or not at all, leaves the mentions' one alone.
//!
//! Nothing slow runs here: events are handed to the intake task through a
//! bounded channel, which is where backpressure belongs.

use std::time::{Duration, Instant};

use nostr_sdk::prelude::{
    Event, Filter, Kind, Relay, RelayNotification, RelayStatus, RelayUrl, SubscribeAutoCloseOptions,
    SubscribeOptions, SubscriptionId, Timestamp,
};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::Arrival;
use super::followed_threads::{Answered, FollowedThreads, Renewal};
use super::interest::{
    DM_SUBSCRIPTION_ID, GIFT_WRAP_BACKDATE, GROUPS_SUBSCRIPTION_ID, Interest, SUBSCRIPTION_ID,
};
use super::own_replies::OwnReplies;
use super::subscriptions::{Subscriptions, Verdict};
use super::untaken::RefetchFrom;
use crate::base::backoff::Backoff;
use crate::base::clock_skew::SINCE_SKEW;
use crate::base::deadline::sleep_until;
use crate::edge::relay_tap::{
    Received, RelayTaps, RouteGuard, RouteSpec, Subscriptions as Taken, TapReceiver, Tapped,
};
use crate::state::ledger::Ledger;
use crate::state::store::{AnsweredThreads, Watermarks};

/// Without a watermark (first start), only this much history is fetched.
const FIRST_START_LOOKBACK: Duration = SINCE_SKEW;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const RECONNECT_MIN: Duration = Duration::from_millis(500);
const RECONNECT_MAX: Duration = Duration::from_secs(60);
/// A connection that lived this long resets the backoff.
const STABLE_CONNECTION: Duration = Duration::from_secs(30);
/// While connected, tell the intake this often that we are caught up, so
/// the watermark moves forward on a quiet relay too.
const CAUGHT_UP_INTERVAL: Duration = Duration::from_secs(30);
/// The intake's first request to fetch an untaken event again waits this
/// long (a locked journal, a lookup queue that was full); repeated
/// requests back off to the maximum.
const REFETCH_MIN: Duration = Duration::from_secs(1);
const REFETCH_MAX: Duration = Duration::from_secs(30);

/// The second subscription: replies in the threads the bot answered in
/// (`--follow-threads`), whether they tag the bot or not.
const THREADS_SUBSCRIPTION_ID: &str = "acp-bridge-threads";
/// The third: replies in the threads answered in since the second was last
/// sent (see `followed_threads`).
const RECENT_THREADS_SUBSCRIPTION_ID: &str = "acp-bridge-threads-recent";
/// One-shot queries, closed at EOSE: what the threads answered since the
/// last renewal already hold (the live renewal asks for nothing stored).
/// Each has an id of its own (this prefix and a number): a second one
/// under the same id would replace the first on the relay, and the first
/// one's close at its EOSE could cut the second short.
const NEW_THREADS_SUBSCRIPTION_PREFIX: &str = "acp-bridge-threads-new-";
/// How long the one-shot query of new threads may wait for its EOSE.
const NEW_THREADS_QUERY_TIMEOUT: Duration = Duration::from_secs(30);
/// Live subscriptions whose events go to the intake (with the one-shot
/// reads of new threads: [`forwarded`]).
const FORWARDED_SUBSCRIPTIONS: [&str; 5] = [
    SUBSCRIPTION_ID,
    DM_SUBSCRIPTION_ID,
    GROUPS_SUBSCRIPTION_ID,
    THREADS_SUBSCRIPTION_ID,
    RECENT_THREADS_SUBSCRIPTION_ID,
];
/// Threads followed at most, the most recently answered: relays cap the
/// values of a filter.
const MAX_FOLLOWED_THREADS: usize = 500;
/// The bot's own replies read at the first connection (`own_replies`): a
/// thread's answers and their series parts each count, so twice the
/// threads followed.
const MAX_OWN_REPLIES_READ: usize = 2 * MAX_FOLLOWED_THREADS;

/// What a link tells the rest of the daemon about its relay, each a watch
/// that is true while it holds.
#[derive(Debug)]
pub(crate) struct LinkStatus {
    /// Connected (`/healthz`, the identity, the groups' membership).
    pub(crate) connected: watch::Sender<bool>,
    /// The relay took the intake subscriptions: it delivered what it
    /// stores for each (EOSE) or refused one it may refuse (DMs, groups).
    /// A relay that is connected but silent about the subscriptions does
    /// not count: this is what the daemon's `ready` waits for.
    pub(crate) listening: watch::Sender<bool>,
}

impl Default for LinkStatus {
    fn default() -> Self {
        LinkStatus {
            connected: watch::channel(false).0,
            listening: watch::channel(false).0,
        }
    }
}

/// Keeps one relay connected and subscribed.
#[derive(Debug)]
pub(crate) struct RelayLink {
    relay: Relay,
    url: RelayUrl,
    interest: Interest,
    /// The durable state the link reads and writes.
    doors: LinkDoors,
    arrivals: mpsc::Sender<Arrival>,
    status: LinkStatus,
    refetch: RefetchFrom,
    threads: watch::Receiver<()>,
    /// The roots the live thread subscriptions cover.
    followed: FollowedThreads,
    /// One-shot reads of new threads sent so far (their ids' numbers).
    new_thread_reads: u64,
    /// What the bot's own replies on this relay say was read into the
    /// store (once per link, before the first subscription: `own_replies`).
    learned_own_replies: bool,
    /// The mentions' and DMs' subscriptions on this connection.
    subscriptions: Subscriptions,
    /// The frames of the forwarded subscriptions, off the wire.
    tap: TapReceiver,
    /// Keeps the tap's route for as long as the link runs.
    _route: RouteGuard,
}

/// What asks the link to subscribe again.
#[derive(Debug)]
pub(crate) struct LinkCues {
    /// The intake: fetch untaken events again.
    pub refetch: RefetchFrom,
    /// The replier: the bot answered in a new thread.
    pub threads: watch::Receiver<()>,
}

/// How the link reads its subscriptions' frames.
#[derive(Debug)]
pub(crate) struct LinkTap<'a> {
    pub taps: &'a RelayTaps,
    /// Frames a burst may hold before the link first lags
    /// (`--relay-buffer`; each lag doubles it, up to eight times).
    pub buffer: usize,
}

/// The store's tables a relay link reaches, one door each.
#[derive(Debug, Clone)]
pub(crate) struct LinkDoors {
    /// Journals the mentions the bot's own replies show answered.
    pub ledger: Ledger,
    /// The threads the bot answered in, to follow and to learn.
    pub answered: AnsweredThreads,
    /// Where `since` starts: this relay's watermark, the seen horizon.
    pub watermarks: Watermarks,
}

impl RelayLink {
    pub(crate) fn new(
        relay: Relay,
        interest: Interest,
        doors: LinkDoors,
        arrivals: mpsc::Sender<Arrival>,
        status: LinkStatus,
        cues: LinkCues,
        tap: LinkTap<'_>,
    ) -> Self {
        let LinkCues { refetch, threads } = cues;
        let (tap, route) = tap.taps.route(
            relay.url(),
            RouteSpec {
                subscriptions: forwarded(),
                capacity: tap.buffer,
                drop_authored_by: Some(interest.bot),
                sdk_registered: true,
                intake: true,
            },
        );
        RelayLink {
            url: relay.url().clone(),
            relay,
            interest,
            doors,
            arrivals,
            status,
            refetch,
            threads,
            followed: FollowedThreads::default(),
            new_thread_reads: 0,
            learned_own_replies: false,
            subscriptions: Subscriptions::default(),
            tap,
            _route: route,
        }
    }

    /// Runs until `stop` is cancelled, then stops listening
    /// ([`RelayLink::stop_listening`]).
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        let mut backoff = Backoff::new(RECONNECT_MIN, RECONNECT_MAX);
        while !stop.is_cancelled() {
            // Subscribe to notifications before connecting: nothing between
            // the connect and the first recv may be missed. What the tap
            // holds from the last connection is dropped, as the SDK's
            // notifications of it are: the new subscriptions read it again.
            let mut notifications = self.relay.notifications();
            self.tap.drain();
            match self.relay.try_connect(CONNECT_TIMEOUT).await {
                // Connected as the stop came: nothing to listen for.
                Ok(()) if stop.is_cancelled() => break,
                Ok(()) => {
                    let connected_at = Instant::now();
                    self.status.connected.send_replace(true);
                    self.serve(&mut notifications, &stop).await;
                    self.status.listening.send_replace(false);
                    self.status.connected.send_replace(false);
                    if connected_at.elapsed() >= STABLE_CONNECTION {
                        backoff.reset();
                    }
                }
                Err(error) => {
                    tracing::warn!(relay = %self.url, %error, "relay unreachable");
                }
            }
            if stop.is_cancelled() {
                break;
            }
            let delay = backoff.next_delay();
            tracing::info!(relay = %self.url, retry_in_ms = delay.as_millis() as u64, attempt = backoff.failures(), "reconnecting to relay");
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(delay) => {}
            }
        }
        self.stop_listening().await;
    }

    /// At stop: closes the subscriptions, so that no new mention comes in,
    /// and leaves the connection up. The outbox still publishes through it
    /// what the turns finishing within the grace answer; the daemon closes
    /// it once the outbox has drained (`daemon::Stopping`).
    async fn stop_listening(&self) {
        if !self.relay.is_connected() {
            return;
        }
        match self.relay.unsubscribe_all().await {
            Ok(()) => {
                tracing::debug!(relay = %self.url, "stopped listening; the connection stays up for the outbox")
            }
            Err(error) => {
                tracing::debug!(relay = %self.url, %error, "cannot close the subscriptions (the connection is going)")
            }
        }
    }

    /// Pumps one live connection until it drops or we stop.
    ///
    /// The select is biased: pending notifications go before the caught-up
    /// tick, so a tick never claims "delivered up to now" while events
    /// delivered earlier still wait in the SDK's buffer.
    async fn serve(
        &mut self,
        notifications: &mut broadcast::Receiver<RelayNotification>,
        stop: &CancellationToken,
    ) {
        if !self.subscribe(None).await {
            self.relay.disconnect();
            return;
        }
        let mut caught_up = tokio::time::interval(CAUGHT_UP_INTERVAL);
        caught_up.tick().await;
        let mut refetch_backoff = Backoff::new(REFETCH_MIN, REFETCH_MAX);
        let mut refetch_at: Option<tokio::time::Instant> = None;
        loop {
            let refetch_due = sleep_until(refetch_at);
            let auth_overdue = sleep_until(self.subscriptions.auth_deadline);
            tokio::select! {
                biased;
                () = stop.cancelled() => return,
                received = self.tap.recv() => match received {
                    Received::Frame(Tapped::Event(event)) => {
                        self.forward(Arrival::Event { relay: self.url.clone(), event }).await;
                    }
                    Received::Frame(Tapped::EndOfStored(id)) => {
                        if self.subscriptions.end_of_stored(id.as_str()) {
                            self.delivered_stored().await;
                        }
                    }
                    Received::Frame(Tapped::Closed { subscription, message }) => {
                        if let Some(verdict) = self.subscriptions.closed(subscription.as_str(), &message, tokio::time::Instant::now())
                            && !self.carry_on(verdict, &message).await
                        {
                            return;
                        }
                    }
                    Received::Lagged => {
                        tracing::warn!(relay = %self.url, "fell behind the relay's events; re-subscribing from the watermark");
                        if !self.subscribe(None).await {
                            self.relay.disconnect();
                            return;
                        }
                    }
                    Received::Closed => return,
                },
                notification = notifications.recv() => match notification {
                    Ok(RelayNotification::Authenticated) => {
                        let again = self.subscriptions.authenticated_now();
                        if !again.is_empty() {
                            tracing::info!(relay = %self.url, "authenticated to the relay (NIP-42); the closed subscriptions are sent again");
                            if !self.send(again).await {
                                self.relay.disconnect();
                                return;
                            }
                        }
                    }
                    Ok(RelayNotification::AuthenticationFailed) => {
                        if let Some(verdict) = self.subscriptions.authentication_lost()
                            && !self.carry_on(verdict, "authentication failed").await
                        {
                            return;
                        }
                    }
                    Ok(RelayNotification::RelayStatus { status }) => {
                        if matches!(status, RelayStatus::Disconnected | RelayStatus::Terminated | RelayStatus::Banned) {
                            tracing::warn!(relay = %self.url, %status, "relay connection lost");
                            return;
                        }
                    }
                    Ok(RelayNotification::Shutdown) => return,
                    Ok(_) => {}
                    // The subscriptions' frames come by the tap: what a lag
                    // loses here is at worst an `Authenticated`, which the
                    // authentication deadline turns into a reconnect.
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                changed = self.threads.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.follow_new_threads().await;
                }
                _ = caught_up.tick() => {
                    if self.subscriptions.authenticated() {
                        self.forward(Arrival::CaughtUp { relay: self.url.clone(), at: Timestamp::now() }).await;
                    }
                }
                () = auth_overdue => {
                    if let Some(verdict) = self.subscriptions.authentication_lost()
                        && !self.carry_on(verdict, "no authentication in time").await
                    {
                        return;
                    }
                }
                changed = self.refetch.changed() => {
                    if changed.is_err() {
                        // The intake is gone: we are stopping.
                        return;
                    }
                    refetch_at = match *self.refetch.borrow_and_update() {
                        Some(_) => Some(tokio::time::Instant::now() + refetch_backoff.next_delay()),
                        None => {
                            refetch_backoff.reset();
                            None
                        }
                    };
                }
                () = refetch_due => {
                    refetch_at = None;
                    let from = *self.refetch.borrow();
                    tracing::info!(relay = %self.url, from = from.map(|at| at.as_secs()), "fetching untaken events again");
                    if !self.subscribe(from).await {
                        self.relay.disconnect();
                        return;
                    }
                }
            }
        }
    }

    /// Acts on a closed subscription or a lost authentication; false when
    /// the link reconnects.
    async fn carry_on(&mut self, verdict: Verdict, message: &str) -> bool {
        match verdict {
            Verdict::AwaitAuth => {
                tracing::info!(relay = %self.url, reason = %message, "the relay asks us to authenticate (NIP-42); the subscription is sent again once we are");
                true
            }
            Verdict::Refused { reading, caught_up } => {
                let reading = reading.join(" and ");
                tracing::warn!(relay = %self.url, reason = %message, %reading, "the relay refuses our subscription; what it reads is not read from this relay until we reconnect");
                if caught_up {
                    self.delivered_stored().await;
                }
                true
            }
            Verdict::Reconnect => {
                tracing::warn!(relay = %self.url, reason = %message, "relay closed our subscription; reconnecting");
                self.relay.disconnect();
                false
            }
        }
    }

    /// (Re)subscribes from the watermark, or from `oldest_untaken` when
    /// that is earlier, never below the seen horizon. The same subscription
    /// id replaces the previous REQ on the relay.
    async fn subscribe(&mut self, oldest_untaken: Option<Timestamp>) -> bool {
        let kinds = self.interest.public_kinds();
        if !self.learned_own_replies && !kinds.is_empty() {
            self.learned_own_replies = true;
            let own_replies = OwnReplies {
                relay: &self.relay,
                bot: self.interest.bot,
                kinds,
                limit: MAX_OWN_REPLIES_READ,
                follow_threads: self.interest.follow_threads,
            };
            let answered = own_replies.learn(&self.doors.ledger, &self.doors.answered).await;
            if !answered.is_empty() {
                self.forward(Arrival::AnsweredOnRelay { answered }).await;
            }
        }
        let since = self.since_reaching(oldest_untaken);
        if let Some(oldest) = oldest_untaken.filter(|oldest| *oldest < since) {
            // Housekeeping keeps the horizon below every untaken event it
            // is told of: this is a bug, and re-reading would be worse.
            tracing::warn!(relay = %self.url, oldest = oldest.as_secs(), since = since.as_secs(), "an untaken event lies below the seen horizon; it is not fetched again");
        }
        let subscriptions = self.interest.intake_subscriptions(since);
        self.forward(Arrival::Subscribed {
            relay: self.url.clone(),
            floor: since,
        })
        .await;
        self.subscriptions.sent(&subscriptions);
        if !self.send(subscriptions).await {
            return false;
        }
        tracing::info!(relay = %self.url, since = since.as_secs(), "subscribed to mentions");
        self.follow_all_threads(since).await;
        true
    }

    /// Sends (or replaces) the intake subscriptions; false if one could
    /// not be sent (the connection is gone).
    async fn send(&self, subscriptions: Vec<(SubscriptionId, Filter)>) -> bool {
        for (id, filter) in subscriptions {
            let sent = self
                .relay
                .subscribe_with_id(id, vec![filter], SubscribeOptions::default())
                .await;
            if let Err(error) = sent {
                tracing::warn!(relay = %self.url, %error, "subscribing failed");
                return false;
            }
        }
        true
    }

    /// (Re)subscribes to replies in the threads the bot answered in most
    /// recently, everything since `since` (after a (re)connection or a
    /// refetch). A failure is logged: mentions that tag the bot still
    /// arrive.
    async fn follow_all_threads(&mut self, since: Timestamp) {
        let answered = self.doors.answered.most_recent(MAX_FOLLOWED_THREADS);
        let Some(answered) = logged(&self.url, answered) else {
            return;
        };
        let had_recent = self.followed.has_recent();
        let bulk = self.followed.reset(&answered);
        let filters = self.interest.thread_filters(&bulk);
        if !filters.is_empty() {
            let from_since = filters.into_iter().map(|filter| filter.since(since)).collect();
            self.send_threads(THREADS_SUBSCRIPTION_ID, from_since).await;
        }
        if had_recent {
            self.close_recent_threads().await;
        }
    }

    /// Follows the threads answered in since the last look, live only, and
    /// reads what they hold once (`followed_threads` says through which
    /// subscription). The threads followed already are not asked for again:
    /// replaying them made the relay resend (and the SDK parse and verify)
    /// all their recent events per answer, 2.4 M instructions per mention
    /// (BENCHMARKS §8).
    async fn follow_new_threads(&mut self) {
        let threads = &self.doors.answered;
        let lately = threads.answered_after(self.followed.read_after(), MAX_FOLLOWED_THREADS);
        let Some(lately) = logged(&self.url, lately) else {
            return;
        };
        let renewal = self.followed.renew(&lately, || {
            logged(&self.url, threads.most_recent(MAX_FOLLOWED_THREADS))
        });
        let (subscription, roots, new) = match renewal {
            Renewal::Unchanged => return,
            Renewal::Recent { recent, new } => (RECENT_THREADS_SUBSCRIPTION_ID, recent, new),
            Renewal::Folded { bulk, new } => (THREADS_SUBSCRIPTION_ID, bulk, new),
        };
        // `limit: 0`: nothing stored, only what comes from now on.
        let live = self.interest.thread_filters(&roots);
        if live.is_empty() {
            return;
        }
        self.send_threads(
            subscription,
            live.into_iter().map(|filter| filter.limit(0)).collect(),
        )
        .await;
        if subscription == THREADS_SUBSCRIPTION_ID {
            self.close_recent_threads().await;
        }
        // Live first, then the catch-up: an event in a new thread
        // published in between comes by one of them (twice is a duplicate).
        let catch_up = self.interest.thread_filters(&new);
        if !catch_up.is_empty() {
            let once = SubscribeOptions::default().close_on(Some(
                SubscribeAutoCloseOptions::default().timeout(Some(NEW_THREADS_QUERY_TIMEOUT)),
            ));
            self.new_thread_reads += 1;
            let id = format!("{NEW_THREADS_SUBSCRIPTION_PREFIX}{}", self.new_thread_reads);
            let fetched = self
                .relay
                .subscribe_with_id(
                    SubscriptionId::new(id),
                    catch_up
                        .into_iter()
                        .map(|filter| filter.since(self.since()))
                        .collect::<Vec<_>>(),
                    once,
                )
                .await;
            if let Err(error) = fetched {
                tracing::warn!(relay = %self.url, %error, "cannot read the newly answered threads");
            }
        }
        tracing::debug!(relay = %self.url, subscription, threads = roots.len(), "following the answered threads");
    }

    /// Closes the recent thread subscription once the bulk covers its
    /// roots. A failure only leaves a duplicate subscription behind.
    async fn close_recent_threads(&self) {
        let id = SubscriptionId::new(RECENT_THREADS_SUBSCRIPTION_ID);
        if let Err(error) = self.relay.unsubscribe(&id).await {
            tracing::debug!(relay = %self.url, %error, "cannot close the recent thread subscription");
        }
    }

    /// Sends (or replaces) the live thread subscription `id`.
    async fn send_threads(&self, id: &str, filters: Vec<Filter>) {
        let subscribed = self
            .relay
            .subscribe_with_id(SubscriptionId::new(id), filters, SubscribeOptions::default())
            .await;
        if let Err(error) = subscribed {
            tracing::warn!(relay = %self.url, %error, "cannot follow the answered threads");
        }
    }

    fn since(&self) -> Timestamp {
        self.since_reaching(None)
    }

    /// The `since` of a subscription made now (see [`subscription_since`]).
    fn since_reaching(&self, oldest_untaken: Option<Timestamp>) -> Timestamp {
        let watermark = self.doors.watermarks.of(&self.url).unwrap_or_else(|error| {
            tracing::error!(relay = %self.url, %error, "cannot read the watermark; using the first-start window");
            None
        });
        // Housekeeping keeps the horizon below the watermark's reach:
        // without it, nothing older than that is asked for.
        let (oldest_untaken, seen_horizon) = match self.doors.watermarks.seen_horizon() {
            Ok(horizon) => (oldest_untaken, horizon),
            Err(error) => {
                tracing::error!(relay = %self.url, %error, "cannot read the seen horizon; fetching nothing older than the watermark");
                (None, None)
            }
        };
        let since = subscription_since(
            watermark,
            oldest_untaken,
            seen_horizon,
            Timestamp::now().as_secs(),
        );
        Timestamp::from_secs(since)
    }

    /// Every intake subscription sent is live or refused: the intake is
    /// caught up with this relay, and the link listens.
    async fn delivered_stored(&self) {
        self.status.listening.send_replace(true);
        self.forward(Arrival::CaughtUp {
            relay: self.url.clone(),
            at: Timestamp::now(),
        })
        .await;
    }

    async fn forward(&self, arrival: Arrival) {
        // The intake only stops at shutdown; a send error then is expected.
        let _ = self.arrivals.send(arrival).await;
    }
}

/// The `since` of a subscription made at `now` on a relay with this stored
/// watermark, reaching back to `oldest_untaken` (see [`refetch_since`])
/// when that is earlier: the oldest `created_at` it can deliver. Never
/// below `seen_horizon`: seen entries of events dated before it may be
/// pruned, and re-reading them would answer them twice. Housekeeping reads
/// the same reach when it decides what to prune, so that the two agree.
pub(crate) fn subscription_since(
    watermark: Option<i64>,
    oldest_untaken: Option<Timestamp>,
    seen_horizon: Option<i64>,
    now: u64,
) -> u64 {
    let watermark = watermark.map_or_else(
        || now.saturating_sub(FIRST_START_LOOKBACK.as_secs()),
        |watermark| u64::try_from(watermark).unwrap_or(0),
    );
    let since = watermark.min(now).saturating_sub(SINCE_SKEW.as_secs());
    let since = oldest_untaken.map_or(since, |oldest| since.min(oldest.as_secs()));
    let horizon = seen_horizon.map_or(0, |horizon| u64::try_from(horizon).unwrap_or(0));
    since.max(horizon.min(now))
}

/// The `since` from which the mention subscription delivers `event` again:
/// its own date, or for a gift wrap, whose filter reaches
/// [`GIFT_WRAP_BACKDATE`] below the subscription's `since`, that much
/// later. A wrap dated back at random (NIP-59) thus holds a watermark or
/// asks for a refetch where its rumor's date would, not two days below it:
/// a stranger's DM cannot make the link re-read two days of mentions.
pub(crate) fn refetch_since(event: &Event) -> Timestamp {
    if event.kind == Kind::GiftWrap {
        event.created_at + GIFT_WRAP_BACKDATE
    } else {
        event.created_at
    }
}

/// The subscriptions whose frames go to the link (and their events to the
/// intake).
fn forwarded() -> Vec<Taken> {
    FORWARDED_SUBSCRIPTIONS
        .iter()
        .map(|id| Taken::Exactly((*id).to_owned()))
        .chain([Taken::StartingWith(NEW_THREADS_SUBSCRIPTION_PREFIX.to_owned())])
        .collect()
}

/// The answered threads `read`, or `None` (logged) when the store failed.
fn logged(relay: &RelayUrl, read: crate::state::store::Result<Vec<Answered>>) -> Option<Vec<Answered>> {
    match read {
        Ok(threads) => Some(threads),
        Err(error) => {
            tracing::warn!(%relay, %error, "cannot read the answered threads");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_000_000;
    const SKEW: u64 = SINCE_SKEW.as_secs();

    #[test]
    fn a_subscription_reaches_back_to_the_oldest_untaken_event_but_never_below_the_seen_horizon() {
        let watermark = Some((NOW - 100) as i64);
        let since = |untaken: Option<u64>, horizon: Option<i64>| {
            subscription_since(watermark, untaken.map(Timestamp::from_secs), horizon, NOW)
        };
        assert_eq!(since(None, None), NOW - 100 - SKEW);
        assert_eq!(
            since(Some(NOW - 50), None),
            NOW - 100 - SKEW,
            "later than the watermark"
        );
        assert_eq!(since(Some(NOW - 7_200), None), NOW - 7_200);
        assert_eq!(
            since(Some(NOW - 7_200), Some((NOW - 3_600) as i64)),
            NOW - 3_600,
            "held at the horizon"
        );
        assert_eq!(
            subscription_since(None, None, Some((NOW + 10) as i64), NOW),
            NOW,
            "never in the future"
        );
    }

    #[test]
    fn a_gift_wrap_is_fetched_again_from_where_its_filter_reaches_it() {
        use nostr_sdk::prelude::{EventBuilder, Keys};
        let (keys, bot) = (Keys::generate(), Keys::generate().public_key());
        let two_hours_ago = Timestamp::from_secs(NOW - 7_200);
        let sign = |kind| {
            EventBuilder::new(kind, "x")
                .tag(nostr_sdk::prelude::Tag::public_key(bot))
                .custom_created_at(two_hours_ago)
                .sign_with_keys(&keys)
                .expect("sign")
        };
        let interest = Interest {
            bot,
            kinds: vec![Kind::Custom(9), Kind::GiftWrap],
            follow_threads: false,
            groups: Vec::new(),
        };
        let wrap = sign(Kind::GiftWrap);
        let since = refetch_since(&wrap);
        assert_eq!(since.as_secs(), NOW - 7_200 + GIFT_WRAP_BACKDATE.as_secs());
        let (id, dms) = &interest.intake_subscriptions(since)[1];
        assert_eq!(id.as_str(), DM_SUBSCRIPTION_ID);
        assert!(
            dms.match_event(&wrap, nostr_sdk::prelude::MatchEventOptions::new()),
            "the wrap's filter still delivers it"
        );
        assert_eq!(refetch_since(&sign(Kind::Custom(9))), two_hours_ago);
    }

    #[test]
    fn events_of_the_mention_thread_and_new_thread_subscriptions_are_forwarded_and_no_others() {
        let forwarded = forwarded();
        let is_forwarded = |id: &str| forwarded.iter().any(|taken| taken.takes(id));
        for id in [
            SUBSCRIPTION_ID,
            DM_SUBSCRIPTION_ID,
            GROUPS_SUBSCRIPTION_ID,
            THREADS_SUBSCRIPTION_ID,
            RECENT_THREADS_SUBSCRIPTION_ID,
            "acp-bridge-threads-new-1",
            "acp-bridge-threads-new-42",
        ] {
            assert!(is_forwarded(id), "{id}");
        }
        // The SDK's own ids (profile lookups), the one-shot reads of the
        // thread context.
        assert!(!is_forwarded("a1b2c3d4e5f60718"));
        assert!(!is_forwarded("acp-bridge-threads-newer"));
        assert!(!is_forwarded("acp-bridge-read-1"));
    }
}
