//! Honest waiting: the author of a mention that waits for its turn longer
//! than `--wait-notice-after` is told, once, why and for how long
//! ([`Holdup`]), so that silence never looks like a lost message.
//!
//! Owns the vocabulary of waiting and what is its own alone: a mention's
//! [`Wait`] (since when, whether told), the [`DueIndex`] of when waits are
//! due a notice, and the notice wording (the daemon's heart keeps the
//! global budget of notices). It
//! owns no mention: the conversations (`crate::conversations`) carry each
//! mention's [`Wait`] on its entry, keep the due index in step with their
//! entries and say why a mention waits; the heart sends the notices. Has no
//! clock: time is passed in, and the heart's one timer wakes at the index's
//! next due time.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use nostr::prelude::EventId;

use crate::mention::ConversationKey;

/// What a conversation's lease waits for to free, parked by the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaited {
    /// A live session: `--max-live-sessions` are live and busy.
    LiveSession,
    /// An agent slot (`--agent-uids`): every agent serves another
    /// conversation, which is busy.
    AgentSlot,
}

/// Why a mention has not got its turn yet, from the heart's real state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holdup {
    /// Every turn slot is busy; `ahead` conversations go before this one.
    Capacity {
        ahead: usize,
        running: usize,
        capacity: usize,
    },
    /// This conversation's own turn is in flight; the mention goes next.
    TurnInFlight,
    /// The conversation's last attempt failed; it is retried after a backoff.
    BackingOff { retry_in: Duration, failure: String },
    /// The mention's turn waits for its agent to start and open a session,
    /// perhaps again after the conversation's last attempt failed.
    AgentStarting { after_failure: Option<String> },
    /// The mention's turn needs a live session, and every one the pool may
    /// keep (`--max-live-sessions`) has a turn running.
    LiveSessionsBusy,
    /// The mention's turn needs an agent of its own (`--agent-uids`), and
    /// every agent slot serves another conversation that has a turn running.
    AgentSlotsBusy,
}

impl Holdup {
    /// A short name for logs and tests.
    pub fn label(&self) -> &'static str {
        match self {
            Holdup::Capacity { .. } => "capacity",
            Holdup::TurnInFlight => "turn_in_flight",
            Holdup::BackingOff { .. } => "backing_off",
            Holdup::AgentStarting { .. } => "agent_starting",
            Holdup::LiveSessionsBusy => "live_sessions_busy",
            Holdup::AgentSlotsBusy => "agent_slots_busy",
        }
    }

    /// What the author is told.
    pub fn describe(&self) -> String {
        match self {
            Holdup::Capacity {
                ahead: 0,
                running,
                capacity,
            } => format!(
                "Queued: yours is next in line ({running} of {capacity} agent turns busy). I will answer as soon as one ends."
            ),
            Holdup::Capacity {
                ahead,
                running,
                capacity,
            } => format!(
                "Queued: {ahead} turn(s) ahead of you ({running} of {capacity} agent turns busy). I will answer when yours comes."
            ),
            Holdup::TurnInFlight => {
                "Queued: waiting for this conversation's turn in flight to finish; yours comes right after."
                    .to_owned()
            }
            Holdup::BackingOff { retry_in, failure } => format!(
                "Waiting: the last attempt failed ({failure}); retrying in {} s.",
                retry_in.as_secs().max(1)
            ),
            Holdup::AgentStarting { after_failure: None } => {
                "Waiting: the agent is starting, which can take a while the first time; your message goes to it as soon as it is up.".to_owned()
            }
            Holdup::AgentStarting {
                after_failure: Some(failure),
            } => format!("Waiting: the last attempt failed ({failure}); trying again, the agent is starting."),
            Holdup::LiveSessionsBusy => {
                "Queued: every live agent session is busy with another conversation; yours opens as soon as one frees.".to_owned()
            }
            Holdup::AgentSlotsBusy => {
                "Queued: every agent slot is serving another conversation; yours starts as soon as one frees.".to_owned()
            }
        }
    }

    /// This holdup, told more precisely when the pool says the
    /// conversation's turn waits for a live session or an agent slot to
    /// free rather than for its agent to start: the pool parks such a
    /// lease, so the heart sees only a turn whose agent is not up yet.
    pub fn for_a_lease_that(self, awaits: Option<Awaited>) -> Holdup {
        match (self, awaits) {
            (Holdup::AgentStarting { .. }, Some(Awaited::LiveSession)) => Holdup::LiveSessionsBusy,
            (Holdup::AgentStarting { .. }, Some(Awaited::AgentSlot)) => Holdup::AgentSlotsBusy,
            (other, _) => other,
        }
    }
}

/// How long a mention has waited for its turn and whether its author was
/// told why. It rides on the mention's entry wherever the mention waits (its
/// conversation's queue, a turn whose agent is starting) and through a
/// failed turn back to the queue, so a retried mention keeps its first
/// queueing time and is told at most once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// When it first entered a queue: the wait counts from here.
    pub since: Instant,
    pub told: bool,
}

/// When each waiting mention not told yet is due its notice: `(due, key,
/// id)`, earliest first. The conversations keep it in step with their
/// entries; it knows nothing of them.
#[derive(Debug)]
pub struct DueIndex {
    /// `--wait-notice-after`; `None`: waiting notices are off, nothing waits.
    after: Option<Duration>,
    due: BTreeSet<(Instant, ConversationKey, EventId)>,
}

impl DueIndex {
    pub fn new(after: Option<Duration>) -> Self {
        DueIndex {
            after,
            due: BTreeSet::new(),
        }
    }

    /// The wait of a mention that starts waiting `now` (`None`: notices off).
    pub fn start(&self, now: Instant) -> Option<Wait> {
        self.after.map(|_| Wait {
            since: now,
            told: false,
        })
    }

    /// `id` waits in the conversation of `key`: due unless told already.
    pub fn insert(&mut self, key: &ConversationKey, id: EventId, wait: &Wait) {
        if let Some(entry) = self.entry(key, id, wait) {
            self.due.insert(entry);
        }
    }

    /// `id` waits no more (its agent is up, it is done or dropped).
    pub fn remove(&mut self, key: &ConversationKey, id: EventId, wait: &Wait) {
        if let Some(entry) = self.entry(key, id, wait) {
            self.due.remove(&entry);
        }
    }

    /// `id` counts as told: it is never due again.
    pub fn tell(&mut self, key: &ConversationKey, id: EventId, wait: &mut Wait) {
        self.remove(key, id, wait);
        wait.told = true;
    }

    /// When the next mention is due a notice.
    pub fn next(&self) -> Option<Instant> {
        self.due.first().map(|(at, _, _)| *at)
    }

    /// Takes the mentions due by `now`, earliest first.
    pub fn pop_due(&mut self, now: Instant) -> Vec<(ConversationKey, EventId)> {
        let mut due = Vec::new();
        while self.due.first().is_some_and(|(at, _, _)| *at <= now) {
            if let Some((_, key, id)) = self.due.pop_first() {
                due.push((key, id));
            }
        }
        due
    }

    fn entry(
        &self,
        key: &ConversationKey,
        id: EventId,
        wait: &Wait,
    ) -> Option<(Instant, ConversationKey, EventId)> {
        let after = self.after.filter(|_| !wait.told)?;
        Some((wait.since + after, key.clone(), id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mention::test_mention;

    const AFTER: Duration = Duration::from_secs(5);

    #[test]
    fn a_wait_is_due_once_from_its_start_and_never_when_off() {
        let now = Instant::now();
        let mention = test_mention("a", 1, "hi", false);
        let (key, id) = (mention.conversation, mention.event_id);
        let mut index = DueIndex::new(Some(AFTER));
        let mut wait = index.start(now).expect("notices on");
        index.insert(&key, id, &wait);
        assert_eq!(index.next(), Some(now + AFTER));
        assert!(index.pop_due(now).is_empty(), "not due yet");
        index.tell(&key, id, &mut wait);
        index.insert(&key, id, &wait);
        assert_eq!(index.next(), None, "a told wait is never due again");
        let off = DueIndex::new(None);
        assert_eq!(off.start(now), None);
    }
    #[test]
    fn a_parked_lease_is_told_what_it_waits_for_and_not_that_its_agent_starts() {
        let starting = Holdup::AgentStarting { after_failure: None };
        let told = starting.clone().for_a_lease_that(Some(Awaited::LiveSession));
        assert_eq!(told, Holdup::LiveSessionsBusy);
        assert!(told.describe().contains("every live agent session is busy"));
        let told = starting.clone().for_a_lease_that(Some(Awaited::AgentSlot));
        assert_eq!(told, Holdup::AgentSlotsBusy);
        assert!(
            told.describe()
                .contains("every agent slot is serving another conversation")
        );
        assert_eq!(starting.clone().for_a_lease_that(None), starting);
        assert_eq!(
            Holdup::TurnInFlight.for_a_lease_that(Some(Awaited::AgentSlot)),
            Holdup::TurnInFlight,
            "only a turn waiting for its lease waits for a session"
        );
    }
}
