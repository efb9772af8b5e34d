//! Bounds bot-to-bot reply chains.
//!
//! Sibling bots that mention each other can ping-pong forever. Each of our
//! replies remembers how deep in such a chain it sits; a sibling's mention
//! that answers one of our replies inherits that depth, and past
//! `--max-bot-hops` it is not answered (and the cut is logged). People are
//! never cut: a person talking with the bot builds the same chains.
//!
//! One owner, no lock: the intake owns the [`LoopGuard`]; the replier only
//! reports each reply it stores through a [`ReplyRecorder`], and the guard
//! takes those reports in before it answers. A reply is stored before it
//! is published, and a sibling can only answer it once it is published, so
//! its report is always in by then.
//!
//! The memory is bounded and lives in process: after a restart chains start
//! again from zero, which bounds them all the same.

use std::collections::{HashMap, VecDeque};

use nostr_sdk::prelude::EventId;
use tokio::sync::mpsc;

/// Replies remembered; older ones are forgotten first.
const REMEMBERED_REPLIES: usize = 4096;

/// Our reply `reply` answered a mention `mention_depth` deep in a chain.
#[derive(Debug)]
struct Recorded {
    reply: EventId,
    mention_depth: u32,
}

/// The replier's end: reports every stored reply.
#[derive(Debug, Clone)]
pub struct ReplyRecorder(mpsc::UnboundedSender<Recorded>);

impl ReplyRecorder {
    /// Remembers our reply to a mention of depth `mention_depth`.
    pub fn record_reply(&self, reply: EventId, mention_depth: u32) {
        // The intake is gone only at shutdown, when no chain matters.
        let _ = self.0.send(Recorded { reply, mention_depth });
    }
}

/// The intake's end: the depths of our recent replies.
#[derive(Debug)]
pub struct LoopGuard {
    reports: mpsc::UnboundedReceiver<Recorded>,
    depth: HashMap<EventId, u32>,
    order: VecDeque<EventId>,
}

/// A guard and the recorder that feeds it.
pub fn loop_guard() -> (ReplyRecorder, LoopGuard) {
    let (sender, reports) = mpsc::unbounded_channel();
    let guard = LoopGuard {
        reports,
        depth: HashMap::new(),
        order: VecDeque::new(),
    };
    (ReplyRecorder(sender), guard)
}

impl LoopGuard {
    /// Depth of a mention that replies to `replies_to`: the depth of our
    /// reply it answers, or 0 when it answers none of ours.
    pub fn depth_of(&mut self, replies_to: Option<EventId>) -> u32 {
        let Some(parent) = replies_to else {
            return 0;
        };
        while let Ok(recorded) = self.reports.try_recv() {
            self.remember(recorded);
        }
        self.depth.get(&parent).copied().unwrap_or(0)
    }

    fn remember(&mut self, Recorded { reply, mention_depth }: Recorded) {
        if self.depth.insert(reply, mention_depth + 1).is_none() {
            self.order.push_back(reply);
        }
        while self.order.len() > REMEMBERED_REPLIES {
            if let Some(oldest) = self.order.pop_front() {
                self.depth.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u32) -> EventId {
        let mut bytes = [0u8; 32];
        bytes[..4].copy_from_slice(&n.to_be_bytes());
        EventId::from_slice(&bytes).expect("32 bytes")
    }

    #[test]
    fn depth_grows_along_a_chain_of_our_replies() {
        let (recorder, mut guard) = loop_guard();
        assert_eq!(guard.depth_of(None), 0);
        assert_eq!(guard.depth_of(Some(id(1))), 0, "not one of ours");
        recorder.record_reply(id(1), 0);
        assert_eq!(guard.depth_of(Some(id(1))), 1);
        let depth = guard.depth_of(Some(id(1)));
        recorder.record_reply(id(2), depth);
        assert_eq!(guard.depth_of(Some(id(2))), 2);
    }

    #[test]
    fn memory_is_bounded() {
        let (recorder, mut guard) = loop_guard();
        for n in 0..(REMEMBERED_REPLIES as u32 + 10) {
            recorder.record_reply(id(n), 0);
        }
        assert_eq!(guard.depth_of(Some(id(0))), 0, "oldest forgotten");
        assert_eq!(guard.depth.len(), REMEMBERED_REPLIES);
        assert_eq!(guard.depth_of(Some(id(REMEMBERED_REPLIES as u32 + 9))), 1);
    }
}
