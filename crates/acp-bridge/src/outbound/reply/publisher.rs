//! Publishes the outbox and the reactions: every stored, signed reply goes
//! where [`routes`](crate::outbound::routes) sends it (the recipient's DM inbox, the
//! relay its mention came from, every relay for entries that know neither;
//! and best effort to the mentioner's read relays) until its primary
//! destination accepts it (`OK true`), and only then is it marked sent.
//!
//! A relay's `OK false` is read by its NIP-01 prefix ([`Verdict`]): a
//! refusal that would hold on every attempt (`blocked:`, `invalid:`, `pow:`,
//! `restricted:`, `unsupported:`) marks the entry refused, counted in
//! `acp_bridge_replies_failed_total{reason}` and shown by `!status`, and it
//! is never published again; anything else (`rate-limited:`, `error:`,
//! `auth-required:`, no answer, a lost connection, a message with no prefix
//! this build knows) is retried with backoff. Each entry keeps its own
//! attempts and due time in the store and up to
//! [`MAX_PUBLISHES_IN_FLIGHT`] are published at once, so an entry that
//! keeps failing never holds back a newer one.
//!
//! After a restart the same signed event (same id) is published again, so
//! relays deduplicate it (`duplicate:` counts as accepted) and a reply is
//! never posted twice. Publishing is idempotent by construction; the
//! publisher can therefore run at any time, and [`Publisher::flush`] runs
//! once more at shutdown to send what is left.
//!
//! Reactions are courtesy, not state: [`Outlet::react`] queues them in
//! memory (the oldest dropped and counted when the queue is full) so that
//! whoever reacts never waits for a relay, and a lost one is not retried.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use nostr_sdk::prelude::{Client, Event, EventId, JsonUtil, MachineReadablePrefix, Output, RelayUrl};
use tokio::sync::Notify;
use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::base::backoff::Backoff;
use crate::outbound::routes::{EXTRA_ATTEMPTS, EXTRA_RETRY_DELAY, Primary, Routes};
use crate::state::store::{Outbox, OutboxEntry, sql_now, sql_seconds};
use crate::telemetry::metrics;

/// Replies being published at once; a newer one starts while older ones
/// wait for a slow relay, up to this many.
pub(crate) const MAX_PUBLISHES_IN_FLIGHT: usize = 16;
/// Reactions being published at once.
const MAX_REACTIONS_IN_FLIGHT: usize = 8;
/// Reactions waiting to be published; past this the oldest is dropped.
pub(crate) const REACTION_QUEUE_CAPACITY: usize = 256;
/// Re-check the outbox this often even without a wake-up (a relay that
/// came back, an entry that failed before).
const OUTBOX_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// Backoff of one entry's retries (whole seconds: the store keeps seconds).
const RETRY_BACKOFF_MIN: Duration = Duration::from_secs(1);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// What the replier hands the publisher: the wake-up for stored events and
/// the reactions to send. Cloned into both.
#[derive(Debug, Clone, Default)]
pub struct Outlet {
    wake: Arc<Notify>,
    reactions: Arc<Mutex<VecDeque<Reaction>>>,
}

/// A signed reaction and the relay it goes to (`None`: every relay).
#[derive(Debug)]
struct Reaction {
    event: Event,
    to: Option<RelayUrl>,
}

impl Outlet {
    /// Tells the publisher that the outbox has a new entry.
    pub fn stored(&self) {
        self.wake.notify_one();
    }

    /// Queues a signed reaction for `to` (`None`: every relay) and returns
    /// at once. When the queue is full, the oldest reaction is dropped.
    pub fn react(&self, event: Event, to: Option<RelayUrl>) {
        {
            let mut queue = self
                .reactions
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if queue.len() >= REACTION_QUEUE_CAPACITY
                && let Some(dropped) = queue.pop_front()
            {
                metrics::reaction_dropped();
                tracing::debug!(event_id = %dropped.event.id, "reaction queue full; the oldest reaction dropped");
            }
            queue.push_back(Reaction { event, to });
        }
        self.wake.notify_one();
    }

    fn next_reaction(&self) -> Option<Reaction> {
        let mut queue = self
            .reactions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        queue.pop_front()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Publisher {
    client: Client,
    outbox: Outbox,
    outlet: Outlet,
    routes: Arc<Routes>,
}

impl Publisher {
    /// Publishes through `client` (the listening one) to the bot's relays,
    /// and through `routes` to the readers' relays.
    pub(crate) fn new(client: Client, outbox: Outbox, outlet: Outlet, routes: Routes) -> Self {
        Publisher {
            client,
            outbox,
            outlet,
            routes: Arc::new(routes),
        }
    }

    /// Closes the connections to other people's relays (at shutdown, after
    /// the last flush).
    pub(crate) async fn close(&self) {
        self.routes.outbound.shutdown().await;
    }

    /// Runs until `stop` is cancelled. Publishes still in flight then are
    /// abandoned (their entries stay due) for [`Publisher::flush`].
    pub(crate) async fn run(&self, stop: CancellationToken) {
        let mut replies: JoinSet<Option<String>> = JoinSet::new();
        let mut in_flight: HashMap<Id, String> = HashMap::new();
        let mut reactions: JoinSet<()> = JoinSet::new();
        loop {
            self.routes.outbound.close_idle().await;
            self.start_due(&mut replies, &mut in_flight);
            self.start_reactions(&mut reactions);
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.outlet.wake.notified() => {}
                Some(done) = replies.join_next_with_id() => {
                    // Every publish that ended meanwhile, so their OKs are
                    // marked in one transaction.
                    let mut sent = Vec::new();
                    let mut next = Some(done);
                    while let Some(done) = next {
                        let (id, accepted) = done.map_or_else(|error| (error.id(), None), |(id, accepted)| (id, accepted));
                        in_flight.remove(&id);
                        sent.extend(accepted);
                        next = replies.try_join_next_with_id();
                    }
                    self.mark_sent(&sent);
                }
                Some(_) = reactions.join_next() => {}
                () = tokio::time::sleep(self.pause()) => {}
            }
        }
    }

    /// Publishes every entry not yet sent or refused once, due or not, a
    /// few at a time, and the reactions still queued (a turn that ended
    /// just before the stop). Returns true when no entry is left to
    /// publish.
    pub(crate) async fn flush(&self) -> bool {
        let entries = match self.outbox.due(i64::MAX) {
            Ok(entries) => entries,
            Err(error) => {
                tracing::error!(%error, "cannot read the outbox");
                return false;
            }
        };
        let replies = futures_util::stream::iter(entries)
            .map(|entry| self.publish(entry))
            .buffer_unordered(MAX_PUBLISHES_IN_FLIGHT)
            .filter_map(std::future::ready)
            .collect::<Vec<String>>();
        let queued: Vec<Reaction> = std::iter::from_fn(|| self.outlet.next_reaction()).collect();
        let reactions = futures_util::stream::iter(queued)
            .map(|reaction| self.publish_reaction(reaction))
            .buffer_unordered(MAX_REACTIONS_IN_FLIGHT)
            .collect::<Vec<()>>();
        let (sent, _) = tokio::join!(replies, reactions);
        self.mark_sent(&sent);
        matches!(self.outbox.next_due(), Ok(None))
    }

    /// Starts publishing the due entries not in flight yet, within the bound.
    fn start_due(&self, replies: &mut JoinSet<Option<String>>, in_flight: &mut HashMap<Id, String>) {
        let room = MAX_PUBLISHES_IN_FLIGHT.saturating_sub(replies.len());
        if room == 0 {
            return;
        }
        let due = match self.outbox.due(sql_now()) {
            Ok(due) => due,
            Err(error) => return tracing::error!(%error, "cannot read the outbox"),
        };
        let fresh: Vec<OutboxEntry> = due
            .into_iter()
            .filter(|entry| !in_flight.values().any(|id| *id == entry.event_id))
            .take(room)
            .collect();
        for entry in fresh {
            let event_id = entry.event_id.clone();
            let publisher = self.clone();
            let task = replies.spawn(async move { publisher.publish(entry).await });
            in_flight.insert(task.id(), event_id);
        }
    }

    fn start_reactions(&self, reactions: &mut JoinSet<()>) {
        while reactions.len() < MAX_REACTIONS_IN_FLIGHT {
            let Some(reaction) = self.outlet.next_reaction() else {
                return;
            };
            let publisher = self.clone();
            reactions.spawn(async move { publisher.publish_reaction(reaction).await });
        }
    }

    /// One attempt at one reaction; a failure is only logged.
    async fn publish_reaction(&self, reaction: Reaction) {
        let sent = self.send(&reaction.event, reaction.to.as_ref()).await;
        match Verdict::of(&sent) {
            Verdict::Accepted => tracing::debug!(event_id = %reaction.event.id, "reaction published"),
            refused_or_failed => {
                tracing::debug!(event_id = %reaction.event.id, ?refused_or_failed, "reaction not published")
            }
        }
    }

    /// How long to wait before looking at the outbox again unwoken: until
    /// the next entry is due, at most [`OUTBOX_POLL_INTERVAL`]. An entry
    /// already due is in flight or waits for room, and a finished publish
    /// wakes the loop.
    fn pause(&self) -> Duration {
        match self.outbox.next_due() {
            Ok(Some(due)) if due > sql_now() => {
                let wait = u64::try_from(due - sql_now()).unwrap_or(0);
                Duration::from_secs(wait).min(OUTBOX_POLL_INTERVAL)
            }
            _ => OUTBOX_POLL_INTERVAL,
        }
    }

    /// Records the relays' OKs for `sent` in one transaction.
    fn mark_sent(&self, sent: &[String]) {
        if sent.is_empty() {
            return;
        }
        let ids: Vec<&str> = sent.iter().map(String::as_str).collect();
        if let Err(error) = self.outbox.mark_sent(&ids, sql_now()) {
            tracing::error!(%error, replies = sent.len(), "cannot mark replies sent (they may be published again, same ids)");
        }
    }

    /// One attempt at one entry. A failure or refusal is recorded in the
    /// store here; an acceptance is returned (the entry's id) for the caller
    /// to mark with the others that end at the same time.
    async fn publish(&self, entry: OutboxEntry) -> Option<String> {
        let event_id = entry.event_id.as_str();
        let event = match Event::from_json(&entry.json) {
            Ok(event) => event,
            Err(error) => {
                // Cannot happen for what we stored; never retry it forever.
                tracing::error!(%event_id, %error, "outbox entry is not an event; it is not published");
                self.refused(event_id, "malformed", &error.to_string());
                return None;
            }
        };
        let to = entry
            .relay_hint
            .as_deref()
            .and_then(|url| RelayUrl::parse(url).ok());
        let route = self.routes.route(&event, to).await;
        tracing::debug!(%event_id, attempt = entry.attempts + 1, relay = %route.primary, extras = ?route.extras, "publishing a reply");
        let (verdict, ()) = tokio::join!(
            self.send_primary(&event, &route.primary),
            self.send_extras(&event, &route.extras)
        );
        match verdict {
            Verdict::Accepted => {
                tracing::debug!(%event_id, relay = %route.primary, "published");
                return Some(entry.event_id);
            }
            Verdict::Refused { reason, message } => self.refused(event_id, reason, &message),
            Verdict::Retry(why) => {
                let delay = Backoff::after(RETRY_BACKOFF_MIN, RETRY_BACKOFF_MAX, entry.attempts).next_delay();
                let delay_secs = delay.as_secs().max(1);
                tracing::warn!(%event_id, %why, retry_in_secs = delay_secs, "no relay accepted a reply; will retry");
                let due = sql_now().saturating_add(sql_seconds(delay_secs));
                if let Err(error) = self.outbox.retry_at(event_id, due) {
                    tracing::error!(%event_id, %error, "cannot record a failed publish");
                }
            }
        }
        None
    }

    fn refused(&self, event_id: &str, reason: &'static str, message: &str) {
        metrics::reply_failed(reason);
        tracing::warn!(%event_id, reason, relay_said = %message, "a relay refused a reply for good; it is not published again");
        if let Err(error) = self.outbox.mark_refused(event_id, message, sql_now()) {
            tracing::error!(%event_id, %error, "cannot record a refused reply");
        }
    }

    /// Sends to the primary destination of a route and judges the answers.
    async fn send_primary(&self, event: &Event, primary: &Primary) -> Verdict {
        match primary {
            Primary::Origin(origin) => Verdict::of(&self.send(event, origin.as_ref()).await),
            Primary::Relays(urls) => Verdict::of_output(&self.send_to_relays(event, urls).await),
        }
    }

    /// Sends to each extra destination (a reader's relay), each up to
    /// [`EXTRA_ATTEMPTS`] times until it accepts or refuses for good; what
    /// happens there never decides the entry's fate.
    async fn send_extras(&self, event: &Event, extras: &[RelayUrl]) {
        let each = extras.iter().map(|url| async move {
            for attempt in 1..=EXTRA_ATTEMPTS {
                let output = self.send_to_relays(event, std::slice::from_ref(url)).await;
                match Verdict::of_output(&output) {
                    Verdict::Accepted => {
                        metrics::reader_relay_delivery("accepted");
                        return tracing::debug!(event_id = %event.id, relay = %url, "published to a reader's relay");
                    }
                    Verdict::Refused { message, .. } => {
                        metrics::reader_relay_delivery("refused");
                        return tracing::debug!(event_id = %event.id, relay = %url, relay_said = %message, "a reader's relay refused a reply");
                    }
                    Verdict::Retry(why) if attempt < EXTRA_ATTEMPTS => {
                        tracing::debug!(event_id = %event.id, relay = %url, %why, "a reader's relay did not take a reply; trying again");
                        tokio::time::sleep(EXTRA_RETRY_DELAY).await;
                    }
                    Verdict::Retry(why) => {
                        metrics::reader_relay_delivery("failed");
                        tracing::debug!(event_id = %event.id, relay = %url, %why, "a reader's relay did not take a reply; given up until the entry is published again");
                    }
                }
            }
        });
        futures_util::future::join_all(each).await;
    }

    /// Sends to `urls`: the bot's own through the listening client, the
    /// others through the pooled connections to other people's relays.
    /// A relay that cannot be reached is a failure in the output.
    async fn send_to_relays(&self, event: &Event, urls: &[RelayUrl]) -> Output<EventId> {
        let (mut own, mut others) = (Vec::new(), Vec::new());
        for url in urls {
            match self.client.relay(url).await {
                Ok(_) => own.push(url.clone()),
                Err(_) => others.push(url.clone()),
            }
        }
        let own_sent = async {
            match own.is_empty() {
                true => Ok(None),
                false => self.client.send_event_to(own.clone(), event).await.map(Some),
            }
        };
        let others_sent = async {
            match others.is_empty() {
                true => Ok(None),
                false => self.routes.outbound.send_event_to(&others, event).await.map(Some),
            }
        };
        let (own_sent, others_sent) = tokio::join!(own_sent, others_sent);
        let mut output = Output {
            val: event.id,
            success: Default::default(),
            failed: HashMap::new(),
        };
        let mut merge = |sent: Result<Option<Output<EventId>>, String>, urls: &[RelayUrl]| match sent {
            Ok(Some(sent)) => {
                output.success.extend(sent.success);
                output.failed.extend(sent.failed);
            }
            Ok(None) => {}
            Err(error) => output
                .failed
                .extend(urls.iter().map(|url| (url.clone(), error.clone()))),
        };
        merge(own_sent.map_err(|error| error.to_string()), &own);
        merge(others_sent.map_err(|error| error.to_string()), &others);
        output
    }

    /// Sends to `to` when it is one of the configured relays, otherwise
    /// (no origin known, or a relay no longer configured) to every relay.
    async fn send(
        &self,
        event: &Event,
        to: Option<&RelayUrl>,
    ) -> Result<Output<EventId>, nostr_sdk::client::Error> {
        match to {
            Some(url) if self.client.relay(url).await.is_ok() => {
                self.client.send_event_to([url], event).await
            }
            Some(url) => {
                tracing::debug!(event_id = %event.id, relay = %url, "the mention's relay is not one of the bot's relays (no longer configured, or a DM inbox only); publishing to every relay");
                self.client.send_event(event).await
            }
            None => self.client.send_event(event).await,
        }
    }
}

/// `!status`'s words for the replies relays refused, empty when none was;
/// the last relay's reason only `with_reason` (the owner's DM).
pub(crate) fn refusals_text(outbox: &Outbox, with_reason: bool) -> String {
    match outbox.refusals() {
        Ok(refusals) if refusals.count > 0 => {
            let reason = match (with_reason, refusals.last_reason.as_deref()) {
                (false, _) => String::new(),
                (true, reason) => format!(" (last: {})", reason.unwrap_or("no reason given")),
            };
            format!(
                " Replies refused by the relays (not sent, not retried): {}{reason}.",
                refusals.count
            )
        }
        Ok(_) => String::new(),
        Err(error) => {
            tracing::error!(%error, "cannot read the outbox refusals");
            String::new()
        }
    }
}

/// What one attempt at publishing an event came to.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// A relay said OK (or `duplicate:`: it has the event already).
    Accepted,
    /// Every relay that answered refused it for good: `reason` is the
    /// NIP-01 prefix (the metric's label), `message` the relay's words.
    Refused { reason: &'static str, message: String },
    /// Nothing final: rate limits, relay errors, timeouts, lost
    /// connections. Retried with backoff.
    Retry(String),
}

impl Verdict {
    fn of<E: std::fmt::Display>(sent: &Result<Output<EventId>, E>) -> Verdict {
        match sent {
            Ok(output) => Verdict::of_output(output),
            Err(error) => Verdict::Retry(error.to_string()),
        }
    }

    fn of_output(output: &Output<EventId>) -> Verdict {
        match output.success.is_empty() {
            false => Verdict::Accepted,
            true => Verdict::of_failures(output.failed.values().map(String::as_str)),
        }
    }

    /// Reads the relays' messages (and the SDK's own, for relays that gave
    /// no answer) when none accepted the event.
    fn of_failures<'a>(messages: impl IntoIterator<Item = &'a str>) -> Verdict {
        let mut refusal = None;
        let mut transient = Vec::new();
        for message in messages {
            match MachineReadablePrefix::parse(message) {
                Some(MachineReadablePrefix::Duplicate) => return Verdict::Accepted,
                Some(prefix) => match permanent(prefix) {
                    Some(reason) => refusal = refusal.or(Some((reason, message))),
                    None => transient.push(message),
                },
                None => transient.push(message),
            }
        }
        match refusal {
            Some((reason, message)) if transient.is_empty() => Verdict::Refused {
                reason,
                message: message.to_owned(),
            },
            _ if transient.is_empty() => Verdict::Retry("no relay to publish to".to_owned()),
            _ => Verdict::Retry(transient.join("; ")),
        }
    }
}

/// The metric label of a prefix that refuses an event for good, `None` for
/// one that may pass later. `error:` is the relay's own trouble and
/// `auth-required:` passes once the client authenticated (NIP-42), so both
/// are retried.
fn permanent(prefix: MachineReadablePrefix) -> Option<&'static str> {
    match prefix {
        MachineReadablePrefix::Blocked => Some("blocked"),
        MachineReadablePrefix::Invalid => Some("invalid"),
        MachineReadablePrefix::Pow => Some("pow"),
        MachineReadablePrefix::Restricted => Some("restricted"),
        MachineReadablePrefix::Unsupported => Some("unsupported"),
        MachineReadablePrefix::Duplicate
        | MachineReadablePrefix::RateLimited
        | MachineReadablePrefix::Error
        | MachineReadablePrefix::AuthRequired => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(reason: &'static str, message: &str) -> Verdict {
        Verdict::Refused {
            reason,
            message: message.to_owned(),
        }
    }

    #[test]
    fn final_refusals_stop_and_everything_else_is_retried() {
        let of = |messages: &[&str]| Verdict::of_failures(messages.iter().copied());
        assert_eq!(of(&["blocked: no bots"]), refused("blocked", "blocked: no bots"));
        assert_eq!(
            of(&["invalid: too large"]),
            refused("invalid", "invalid: too large")
        );
        assert_eq!(of(&["pow: difficulty 30"]), refused("pow", "pow: difficulty 30"));
        assert_eq!(
            of(&["restricted: members"]),
            refused("restricted", "restricted: members")
        );
        assert_eq!(
            of(&["unsupported: kind"]),
            refused("unsupported", "unsupported: kind")
        );
        assert_eq!(of(&["duplicate: have it"]), Verdict::Accepted);
        for transient in [
            "rate-limited: slow down",
            "error: database busy",
            "auth-required: who are you",
            "timeout",
            "relay not connected",
            "mute: prefix this build does not know",
        ] {
            assert_eq!(
                of(&[transient]),
                Verdict::Retry(transient.to_owned()),
                "{transient}"
            );
        }
        assert!(matches!(of(&[]), Verdict::Retry(_)));
    }

    #[test]
    fn across_relays_one_acceptance_wins_and_one_transient_failure_keeps_it_alive() {
        let of = |messages: &[&str]| Verdict::of_failures(messages.iter().copied());
        assert_eq!(of(&["blocked: no", "duplicate: yes"]), Verdict::Accepted);
        assert_eq!(
            of(&["blocked: no", "timeout"]),
            Verdict::Retry("timeout".to_owned())
        );
        assert_eq!(
            of(&["restricted: a", "blocked: b"]),
            refused("restricted", "restricted: a")
        );
    }

    #[test]
    fn a_full_reaction_queue_drops_its_oldest() {
        let outlet = Outlet::default();
        let keys = nostr_sdk::prelude::Keys::generate();
        let reaction = |n: usize| {
            nostr_sdk::prelude::EventBuilder::text_note(n.to_string())
                .sign_with_keys(&keys)
                .unwrap()
        };
        let first = reaction(0);
        let second = reaction(1);
        outlet.react(first, None);
        outlet.react(second.clone(), None);
        for n in 2..=REACTION_QUEUE_CAPACITY {
            outlet.react(reaction(n), None);
        }
        assert_eq!(outlet.next_reaction().map(|r| r.event.id), Some(second.id));
        let left = std::iter::from_fn(|| outlet.next_reaction()).count();
        assert_eq!(left, REACTION_QUEUE_CAPACITY - 1);
    }
}
