//! The conversations the heart holds: one [`Conversation`] per key, which
//! owns its waiting mentions and its state (idle, backing off, running a
//! turn), and the order in which they get turns.
//!
//! Fairness: among the conversations that may start a turn (idle, with
//! mentions waiting), the one whose oldest waiting mention is oldest goes
//! first. A turn takes all waiting mentions of its conversation, up to
//! [`BATCH_CAP`], into one prompt. Each conversation holds at most
//! [`CONVERSATION_QUEUE_CAP`] waiting mentions; past it the oldest is
//! dropped and handed back so its author can be told. A mention is never
//! waiting twice (by event id).
//!
//! The indices (`ready`, `wakeups`) are kept here, next to the states they
//! index, by the only methods that change those states.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Instant;

use nostr_sdk::prelude::EventId;

use super::turn::TurnMachine;
use super::waiting::Holdup;
use crate::mention::{ConversationKey, Mention};

/// Mentions one conversation may hold waiting.
pub(crate) const CONVERSATION_QUEUE_CAP: usize = 500;
/// Mentions one prompt may carry.
pub const BATCH_CAP: usize = 20;

/// A turn in flight, as its conversation holds it.
#[derive(Debug)]
pub(crate) struct Running<Link> {
    pub turn_id: u64,
    pub turn: TurnMachine,
    /// How the heart reaches the turn's driver.
    pub link: Link,
    /// The owner's `!rotate` during the turn: fresh session once it ends.
    pub rotate_after: bool,
}

/// When a failed turn's conversation may try again, and why it failed.
#[derive(Debug, Clone)]
pub(crate) struct Retry {
    pub at: Instant,
    /// The failure, as waiting authors are told it.
    pub after: String,
}

#[derive(Debug)]
enum State<Link> {
    Idle,
    /// A failed turn waits before its retry.
    BackingOff {
        until: Instant,
        failure: String,
    },
    Running(Box<Running<Link>>),
}

#[derive(Debug)]
struct Waiting {
    mention: Mention,
    /// Global arrival order: smaller waited longer.
    seq: u64,
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
            state: State::Idle,
        }
    }
}

impl<Link> Conversation<Link> {
    fn head_seq(&self) -> Option<u64> {
        self.waiting.front().map(|waiting| waiting.seq)
    }

    fn is_ready(&self) -> bool {
        matches!(self.state, State::Idle) && !self.waiting.is_empty()
    }
}

/// Every conversation with something going on (idle empty ones are
/// forgotten), generic over how a running turn is reached so that the
/// scheduling is tested without tasks.
#[derive(Debug)]
pub(crate) struct Conversations<Link> {
    by_key: HashMap<ConversationKey, Conversation<Link>>,
    /// (oldest seq, key) of every idle conversation with mentions waiting.
    ready: BTreeSet<(u64, ConversationKey)>,
    /// (until, key) of every conversation backing off.
    wakeups: BTreeSet<(Instant, ConversationKey)>,
    next_seq: u64,
    waiting: usize,
    running: usize,
}

impl<Link> Default for Conversations<Link> {
    fn default() -> Self {
        Conversations {
            by_key: HashMap::new(),
            ready: BTreeSet::new(),
            wakeups: BTreeSet::new(),
            next_seq: 0,
            waiting: 0,
            running: 0,
        }
    }
}

impl<Link> Conversations<Link> {
    /// Queues a mention at the back of its conversation. Returns the
    /// mention dropped to make room, if the conversation was full.
    pub(super) fn push_back(&mut self, mention: Mention) -> Option<Mention> {
        self.push(mention, false)
    }

    /// Puts mentions back at the front of their conversation (retries,
    /// mentions a turn returned): they keep their place ahead of newer
    /// ones. Returns those dropped for room.
    pub(super) fn push_front(&mut self, mentions: Vec<Mention>) -> Vec<Mention> {
        mentions
            .into_iter()
            .rev()
            .filter_map(|mention| self.push(mention, true))
            .collect()
    }

    fn push(&mut self, mention: Mention, front: bool) -> Option<Mention> {
        let key = mention.conversation.clone();
        self.next_seq += 1;
        let next_seq = self.next_seq;
        self.update(&key, |conversation| {
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
            let waiting = Waiting { mention, seq };
            if front {
                conversation.waiting.push_front(waiting);
            } else {
                conversation.waiting.push_back(waiting);
            }
            if conversation.waiting.len() <= CONVERSATION_QUEUE_CAP {
                return (None, 1);
            }
            let oldest = conversation.waiting.pop_front().map(|oldest| oldest.mention);
            if let Some(oldest) = &oldest {
                conversation.ids.remove(&oldest.event_id);
            }
            (oldest, 0)
        })
    }

    /// Takes the next batch, from the ready conversation waiting longest,
    /// and starts its turn with `start` (which builds the running turn
    /// from the batch).
    pub(super) fn start_next(
        &mut self,
        start: impl FnOnce(&ConversationKey, Vec<Mention>) -> Running<Link>,
    ) -> Option<ConversationKey> {
        let (_, key) = self.ready.first()?.clone();
        self.update(&key, |conversation| {
            let take = conversation.waiting.len().min(BATCH_CAP);
            let batch: Vec<Mention> = conversation
                .waiting
                .drain(..take)
                .map(|waiting| waiting.mention)
                .collect();
            for mention in &batch {
                conversation.ids.remove(&mention.event_id);
            }
            conversation.state = State::Running(Box::new(start(&key, batch)));
            ((), -(take as isize))
        });
        self.running += 1;
        Some(key)
    }

    /// The conversation's running turn.
    pub(super) fn running_mut(&mut self, key: &ConversationKey) -> Option<&mut Running<Link>> {
        match &mut self.by_key.get_mut(key)?.state {
            State::Running(running) => Some(running),
            _ => None,
        }
    }

    pub(super) fn running(&self, key: &ConversationKey) -> Option<&Running<Link>> {
        match &self.by_key.get(key)?.state {
            State::Running(running) => Some(running),
            _ => None,
        }
    }

    /// Every running turn.
    pub(super) fn running_turns(&self) -> impl Iterator<Item = (&ConversationKey, &Running<Link>)> {
        self.by_key
            .iter()
            .filter_map(|(key, conversation)| match &conversation.state {
                State::Running(running) => Some((key, running.as_ref())),
                _ => None,
            })
    }

    /// Ends the conversation's turn; it may start another at once, or
    /// after `not_before` (a retry's backoff). Returns the ended turn.
    pub(super) fn end_turn(
        &mut self,
        key: &ConversationKey,
        not_before: Option<Retry>,
    ) -> Option<Running<Link>> {
        let ended = self.update(key, |conversation| {
            let next = match not_before {
                Some(retry) => State::BackingOff {
                    until: retry.at,
                    failure: retry.after,
                },
                None => State::Idle,
            };
            match std::mem::replace(&mut conversation.state, next) {
                State::Running(running) => (Some(*running), 0),
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

    /// Ends every backoff due by `now`.
    pub(super) fn wake(&mut self, now: Instant) {
        while let Some((until, key)) = self.wakeups.first().cloned() {
            if until > now {
                break;
            }
            self.update(&key, |conversation| {
                conversation.state = State::Idle;
                ((), 0)
            });
        }
    }

    /// When the next backoff ends.
    pub(super) fn next_wake(&self) -> Option<Instant> {
        self.wakeups.first().map(|(until, _)| *until)
    }

    /// Why the mentions waiting in the conversation of `key` have no turn
    /// yet; `None` when it has nothing waiting or may start now.
    pub(super) fn holdup(&self, key: &ConversationKey, now: Instant, capacity: usize) -> Option<Holdup> {
        let conversation = self.by_key.get(key)?;
        match &conversation.state {
            _ if conversation.waiting.is_empty() => None,
            State::Running(_) => Some(Holdup::TurnInFlight),
            State::BackingOff { until, failure } => Some(Holdup::BackingOff {
                retry_in: until.saturating_duration_since(now),
                failure: failure.clone(),
            }),
            State::Idle if self.running < capacity => None,
            State::Idle => Some(Holdup::Capacity {
                ahead: self.ready.iter().take_while(|(_, ready)| ready != key).count(),
                running: self.running,
                capacity,
            }),
        }
    }

    /// A mention waiting in the conversation of `key`.
    pub(super) fn waiting_mention(&self, key: &ConversationKey, id: &EventId) -> Option<&Mention> {
        let conversation = self.by_key.get(key)?;
        conversation
            .waiting
            .iter()
            .map(|waiting| &waiting.mention)
            .find(|mention| mention.event_id == *id)
    }

    /// Mentions waiting in total.
    pub(super) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Mentions waiting in the conversation `key`.
    pub(super) fn waiting_in(&self, key: &ConversationKey) -> usize {
        self.by_key
            .get(key)
            .map_or(0, |conversation| conversation.waiting.len())
    }

    /// Conversations with a turn in flight.
    pub(super) fn running_count(&self) -> usize {
        self.running
    }

    /// Applies `change` to the conversation of `key` (created if needed),
    /// keeping the indices and counts in step; `change` returns its result
    /// and how the number of waiting mentions changed. An idle conversation
    /// left with nothing waiting is forgotten.
    fn update<T>(
        &mut self,
        key: &ConversationKey,
        change: impl FnOnce(&mut Conversation<Link>) -> (T, isize),
    ) -> T {
        let conversation = self.by_key.entry(key.clone()).or_default();
        if let Some(seq) = conversation.head_seq().filter(|_| conversation.is_ready()) {
            self.ready.remove(&(seq, key.clone()));
        }
        if let State::BackingOff { until, .. } = conversation.state {
            self.wakeups.remove(&(until, key.clone()));
        }
        let (result, waiting_delta) = change(conversation);
        self.waiting = self.waiting.saturating_add_signed(waiting_delta);
        if let Some(seq) = conversation.head_seq().filter(|_| conversation.is_ready()) {
            self.ready.insert((seq, key.clone()));
        }
        match conversation.state {
            State::BackingOff { until, .. } => {
                self.wakeups.insert((until, key.clone()));
            }
            State::Idle if conversation.waiting.is_empty() => {
                self.by_key.remove(key);
            }
            _ => {}
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::heart::turn::TurnStart;
    use crate::mention::test_mention;

    fn mention(conversation: &str, n: u64) -> Mention {
        test_mention(conversation, n, &format!("{conversation}-{n}"), true)
    }

    fn contents(batch: &[Mention]) -> Vec<&str> {
        batch.iter().map(|m| m.content.as_str()).collect()
    }

    /// Starts the next turn; returns its key and batch.
    fn start(conversations: &mut Conversations<Vec<Mention>>) -> Option<(String, Vec<Mention>)> {
        let key = conversations.start_next(|_, batch| {
            let start = TurnStart {
                batch: batch.clone(),
                queue_wait_ms: 0,
                question_timeout: std::time::Duration::from_secs(60),
            };
            Running {
                turn_id: 1,
                turn: TurnMachine::start(start, Instant::now()).0,
                link: batch,
                rotate_after: false,
            }
        })?;
        let batch = conversations.running(&key).expect("running").link.clone();
        Some((key.as_str().to_owned(), batch))
    }

    #[test]
    fn oldest_waiting_conversation_goes_first_and_batches_take_everything() {
        let mut conversations = Conversations::default();
        conversations.push_back(mention("a", 1));
        conversations.push_back(mention("b", 1));
        conversations.push_back(mention("a", 2));
        let (key, batch) = start(&mut conversations).expect("a");
        assert_eq!(key, "group:a");
        assert_eq!(contents(&batch), ["a-1", "a-2"]);
        let (key, _) = start(&mut conversations).expect("b");
        assert_eq!(key, "group:b");
        assert!(start(&mut conversations).is_none());
        assert_eq!(conversations.running_count(), 2);
        assert_eq!(conversations.waiting(), 0);
    }

    #[test]
    fn one_turn_per_conversation_and_backoff_delays_the_next() {
        let mut conversations = Conversations::default();
        conversations.push_back(mention("a", 1));
        let (_, _) = start(&mut conversations).expect("first");
        conversations.push_back(mention("a", 2));
        assert!(start(&mut conversations).is_none(), "a turn is in flight");
        let key = mention("a", 1).conversation;
        let now = Instant::now();
        let retry = Retry {
            at: now + Duration::from_secs(5),
            after: "the agent stopped".to_owned(),
        };
        assert!(conversations.end_turn(&key, Some(retry)).is_some());
        assert!(start(&mut conversations).is_none(), "backing off");
        assert_eq!(conversations.next_wake(), Some(now + Duration::from_secs(5)));
        conversations.wake(now);
        assert!(start(&mut conversations).is_none(), "not yet");
        conversations.wake(now + Duration::from_secs(5));
        assert_eq!(conversations.next_wake(), None);
        assert!(start(&mut conversations).is_some());
    }

    #[test]
    fn the_holdup_names_the_real_reason_a_conversation_waits() {
        let mut conversations = Conversations::default();
        let now = Instant::now();
        let key = |name: &str| mention(name, 1).conversation;
        conversations.push_back(mention("a", 1));
        start(&mut conversations).expect("a runs");
        conversations.push_back(mention("a", 2));
        conversations.push_back(mention("b", 1));
        conversations.push_back(mention("c", 1));
        assert_eq!(
            conversations.holdup(&key("a"), now, 1),
            Some(Holdup::TurnInFlight)
        );
        let capacity = |ahead| Holdup::Capacity {
            ahead,
            running: 1,
            capacity: 1,
        };
        assert_eq!(conversations.holdup(&key("b"), now, 1), Some(capacity(0)));
        assert_eq!(conversations.holdup(&key("c"), now, 1), Some(capacity(1)));
        assert_eq!(conversations.holdup(&key("c"), now, 2), None, "a slot is free");
        let retry = Retry {
            at: now + Duration::from_secs(40),
            after: "the agent failed to start up".to_owned(),
        };
        conversations.end_turn(&key("a"), Some(retry));
        let backing_off = Holdup::BackingOff {
            retry_in: Duration::from_secs(30),
            failure: "the agent failed to start up".to_owned(),
        };
        let later = now + Duration::from_secs(10);
        assert_eq!(conversations.holdup(&key("a"), later, 1), Some(backing_off));
        assert_eq!(
            conversations.holdup(&key("d"), now, 1),
            None,
            "nothing waits there"
        );
    }

    #[test]
    fn returned_mentions_go_to_the_front_and_duplicates_are_ignored() {
        let mut conversations = Conversations::<Vec<Mention>>::default();
        conversations.push_back(mention("a", 3));
        conversations.push_front(vec![mention("a", 1), mention("a", 2)]);
        conversations.push_back(mention("a", 3));
        assert_eq!(conversations.waiting(), 3);
        let (_, batch) = start(&mut conversations).expect("batch");
        assert_eq!(contents(&batch), ["a-1", "a-2", "a-3"]);
    }

    #[test]
    fn a_full_conversation_drops_its_oldest() {
        let mut conversations = Conversations::<Vec<Mention>>::default();
        let mut dropped = Vec::new();
        for n in 0..=CONVERSATION_QUEUE_CAP as u64 {
            dropped.extend(conversations.push_back(mention("a", n)));
        }
        assert_eq!(contents(&dropped), ["a-0"]);
        assert_eq!(conversations.waiting(), CONVERSATION_QUEUE_CAP);
        let (_, batch) = start(&mut conversations).expect("batch");
        assert_eq!(batch.len(), BATCH_CAP);
        assert_eq!(batch[0].content, "a-1");
    }

    #[test]
    fn idle_conversations_with_nothing_waiting_are_forgotten() {
        let mut conversations = Conversations::<Vec<Mention>>::default();
        conversations.push_back(mention("a", 1));
        start(&mut conversations).expect("a");
        conversations.end_turn(&mention("a", 1).conversation, None);
        assert!(conversations.by_key.is_empty());
        assert!(conversations.ready.is_empty() && conversations.wakeups.is_empty());
    }
}
