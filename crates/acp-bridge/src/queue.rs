//! The dedup queue: one FIFO per conversation, fair dispatch across them.
//!
//! Owns waiting mentions and the order they leave in. Fairness: among the
//! conversations that may start a turn (none in flight, not backing off),
//! the one whose oldest waiting mention is oldest goes first. A dispatch
//! takes all waiting mentions of a conversation, up to a batch cap, into
//! one prompt. Each conversation holds at most a cap of mentions; past it
//! the oldest is dropped and handed back so the person can be told.
//! Duplicates (by event id) are never queued twice.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Instant;

use nostr_sdk::prelude::EventId;

use crate::mention::{ConversationKey, Mention};

/// Mentions one conversation may hold waiting.
pub const CONVERSATION_QUEUE_CAP: usize = 500;
/// Mentions one prompt may carry.
pub const BATCH_CAP: usize = 20;

#[derive(Debug)]
struct Waiting {
    mention: Mention,
    /// Global arrival order: smaller waited longer.
    seq: u64,
}

#[derive(Debug, Default)]
struct Lane {
    waiting: VecDeque<Waiting>,
    busy: bool,
    not_before: Option<Instant>,
}

#[derive(Debug, Default)]
pub struct Queue {
    lanes: HashMap<ConversationKey, Lane>,
    /// (oldest seq, conversation) of every lane that has mentions waiting.
    heads: BTreeSet<(u64, ConversationKey)>,
    ids: std::collections::HashSet<EventId>,
    next_seq: u64,
}

impl Queue {
    /// Queues a mention at the back of its conversation. Returns the
    /// mention dropped to make room, if the lane was full.
    pub fn push_back(&mut self, mention: Mention) -> Option<Mention> {
        self.push(mention, false)
    }

    /// Puts mentions back at the front of their conversation (retries,
    /// unconfirmed steers): they keep their place ahead of newer ones.
    pub fn push_front(&mut self, mentions: Vec<Mention>) -> Vec<Mention> {
        mentions
            .into_iter()
            .rev()
            .filter_map(|mention| self.push(mention, true))
            .collect()
    }

    fn push(&mut self, mention: Mention, front: bool) -> Option<Mention> {
        if !self.ids.insert(mention.event_id) {
            return None;
        }
        self.next_seq += 1;
        let seq = if front {
            self.front_seq(&mention.conversation)
        } else {
            self.next_seq
        };
        let key = mention.conversation.clone();
        self.unlink(&key);
        let lane = self.lanes.entry(key.clone()).or_default();
        let waiting = Waiting { mention, seq };
        if front {
            lane.waiting.push_front(waiting);
        } else {
            lane.waiting.push_back(waiting);
        }
        let dropped = if lane.waiting.len() > CONVERSATION_QUEUE_CAP {
            lane.waiting.pop_front().map(|oldest| oldest.mention)
        } else {
            None
        };
        if let Some(dropped) = &dropped {
            self.ids.remove(&dropped.event_id);
        }
        self.link(&key);
        dropped
    }

    /// A sequence number ahead of everything waiting in the conversation.
    fn front_seq(&self, key: &ConversationKey) -> u64 {
        self.lanes
            .get(key)
            .and_then(|lane| lane.waiting.front())
            .map_or(self.next_seq, |front| front.seq.saturating_sub(1))
    }

    /// Takes the next batch: the eligible conversation waiting longest.
    pub fn next_batch(&mut self, now: Instant) -> Option<(ConversationKey, Vec<Mention>)> {
        let key = self
            .heads
            .iter()
            .map(|(_, key)| key)
            .find(|key| {
                self.lanes
                    .get(*key)
                    .is_some_and(|lane| !lane.busy && lane.not_before.is_none_or(|at| at <= now))
            })?
            .clone();
        self.unlink(&key);
        let lane = self.lanes.get_mut(&key)?;
        let take = lane.waiting.len().min(BATCH_CAP);
        let batch: Vec<Mention> = lane
            .waiting
            .drain(..take)
            .map(|waiting| waiting.mention)
            .collect();
        lane.busy = true;
        lane.not_before = None;
        for mention in &batch {
            self.ids.remove(&mention.event_id);
        }
        self.link(&key);
        Some((key, batch))
    }

    /// The conversation's turn ended; it may dispatch again (after
    /// `not_before`, for retries).
    pub fn turn_ended(&mut self, key: &ConversationKey, not_before: Option<Instant>) {
        if let Some(lane) = self.lanes.get_mut(key) {
            lane.busy = false;
            lane.not_before = not_before;
        }
        self.forget_if_idle(key);
    }

    pub fn is_busy(&self, key: &ConversationKey) -> bool {
        self.lanes.get(key).is_some_and(|lane| lane.busy)
    }

    /// Mentions waiting in total.
    pub fn depth(&self) -> usize {
        self.ids.len()
    }

    /// Mentions waiting in one conversation.
    pub fn depth_of(&self, key: &ConversationKey) -> usize {
        self.lanes.get(key).map_or(0, |lane| lane.waiting.len())
    }

    /// The earliest time a backing-off conversation may dispatch again.
    pub fn next_wake(&self) -> Option<Instant> {
        self.lanes
            .values()
            .filter(|lane| !lane.busy && !lane.waiting.is_empty())
            .filter_map(|lane| lane.not_before)
            .min()
    }

    /// Conversations with a turn in flight.
    pub fn busy_conversations(&self) -> usize {
        self.lanes.values().filter(|lane| lane.busy).count()
    }

    fn unlink(&mut self, key: &ConversationKey) {
        if let Some(front) = self.lanes.get(key).and_then(|lane| lane.waiting.front()) {
            self.heads.remove(&(front.seq, key.clone()));
        }
    }

    fn link(&mut self, key: &ConversationKey) {
        if let Some(front) = self.lanes.get(key).and_then(|lane| lane.waiting.front()) {
            self.heads.insert((front.seq, key.clone()));
        }
    }

    fn forget_if_idle(&mut self, key: &ConversationKey) {
        if self
            .lanes
            .get(key)
            .is_some_and(|lane| !lane.busy && lane.waiting.is_empty() && lane.not_before.is_none())
        {
            self.lanes.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::mention::test_mention;

    fn mention(conversation: &str, n: u64) -> Mention {
        test_mention(conversation, n, &format!("{conversation}-{n}"), true)
    }

    fn contents(batch: &[Mention]) -> Vec<&str> {
        batch.iter().map(|m| m.content.as_str()).collect()
    }

    #[test]
    fn oldest_waiting_conversation_goes_first_and_batches_take_everything() {
        let mut queue = Queue::default();
        queue.push_back(mention("a", 1));
        queue.push_back(mention("b", 1));
        queue.push_back(mention("a", 2));
        let now = Instant::now();
        let (key, batch) = queue.next_batch(now).expect("a");
        assert_eq!(key.as_str(), "group:a");
        assert_eq!(contents(&batch), ["a-1", "a-2"]);
        let (key, _) = queue.next_batch(now).expect("b");
        assert_eq!(key.as_str(), "group:b");
        assert!(queue.next_batch(now).is_none());
    }

    #[test]
    fn one_turn_per_conversation_and_backoff_delays_it() {
        let mut queue = Queue::default();
        queue.push_back(mention("a", 1));
        let now = Instant::now();
        let (key, _) = queue.next_batch(now).expect("first");
        queue.push_back(mention("a", 2));
        assert!(queue.next_batch(now).is_none(), "a turn is in flight");
        queue.turn_ended(&key, Some(now + Duration::from_secs(5)));
        assert!(queue.next_batch(now).is_none(), "backing off");
        assert_eq!(queue.next_wake(), Some(now + Duration::from_secs(5)));
        assert!(queue.next_batch(now + Duration::from_secs(5)).is_some());
    }

    #[test]
    fn returned_mentions_go_to_the_front_and_duplicates_are_ignored() {
        let mut queue = Queue::default();
        queue.push_back(mention("a", 3));
        queue.push_front(vec![mention("a", 1), mention("a", 2)]);
        queue.push_back(mention("a", 3));
        let (_, batch) = queue.next_batch(Instant::now()).expect("batch");
        assert_eq!(contents(&batch), ["a-1", "a-2", "a-3"]);
    }

    #[test]
    fn a_full_lane_drops_its_oldest() {
        let mut queue = Queue::default();
        let mut dropped = Vec::new();
        for n in 0..=CONVERSATION_QUEUE_CAP as u64 {
            let mut m = mention("a", n);
            m.content = format!("{n}");
            dropped.extend(queue.push_back(m));
        }
        assert_eq!(contents(&dropped), ["0"]);
        assert_eq!(queue.depth(), CONVERSATION_QUEUE_CAP);
        let (_, batch) = queue.next_batch(Instant::now()).expect("batch");
        assert_eq!(batch.len(), BATCH_CAP);
        assert_eq!(batch[0].content, "1");
    }
}
