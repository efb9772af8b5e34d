//! The conversations the heart holds: one `Conversation` per key, which
//! owns its waiting mentions and its state (idle, backing off, a turn whose
//! agent is starting, a turn running), and the order in which they get
//! turns.
//!
//! Fairness: among the conversations that may start a turn (idle, with
//! mentions waiting), the one whose oldest waiting mention is oldest goes
//! first. A turn takes all waiting mentions of its conversation, up to
//! [`BATCH_CAP`], into one prompt. Each conversation holds at most
//! [`CONVERSATION_QUEUE_CAP`] waiting mentions; past it the oldest is
//! dropped and handed back so its author can be told. A mention is never
//! waiting twice (by event id).
//!
//! Honest waiting: a mention taken for a turn carries its [`Wait`] (since
//! when it waits, whether its author was told) on its queue entry, then on
//! its turn, and back on its queue entry when a failed turn is retried; a
//! mention waits while it is queued or its turn's agent is still starting
//! (`State::Starting`). Past `--wait-notice-after` it is due a notice,
//! once, and [`Conversations::why_waits`] says why from the state itself.
//! Steers given back to the queue carry no [`Wait`]: they are never told.
//!
//! The indices (`ready`, `wakeups`, `due`) are kept here, next to the
//! states they index, by the only methods that change those states.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use nostr::prelude::EventId;

use crate::mention::{ConversationKey, Mention};
use crate::turn::{Input, TurnMachine};
use crate::waiting::{DueIndex, Holdup, Wait};

/// Mentions one conversation may hold waiting.
pub const CONVERSATION_QUEUE_CAP: usize = 500;
/// Mentions one prompt may carry.
pub const BATCH_CAP: usize = 20;

/// A turn in flight, as its conversation holds it.
#[derive(Debug)]
pub struct Running<Link> {
    pub turn_id: u64,
    pub turn: TurnMachine,
    /// How the heart reaches the turn's driver.
    pub link: Link,
    /// The owner's `!rotate` during the turn: fresh session once it ends.
    pub rotate_after: bool,
}

/// When a failed turn's conversation may try again, and why it failed.
#[derive(Debug, Clone)]
pub struct Retry {
    pub at: Instant,
    /// The failure, as waiting authors are told it.
    pub after: String,
}

/// A conversation's turn: the turn in flight, and the [`Wait`] of each of
/// its entries that is waited on (by event id: those it took from the
/// queue with one, and those that joined it while its agent started). They
/// leave with the turn: to its backoff for a retry, else forgotten.
#[derive(Debug)]
struct Turn<Link> {
    running: Running<Link>,
    waits: HashMap<EventId, Wait>,
}

#[derive(Debug)]
enum State<Link> {
    /// No turn; `after_failure` is why the last attempt failed when the
    /// next turn is its retry.
    Idle { after_failure: Option<String> },
    /// A failed turn waits before its retry; its work, once queued again,
    /// takes back its `waits`.
    BackingOff {
        until: Instant,
        failure: String,
        waits: HashMap<EventId, Wait>,
    },
    /// A turn whose agent is still starting (a real agent's first start can
    /// take a while): its mentions still wait, perhaps after the failure of
    /// the conversation's last attempt.
    Starting {
        turn: Box<Turn<Link>>,
        after_failure: Option<String>,
    },
    /// A turn whose agent is up: its mentions wait no more.
    Running(Box<Turn<Link>>),
}

impl<Link> State<Link> {
    fn turn(&self) -> Option<&Turn<Link>> {
        match self {
            State::Starting { turn, .. } | State::Running(turn) => Some(turn),
            State::Idle { .. } | State::BackingOff { .. } => None,
        }
    }

    fn turn_mut(&mut self) -> Option<&mut Turn<Link>> {
        match self {
            State::Starting { turn, .. } | State::Running(turn) => Some(turn),
            State::Idle { .. } | State::BackingOff { .. } => None,
        }
    }
}

#[derive(Debug)]
struct Waiting {
    mention: Mention,
    /// Global arrival order: smaller waited longer.
    seq: u64,
    /// `None`: never told (a steer given back, or notices are off).
    wait: Option<Wait>,
}

/// One conversation: its waiting mentions and its state.
#[derive(Debug)]
struct Conversation<Link> {
    waiting: VecDeque<Waiting>,
    ids: HashSet<EventId>,
    state: State<Link>,
}

impl<Link> Default for Conversation<Link> {
    fn default() -> Self {
        Conversation {
            waiting: VecDeque::new(),
            ids: HashSet::new(),
            state: State::Idle { after_failure: None },
        }
    }
}

impl<Link> Conversation<Link> {
    fn head_seq(&self) -> Option<u64> {
        self.waiting.front().map(|waiting| waiting.seq)
    }

    fn is_ready(&self) -> bool {
        matches!(self.state, State::Idle { .. }) && !self.waiting.is_empty()
    }
}

/// Every conversation with something going on (idle empty ones are
/// forgotten), generic over how a running turn is reached so that the
/// scheduling is tested without tasks.
#[derive(Debug)]
pub struct Conversations<Link> {
    by_key: HashMap<ConversationKey, Conversation<Link>>,
    /// (oldest seq, key) of every idle conversation with mentions waiting.
    ready: BTreeSet<(u64, ConversationKey)>,
    /// (until, key) of every conversation backing off.
    wakeups: BTreeSet<(Instant, ConversationKey)>,
    /// When every waiting mention not told yet is due its notice.
    due: DueIndex,
    next_seq: u64,
    waiting: usize,
    running: usize,
}

impl<Link> Default for Conversations<Link> {
    /// Without waiting notices.
    fn default() -> Self {
        Conversations::new(None)
    }
}

impl<Link> Conversations<Link> {
    /// Conversations whose mentions are due a notice once they waited
    /// `wait_notice_after` (`None`: never).
    pub fn new(wait_notice_after: Option<Duration>) -> Self {
        Conversations {
            by_key: HashMap::new(),
            ready: BTreeSet::new(),
            wakeups: BTreeSet::new(),
            due: DueIndex::new(wait_notice_after),
            next_seq: 0,
            waiting: 0,
            running: 0,
        }
    }

    /// Queues a mention at the back of its conversation; it waits from
    /// `now`, and its author is told if that lasts. Returns the mention
    /// dropped to make room, if the conversation was full.
    pub fn enqueue(&mut self, mention: Mention, now: Instant) -> Option<Mention> {
        let wait = self.due.start(now);
        self.push(mention, false, wait)
    }

    /// Queues a mention at the back of its conversation without a waiting
    /// notice (a steer given back). Returns the mention dropped to make
    /// room, if the conversation was full.
    pub fn push_back(&mut self, mention: Mention) -> Option<Mention> {
        self.push(mention, false, None)
    }

    /// Puts mentions back at the front of their conversation (retries,
    /// mentions a turn returned): they keep their place ahead of newer
    /// ones, and a retry's work its [`Wait`]s. Returns those dropped for
    /// room.
    pub fn push_front(&mut self, mentions: Vec<Mention>) -> Vec<Mention> {
        mentions
            .into_iter()
            .rev()
            .filter_map(|mention| {
                let wait = self.retried_wait(&mention);
                self.push(mention, true, wait)
            })
            .collect()
    }

    /// The [`Wait`] a failed turn's mention takes back from its backoff.
    fn retried_wait(&mut self, mention: &Mention) -> Option<Wait> {
        match &mut self.by_key.get_mut(&mention.conversation)?.state {
            State::BackingOff { waits, .. } => waits.remove(&mention.event_id),
            _ => None,
        }
    }

    fn push(&mut self, mention: Mention, front: bool, wait: Option<Wait>) -> Option<Mention> {
        let key = mention.conversation.clone();
        self.next_seq += 1;
        let next_seq = self.next_seq;
        self.update(&key, |conversation, due| {
            if !conversation.ids.insert(mention.event_id) {
                return (None, 0);
            }
            let seq = if front {
                conversation
                    .head_seq()
                    .map_or(next_seq, |head| head.saturating_sub(1))
            } else {
                next_seq
            };
            if let Some(wait) = &wait {
                due.insert(&key, mention.event_id, wait);
            }
            let waiting = Waiting { mention, seq, wait };
            if front {
                conversation.waiting.push_front(waiting);
            } else {
                conversation.waiting.push_back(waiting);
            }
            if conversation.waiting.len() <= CONVERSATION_QUEUE_CAP {
                return (None, 1);
            }
            let oldest = conversation.waiting.pop_front();
            let oldest = oldest.map(|oldest| {
                conversation.ids.remove(&oldest.mention.event_id);
                if let Some(wait) = &oldest.wait {
                    due.remove(&key, oldest.mention.event_id, wait);
                }
                oldest.mention
            });
            (oldest, 0)
        })
    }

    /// Takes out of the ready conversation waiting longest the mentions
    /// of its next batch (the first [`BATCH_CAP`]) that `refuse` gives a
    /// reason not to start a turn for (a budget spent), with that reason:
    /// the heart gives them up before [`Conversations::start_next`] takes
    /// the rest.
    pub fn refuse_next<R>(&mut self, mut refuse: impl FnMut(&Mention) -> Option<R>) -> Vec<(Mention, R)> {
        let Some((_, key)) = self.ready.first().cloned() else {
            return Vec::new();
        };
        self.update(&key, |conversation, due| {
            let mut refused = Vec::new();
            let mut kept = VecDeque::with_capacity(conversation.waiting.len());
            // Only the mentions the next batch would take: the rest are
            // judged when their turn comes.
            for (index, waiting) in conversation.waiting.drain(..).enumerate() {
                let judged = index < BATCH_CAP;
                let Some(reason) = judged.then(|| refuse(&waiting.mention)).flatten() else {
                    kept.push_back(waiting);
                    continue;
                };
                conversation.ids.remove(&waiting.mention.event_id);
                if let Some(wait) = &waiting.wait {
                    due.remove(&key, waiting.mention.event_id, wait);
                }
                refused.push((waiting.mention, reason));
            }
            conversation.waiting = kept;
            let gone = -(refused.len() as isize);
            (refused, gone)
        })
    }

    /// Takes the next batch, from the ready conversation waiting longest,
    /// and starts its turn with `start` (which builds the running turn
    /// from the batch). The batch waits on, with its [`Wait`]s, until the
    /// turn's agent is up (`Conversations::agent_up`).
    pub fn start_next(
        &mut self,
        start: impl FnOnce(&ConversationKey, Vec<Mention>) -> Running<Link>,
    ) -> Option<ConversationKey> {
        let (_, key) = self.ready.first()?.clone();
        self.update(&key, |conversation, _| {
            // An agent's slash command is a batch of its own (see `slash`).
            let waiting = conversation.waiting.iter().map(|waiting| &waiting.mention);
            let take = crate::slash::batch_len(waiting).min(BATCH_CAP);
            let mut waits = HashMap::new();
            let batch: Vec<Mention> = conversation
                .waiting
                .drain(..take)
                .map(|waiting| {
                    if let Some(wait) = waiting.wait {
                        waits.insert(waiting.mention.event_id, wait);
                    }
                    waiting.mention
                })
                .collect();
            for mention in &batch {
                conversation.ids.remove(&mention.event_id);
            }
            let after_failure =
                match std::mem::replace(&mut conversation.state, State::Idle { after_failure: None }) {
                    State::Idle { after_failure } => after_failure,
                    _ => None,
                };
            let turn = Box::new(Turn {
                running: start(&key, batch),
                waits,
            });
            conversation.state = State::Starting { turn, after_failure };
            ((), -(take as isize))
        });
        self.running += 1;
        Some(key)
    }

    /// Feeds the conversation's turn one input through `handle` (which
    /// runs its machine), keeping the waiting in step with the turn: the
    /// mentions it absorbs while its agent starts wait with its batch, from
    /// `now`, and once its agent is up (or could not be had) its mentions
    /// wait no more. `None` when the conversation has no turn.
    pub fn step<T>(
        &mut self,
        key: &ConversationKey,
        input: Input,
        now: Instant,
        handle: impl FnOnce(&mut Running<Link>, Input) -> T,
    ) -> Option<T> {
        if let Input::Absorb { mentions, .. } = &input {
            for mention in mentions {
                self.join_turn(key, mention.event_id, now);
            }
        }
        let running = self.running_mut(key)?;
        let handled = handle(running, input);
        if !running.turn.agent_starting() {
            self.agent_up(key);
        }
        Some(handled)
    }

    /// The agent of the conversation's turn is up (or could not be had):
    /// the turn's mentions wait no more.
    fn agent_up(&mut self, key: &ConversationKey) {
        let Some(conversation) = self.by_key.get_mut(key) else {
            return;
        };
        let state = std::mem::replace(&mut conversation.state, State::Idle { after_failure: None });
        conversation.state = match state {
            State::Starting { turn, .. } => {
                for (id, wait) in &turn.waits {
                    self.due.remove(key, *id, wait);
                }
                State::Running(turn)
            }
            other => other,
        };
    }

    /// `id` joined the turn of `key` while its agent starts (it
    /// goes with the first prompt): it waits with that batch, from `now`.
    /// Returns whether it waits; a live turn's steers do not.
    fn join_turn(&mut self, key: &ConversationKey, id: EventId, now: Instant) -> bool {
        let Some(conversation) = self.by_key.get_mut(key) else {
            return false;
        };
        let State::Starting { turn, .. } = &mut conversation.state else {
            return false;
        };
        if let Some(wait) = self.due.start(now) {
            self.due.insert(key, id, &wait);
            turn.waits.insert(id, wait);
        }
        true
    }

    /// The conversation's running turn.
    pub fn running_mut(&mut self, key: &ConversationKey) -> Option<&mut Running<Link>> {
        let turn = self.by_key.get_mut(key)?.state.turn_mut()?;
        Some(&mut turn.running)
    }

    pub fn running(&self, key: &ConversationKey) -> Option<&Running<Link>> {
        Some(&self.by_key.get(key)?.state.turn()?.running)
    }

    /// Every running turn.
    pub fn running_turns(&self) -> impl Iterator<Item = (&ConversationKey, &Running<Link>)> {
        self.by_key
            .iter()
            .filter_map(|(key, conversation)| Some((key, &conversation.state.turn()?.running)))
    }

    /// Ends the conversation's turn; it may start another at once, or
    /// after `not_before` (a retry's backoff, which keeps the turn's
    /// [`Wait`]s for its work queued again). Returns the ended turn.
    pub fn end_turn(&mut self, key: &ConversationKey, not_before: Option<Retry>) -> Option<Running<Link>> {
        self.agent_up(key);
        let ended = self.update(key, |conversation, _| {
            let next = match not_before {
                Some(retry) => State::BackingOff {
                    until: retry.at,
                    failure: retry.after,
                    waits: HashMap::new(),
                },
                None => State::Idle { after_failure: None },
            };
            match std::mem::replace(&mut conversation.state, next) {
                State::Starting { turn, .. } | State::Running(turn) => {
                    let Turn { running, waits } = *turn;
                    if let State::BackingOff { waits: kept, .. } = &mut conversation.state {
                        *kept = waits;
                    }
                    (Some(running), 0)
                }
                other => {
                    conversation.state = other;
                    (None, 0)
                }
            }
        });
        if ended.is_some() {
            self.running -= 1;
        }
        ended
    }

    /// Ends every backoff due by `now`; the next turn is its retry.
    pub fn wake(&mut self, now: Instant) {
        while let Some((until, key)) = self.wakeups.first().cloned() {
            if until > now {
                break;
            }
            self.update(&key, |conversation, _| {
                let idle = State::Idle { after_failure: None };
                if let State::BackingOff { failure, .. } = std::mem::replace(&mut conversation.state, idle) {
                    conversation.state = State::Idle {
                        after_failure: Some(failure),
                    };
                }
                ((), 0)
            });
        }
    }

    /// When the next backoff ends.
    pub fn next_wake(&self) -> Option<Instant> {
        self.wakeups.first().map(|(until, _)| *until)
    }

    /// Why the mentions waiting in the conversation of `key` have no turn
    /// yet; `None` when it has nothing waiting or may start now.
    fn holdup(&self, key: &ConversationKey, now: Instant, capacity: usize) -> Option<Holdup> {
        let conversation = self.by_key.get(key)?;
        match &conversation.state {
            _ if conversation.waiting.is_empty() => None,
            State::Starting { .. } | State::Running(_) => Some(Holdup::TurnInFlight),
            State::BackingOff { until, failure, .. } => Some(Holdup::BackingOff {
                retry_in: until.saturating_duration_since(now),
                failure: failure.clone(),
            }),
            State::Idle { .. } if self.running < capacity => None,
            State::Idle { .. } => Some(Holdup::Capacity {
                ahead: self.ready.iter().take_while(|(_, ready)| ready != key).count(),
                running: self.running,
                capacity,
            }),
        }
    }

    /// Why the mention `id` of the conversation of `key` waits, and the
    /// mention: in the batch of a turn whose agent is starting, or in the
    /// queue for the conversation's reason (`Conversations::holdup`).
    /// `None` when it does not wait (any more).
    pub fn why_waits(
        &self,
        key: &ConversationKey,
        id: &EventId,
        now: Instant,
        capacity: usize,
    ) -> Option<(Holdup, &Mention)> {
        let conversation = self.by_key.get(key)?;
        if let State::Starting { turn, after_failure } = &conversation.state
            && let Some(mention) = turn.running.turn.mention(id)
        {
            let after_failure = after_failure.clone();
            return Some((Holdup::AgentStarting { after_failure }, mention));
        }
        let mention = conversation
            .waiting
            .iter()
            .map(|waiting| &waiting.mention)
            .find(|mention| mention.event_id == *id)?;
        Some((self.holdup(key, now, capacity)?, mention))
    }

    /// When the next waiting mention is due a notice.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.next()
    }

    /// The mentions due a notice by `now`: one per waiting group of a
    /// conversation, its newest due mention. A conversation's mentions
    /// wait in up to two groups, the batch of its turn whose agent is
    /// starting and its queue behind that turn; every mention of a group
    /// counts as told by its one notice (they share a batch, and the
    /// reason), and the other group is told for itself when it is due.
    pub fn take_due(&mut self, now: Instant) -> Vec<(ConversationKey, EventId)> {
        // (key, in the starting turn) → the group's newest due mention.
        let mut groups: HashMap<(ConversationKey, bool), EventId> = HashMap::new();
        for (key, id) in self.due.pop_due(now) {
            let starting = self.by_key.get(&key).is_some_and(|conversation| {
                matches!(&conversation.state, State::Starting { turn, .. } if turn.waits.contains_key(&id))
            });
            groups.insert((key, starting), id);
        }
        for (key, starting) in groups.keys() {
            let Some(conversation) = self.by_key.get_mut(key) else {
                continue;
            };
            let waits: Vec<(EventId, &mut Wait)> = match (&mut conversation.state, *starting) {
                (State::Starting { turn, .. }, true) => {
                    turn.waits.iter_mut().map(|(id, wait)| (*id, wait)).collect()
                }
                (_, true) => Vec::new(),
                (_, false) => conversation
                    .waiting
                    .iter_mut()
                    .filter_map(|waiting| Some((waiting.mention.event_id, waiting.wait.as_mut()?)))
                    .collect(),
            };
            for (id, wait) in waits {
                self.due.tell(key, id, wait);
            }
        }
        let mut due: Vec<_> = groups
            .into_iter()
            .map(|((conversation, _), id)| (conversation, id))
            .collect();
        due.sort();
        due
    }

    /// Mentions waiting in total.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Mentions waiting in the conversation `key`.
    pub fn waiting_in(&self, key: &ConversationKey) -> usize {
        self.by_key
            .get(key)
            .map_or(0, |conversation| conversation.waiting.len())
    }

    /// Conversations with a turn in flight.
    pub fn running_count(&self) -> usize {
        self.running
    }

    /// Applies `change` to the conversation of `key` (created if needed),
    /// keeping the indices and counts in step; `change` returns its result
    /// and how the number of waiting mentions changed, and keeps the due
    /// index in step with the entries it adds or drops. An idle
    /// conversation left with nothing waiting is forgotten.
    fn update<T>(
        &mut self,
        key: &ConversationKey,
        change: impl FnOnce(&mut Conversation<Link>, &mut DueIndex) -> (T, isize),
    ) -> T {
        let conversation = self.by_key.entry(key.clone()).or_default();
        if let Some(seq) = conversation.head_seq().filter(|_| conversation.is_ready()) {
            self.ready.remove(&(seq, key.clone()));
        }
        if let State::BackingOff { until, .. } = conversation.state {
            self.wakeups.remove(&(until, key.clone()));
        }
        let (result, waiting_delta) = change(conversation, &mut self.due);
        self.waiting = self.waiting.saturating_add_signed(waiting_delta);
        if let Some(seq) = conversation.head_seq().filter(|_| conversation.is_ready()) {
            self.ready.insert((seq, key.clone()));
        }
        match conversation.state {
            State::BackingOff { until, .. } => {
                self.wakeups.insert((until, key.clone()));
            }
            State::Idle { .. } if conversation.waiting.is_empty() => {
                self.by_key.remove(key);
            }
            _ => {}
        }
        result
    }
}

#[cfg(test)]
mod tests;
