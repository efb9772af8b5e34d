//! Bounds bot-to-bot reply chains.
//!
//! Sibling bots that mention each other can ping-pong forever. Each of our
//! replies remembers how deep in such a chain it sits; a sibling's mention
//! that answers one of our replies inherits that depth, and past
//! `--max-bot-hops` it is not answered (and the cut is logged). People are
//! never cut: a person talking with the bot builds the same chains.
//!
//! The memory is bounded and lives in process: after a restart chains start
//! again from zero, which bounds them all the same.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use nostr_sdk::prelude::EventId;

/// Replies remembered; older ones are forgotten first.
const REMEMBERED_REPLIES: usize = 4096;

#[derive(Debug, Default)]
pub struct LoopGuard {
    inner: Mutex<Remembered>,
}

#[derive(Debug, Default)]
struct Remembered {
    depth: HashMap<EventId, u32>,
    order: VecDeque<EventId>,
}

impl LoopGuard {
    /// Depth of a mention that replies to `replies_to`: the depth of our
    /// reply it answers, or 0 when it answers none of ours.
    pub fn depth_of(&self, replies_to: Option<EventId>) -> u32 {
        let Some(parent) = replies_to else {
            return 0;
        };
        self.lock().depth.get(&parent).copied().unwrap_or(0)
    }

    /// Remembers our reply to a mention of depth `mention_depth`.
    pub fn record_reply(&self, reply: EventId, mention_depth: u32) {
        let mut remembered = self.lock();
        if remembered.depth.insert(reply, mention_depth + 1).is_none() {
            remembered.order.push_back(reply);
        }
        while remembered.order.len() > REMEMBERED_REPLIES {
            if let Some(oldest) = remembered.order.pop_front() {
                remembered.depth.remove(&oldest);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Remembered> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(byte: u8) -> EventId {
        EventId::from_slice(&[byte; 32]).expect("32 bytes")
    }

    #[test]
    fn depth_grows_along_a_chain_of_our_replies() {
        let guard = LoopGuard::default();
        assert_eq!(guard.depth_of(None), 0);
        assert_eq!(guard.depth_of(Some(id(1))), 0, "not one of ours");
        guard.record_reply(id(1), 0);
        assert_eq!(guard.depth_of(Some(id(1))), 1);
        guard.record_reply(id(2), guard.depth_of(Some(id(1))));
        assert_eq!(guard.depth_of(Some(id(2))), 2);
    }

    #[test]
    fn memory_is_bounded() {
        let guard = LoopGuard::default();
        for n in 0..(REMEMBERED_REPLIES as u32 + 10) {
            let mut bytes = [0u8; 32];
            bytes[..4].copy_from_slice(&n.to_be_bytes());
            guard.record_reply(EventId::from_slice(&bytes).expect("id"), 0);
        }
        assert_eq!(guard.lock().depth.len(), REMEMBERED_REPLIES);
        assert_eq!(
            guard.depth_of(Some(EventId::from_slice(&[0; 32]).expect("id"))),
            0,
            "oldest forgotten"
        );
    }
}
