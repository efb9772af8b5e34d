//! Honest waiting: the author of a mention that waits in its conversation's
//! queue longer than `--wait-notice-after` is told, once, why and for how
//! long ([`Holdup`]), so that silence never looks like a lost message.
//!
//! Owns which waiting mentions are due a notice and the global budget of
//! such notices; knows nothing of how the reason is found (the heart asks
//! its conversations) or how the notice is sent. Has no clock: time is
//! passed in, and the heart's one timer wakes it at [`Waiters::next_due`].
//!
//! What counts as waiting: being in a conversation's queue, or in a turn
//! whose agent is still starting (a real agent's first start can take a
//! while), having come with its batch or joined it while it starts. A
//! mention is told at most once however many reasons it waits through (a
//! failed attempt puts it back in the queue, still told). Mentions handed
//! to a live turn as steers never wait here; the owner's mid-turn mentions
//! that queue are steers too and are not tracked.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use nostr_sdk::prelude::EventId;

use crate::mention::{ConversationKey, Mention};
use crate::rate_limit::{Admission, RateLimiter};

/// Waiting notices the whole daemon may send at once: a stranger's flood
/// that queues must not become a flood of notices.
const WAIT_NOTICE_BURST: u32 = 10;
/// One more waiting notice may go out every this long once the burst is spent.
const WAIT_NOTICE_REFILL: Duration = Duration::from_secs(6);

/// Why a mention has not got its turn yet, from the heart's real state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Holdup {
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
}

impl Holdup {
    /// A short name for logs and tests.
    pub(super) fn label(&self) -> &'static str {
        match self {
            Holdup::Capacity { .. } => "capacity",
            Holdup::TurnInFlight => "turn_in_flight",
            Holdup::BackingOff { .. } => "backing_off",
            Holdup::AgentStarting { .. } => "agent_starting",
        }
    }

    /// What the author is told.
    pub(super) fn describe(&self) -> String {
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
        }
    }
}

#[derive(Debug)]
struct Tracked {
    conversation: ConversationKey,
    /// When it first entered a queue: the wait counts from here.
    since: Instant,
    told: bool,
    /// In a queue now (rather than in a turn).
    queued: bool,
}

/// The mentions the heart took for a turn, from their first queueing until
/// they finish, and which of them are due a notice.
#[derive(Debug)]
pub(crate) struct Waiters {
    /// `None`: waiting notices are off.
    after: Option<Duration>,
    tracked: HashMap<EventId, Tracked>,
    /// (due, id) of every queued mention not told yet.
    due: BTreeSet<(Instant, EventId)>,
    /// The batches of turns whose agent is still starting, by conversation.
    leasing: HashMap<ConversationKey, Vec<Mention>>,
    /// Why the conversation's last turn failed, while it is retried.
    failures: HashMap<ConversationKey, String>,
    budget: RateLimiter<()>,
}

impl Waiters {
    pub(super) fn new(after: Option<Duration>) -> Self {
        Waiters {
            after,
            tracked: HashMap::new(),
            due: BTreeSet::new(),
            leasing: HashMap::new(),
            failures: HashMap::new(),
            budget: RateLimiter::new(WAIT_NOTICE_BURST, WAIT_NOTICE_REFILL, 1),
        }
    }

    /// A mention entered its conversation's queue (first time or again
    /// after a failed attempt); the wait counts from its first time.
    pub(super) fn queued(&mut self, id: EventId, conversation: &ConversationKey, now: Instant) {
        let Some(after) = self.after else { return };
        let tracked = self.tracked.entry(id).or_insert_with(|| Tracked {
            conversation: conversation.clone(),
            since: now,
            told: false,
            queued: false,
        });
        if !tracked.told && !tracked.queued {
            tracked.queued = true;
            self.due.insert((tracked.since + after, id));
        }
    }

    /// A mention we track came back to the queue for a retry; others (steers
    /// a turn gives back) are not tracked.
    pub(super) fn requeued(&mut self, id: EventId, now: Instant) {
        if let Some(conversation) = self.tracked.get(&id).map(|t| t.conversation.clone()) {
            self.queued(id, &conversation, now);
        }
    }

    /// A turn took `batch` from the queue; they wait on until its agent is
    /// up ([`Waiters::agent_up`]).
    pub(super) fn leasing(&mut self, conversation: &ConversationKey, batch: &[Mention]) {
        if self.after.is_some() {
            self.leasing.insert(conversation.clone(), batch.to_vec());
        }
    }

    /// `mention` joined the conversation's turn while its agent starts (it
    /// goes with the first prompt): it waits with that batch. Returns
    /// whether the turn is starting; a live turn's steers are not tracked.
    pub(super) fn joined_starting(&mut self, mention: &Mention, now: Instant) -> bool {
        let Some(batch) = self.leasing.get_mut(&mention.conversation) else {
            return false;
        };
        batch.push(mention.clone());
        self.queued(mention.event_id, &mention.conversation, now);
        true
    }

    /// The agent of the conversation's turn is up (or could not be had):
    /// its batch waits no more.
    pub(super) fn agent_up(&mut self, conversation: &ConversationKey) {
        if let Some(batch) = self.leasing.remove(conversation) {
            self.started(batch.iter().map(|mention| mention.event_id));
        }
    }

    /// The conversation's turn ended: retried after `failure`, or not
    /// (`None`).
    pub(super) fn retrying(&mut self, conversation: &ConversationKey, failure: Option<String>) {
        match failure {
            Some(failure) if self.after.is_some() => {
                self.failures.insert(conversation.clone(), failure);
            }
            _ => {
                self.failures.remove(conversation);
            }
        }
    }

    /// A mention of a turn whose agent is still starting, and why it waits.
    pub(super) fn starting(
        &self,
        conversation: &ConversationKey,
        id: &EventId,
    ) -> Option<(Holdup, &Mention)> {
        let mention = self
            .leasing
            .get(conversation)?
            .iter()
            .find(|mention| mention.event_id == *id)?;
        let after_failure = self.failures.get(conversation).cloned();
        Some((Holdup::AgentStarting { after_failure }, mention))
    }

    /// Mentions left the queue for a turn.
    fn started(&mut self, ids: impl IntoIterator<Item = EventId>) {
        for id in ids {
            if let Some(tracked) = self.tracked.get_mut(&id) {
                if tracked.queued && !tracked.told {
                    self.due
                        .remove(&(tracked.since + self.after.unwrap_or_default(), id));
                }
                tracked.queued = false;
            }
        }
    }

    /// Mentions are done (answered, given up, dropped): forgotten.
    pub(super) fn finished(&mut self, ids: impl IntoIterator<Item = EventId>) {
        for id in ids {
            if let Some(tracked) = self.tracked.remove(&id) {
                self.due
                    .remove(&(tracked.since + self.after.unwrap_or_default(), id));
            }
        }
    }

    /// When the next mention is due a notice.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.due.first().map(|(at, _)| *at)
    }

    /// The mentions due a notice by `now`: one per waiting group of a
    /// conversation, its newest due mention. A conversation's mentions
    /// wait in up to two groups, the batch of its turn whose agent is
    /// starting and its queue behind that turn; every mention of a group
    /// counts as told by its one notice (they share a batch, and the
    /// reason), and the other group is told for itself when it is due.
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<(ConversationKey, EventId)> {
        let mut groups: HashMap<(ConversationKey, bool), EventId> = HashMap::new();
        while let Some(&(at, id)) = self.due.first() {
            if at > now {
                break;
            }
            self.due.pop_first();
            if let Some(tracked) = self.tracked.get(&id) {
                let starting = in_starting_batch(&self.leasing, &tracked.conversation, &id);
                groups.insert((tracked.conversation.clone(), starting), id);
            }
        }
        let after = self.after.unwrap_or_default();
        for (id, tracked) in &mut self.tracked {
            let starting = in_starting_batch(&self.leasing, &tracked.conversation, id);
            if tracked.queued
                && !tracked.told
                && groups.contains_key(&(tracked.conversation.clone(), starting))
            {
                tracked.told = true;
                self.due.remove(&(tracked.since + after, *id));
            }
        }
        let mut due: Vec<_> = groups
            .into_iter()
            .map(|((conversation, _), id)| (conversation, id))
            .collect();
        due.sort();
        due
    }

    /// Whether the global budget allows one more notice now.
    pub(super) fn admit(&mut self, now: Instant) -> bool {
        self.budget.admit(&(), now) == Admission::Admitted
    }
}

/// Whether `id` is in the batch of the conversation's turn whose agent is
/// starting.
fn in_starting_batch(
    leasing: &HashMap<ConversationKey, Vec<Mention>>,
    conversation: &ConversationKey,
    id: &EventId,
) -> bool {
    leasing
        .get(conversation)
        .is_some_and(|batch| batch.iter().any(|mention| mention.event_id == *id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mention::test_mention;

    const AFTER: Duration = Duration::from_secs(5);

    fn id_and_key(conversation: &str, n: u64) -> (EventId, ConversationKey) {
        let mention = test_mention(conversation, n, "hi", false);
        (mention.event_id, mention.conversation)
    }

    #[test]
    fn a_mention_that_starts_in_time_is_never_due() {
        let mut waiters = Waiters::new(Some(AFTER));
        let now = Instant::now();
        let (id, key) = id_and_key("a", 1);
        waiters.queued(id, &key, now);
        assert_eq!(waiters.next_due(), Some(now + AFTER));
        waiters.started([id]);
        assert_eq!(waiters.next_due(), None);
        assert!(waiters.take_due(now + AFTER).is_empty());
    }

    #[test]
    fn a_mention_is_told_once_through_retries_and_a_conversation_once_for_its_batch() {
        let mut waiters = Waiters::new(Some(AFTER));
        let now = Instant::now();
        let (first, key) = id_and_key("a", 1);
        let (second, _) = id_and_key("a", 2);
        waiters.queued(first, &key, now);
        waiters.queued(second, &key, now + Duration::from_secs(1));
        assert_eq!(waiters.take_due(now + AFTER), vec![(key.clone(), first)]);
        assert_eq!(
            waiters.next_due(),
            None,
            "the batch's other mention counts as told"
        );
        waiters.started([first, second]);
        waiters.requeued(first, now + AFTER * 2);
        waiters.requeued(second, now + AFTER * 2);
        assert_eq!(
            waiters.next_due(),
            None,
            "told mentions wait silently after a retry"
        );
    }

    #[test]
    fn a_mention_waits_on_while_its_agent_starts_and_the_reason_names_a_failure_retried() {
        let mut waiters = Waiters::new(Some(AFTER));
        let now = Instant::now();
        let mention = test_mention("a", 1, "hi", false);
        let (id, key) = (mention.event_id, mention.conversation.clone());
        waiters.queued(id, &key, now);
        waiters.leasing(&key, std::slice::from_ref(&mention));
        assert_eq!(waiters.next_due(), Some(now + AFTER), "still waiting");
        let (holdup, _) = waiters.starting(&key, &id).expect("starting");
        assert_eq!(holdup, Holdup::AgentStarting { after_failure: None });
        waiters.retrying(&key, Some("the agent failed to start up".to_owned()));
        let (holdup, _) = waiters.starting(&key, &id).expect("starting");
        assert!(
            holdup
                .describe()
                .contains("the last attempt failed (the agent failed to start up)")
        );
        waiters.agent_up(&key);
        assert!(waiters.starting(&key, &id).is_none());
        assert_eq!(waiters.next_due(), None, "the agent is up: no more waiting");
    }

    #[test]
    fn a_retried_mention_keeps_its_first_queueing_time() {
        let mut waiters = Waiters::new(Some(AFTER));
        let now = Instant::now();
        let (id, key) = id_and_key("a", 1);
        waiters.queued(id, &key, now);
        waiters.started([id]);
        waiters.requeued(id, now + Duration::from_secs(3));
        assert_eq!(waiters.next_due(), Some(now + AFTER));
        waiters.finished([id]);
        assert_eq!(waiters.next_due(), None);
        assert!(waiters.tracked.is_empty());
    }

    #[test]
    fn steers_given_back_are_not_tracked_and_off_means_off() {
        let now = Instant::now();
        let (id, key) = id_and_key("a", 1);
        let mut waiters = Waiters::new(Some(AFTER));
        waiters.requeued(id, now);
        assert_eq!(waiters.next_due(), None);
        let mut off = Waiters::new(None);
        off.queued(id, &key, now);
        assert_eq!(off.next_due(), None);
        assert!(off.tracked.is_empty());
    }

    #[test]
    fn the_global_budget_holds_back_a_flood_of_notices() {
        let mut waiters = Waiters::new(Some(AFTER));
        let now = Instant::now();
        let admitted = (0..WAIT_NOTICE_BURST * 3).filter(|_| waiters.admit(now)).count();
        assert_eq!(admitted, WAIT_NOTICE_BURST as usize);
        assert!(waiters.admit(now + WAIT_NOTICE_REFILL));
    }

    #[test]
    fn a_mention_that_joins_a_starting_turn_waits_with_its_batch() {
        let mut waiters = Waiters::new(Some(AFTER));
        let now = Instant::now();
        let first = test_mention("a", 1, "hi", false);
        let joined = test_mention("a", 2, "me too", false);
        let key = first.conversation.clone();
        assert!(!waiters.joined_starting(&joined, now), "no turn is starting");
        waiters.queued(first.event_id, &key, now);
        waiters.leasing(&key, std::slice::from_ref(&first));
        assert!(waiters.joined_starting(&joined, now + Duration::from_secs(1)));
        let (holdup, _) = waiters
            .starting(&key, &joined.event_id)
            .expect("waits with the batch");
        assert_eq!(holdup, Holdup::AgentStarting { after_failure: None });
        assert_eq!(
            waiters.take_due(now + AFTER * 2),
            vec![(key.clone(), joined.event_id)]
        );
        assert_eq!(waiters.next_due(), None, "one notice for the batch");
        waiters.agent_up(&key);
        assert!(!waiters.joined_starting(&joined, now), "the turn is live now");
    }

    #[test]
    fn the_queue_behind_a_starting_turn_is_told_for_itself() {
        let mut waiters = Waiters::new(Some(AFTER));
        let now = Instant::now();
        let starting = test_mention("a", 1, "hi", false);
        let key = starting.conversation.clone();
        let (queued, _) = id_and_key("a", 2);
        waiters.queued(starting.event_id, &key, now);
        waiters.leasing(&key, std::slice::from_ref(&starting));
        waiters.queued(queued, &key, now + Duration::from_secs(2));
        assert_eq!(
            waiters.take_due(now + AFTER),
            vec![(key.clone(), starting.event_id)],
            "the starting batch is due first"
        );
        assert_eq!(
            waiters.next_due(),
            Some(now + Duration::from_secs(2) + AFTER),
            "the queued mention is not counted as told by the batch's notice"
        );
        assert_eq!(waiters.take_due(now + AFTER * 2), vec![(key.clone(), queued)]);
        // Both due in one look: one notice for each group.
        let mut waiters = Waiters::new(Some(AFTER));
        waiters.queued(starting.event_id, &key, now);
        waiters.leasing(&key, std::slice::from_ref(&starting));
        waiters.queued(queued, &key, now);
        let mut due = waiters.take_due(now + AFTER);
        due.sort_by_key(|(_, id)| *id);
        let mut expected = vec![(key.clone(), starting.event_id), (key, queued)];
        expected.sort_by_key(|(_, id)| *id);
        assert_eq!(due, expected);
        assert_eq!(waiters.next_due(), None);
    }
}
