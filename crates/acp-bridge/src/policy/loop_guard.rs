//! Bounds reply chains, so that no two bots answer each other forever.
//!
//! Each of our replies remembers how deep in a chain it sits; a mention
//! that answers one of our replies inherits that depth. A DM's reply is
//! remembered by its rumor's id, the id the peer's reply references (the
//! gift wrap's own id is never referenced).
//!
//! Who is a bot? By its replies to us, not by what it says it is: an author
//! that keeps answering our replies, chain after chain, behaves as a bot in
//! a loop whatever it is, and a bound on the chain's depth is the one
//! signal that cannot be faked or missed. Reply latency (fast means bot)
//! misjudges a busy host and a quick typist; the NIP-24 `bot` profile flag
//! is set only by bots that already behave, and costs a profile fetch per
//! author. So:
//! - siblings (bots by the owner's attestation) are cut silently at
//!   `--max-bot-hops` (default 3), as they are known to be bots;
//! - everyone else but the owner (strangers in `anyone` mode, allowlisted
//!   people, and the bots among them) is bounded at `--max-reply-chain`
//!   (default 20, far deeper than a conversation usually goes in one
//!   thread): the mention at the bound gets one notice saying why and how to
//!   go on (a new message, not a reply to ours, starts a new chain and keeps
//!   the conversation's session), and any mention deeper than that is cut
//!   silently. A bot answering the notice is thus cut one hop later.
//! - the owner is never cut: their commands and answers must always land.
//!
//! A follow-up in a thread the bot answered in (`--follow-threads
//! involved`) is heard without tagging the bot and may reply to anything in
//! the thread: the root, its own last message, another bot's. It would
//! start every chain afresh, and two bots in one thread would answer each
//! other without end. So an untagged follow-up continues the thread's
//! deepest exchange with the bot: it is one deeper than the deepest
//! mention taken in there (tagged or not), or as deep as the reply it
//! answers if that is deeper, and the same bounds apply.
//!
//! Every cut is logged and counted (`events_dropped{reason="loop_bound"}`).
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

use acp_bridge_core::standing::Standing;
use nostr_sdk::prelude::EventId;
use tokio::sync::mpsc;

/// Replies remembered; older ones are forgotten first.
const REMEMBERED_REPLIES: usize = 4096;
/// Threads whose deepest mention is remembered; older ones are forgotten
/// first (a forgotten thread's follow-ups start again from its replies).
const REMEMBERED_THREADS: usize = 4096;

/// How deep reply chains may go (`--max-bot-hops`, `--max-reply-chain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainBounds {
    /// Siblings are cut at this depth.
    pub max_bot_hops: u32,
    /// Everyone else but the owner is told at this depth, and cut past it.
    pub max_reply_chain: u32,
}

/// What a mention's depth in a reply chain allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    Answer,
    /// At the bound: a notice instead of an answer.
    Notice,
    /// Past the bound: nothing.
    Cut,
}

impl ChainBounds {
    /// What a mention `depth` deep from an author of `standing` gets.
    pub fn hop(&self, depth: u32, standing: Standing) -> Hop {
        match standing {
            Standing::Owner => Hop::Answer,
            Standing::Sibling if depth >= self.max_bot_hops => Hop::Cut,
            Standing::Sibling => Hop::Answer,
            Standing::Allowlisted | Standing::Stranger => match depth.cmp(&self.max_reply_chain) {
                std::cmp::Ordering::Less => Hop::Answer,
                std::cmp::Ordering::Equal => Hop::Notice,
                std::cmp::Ordering::Greater => Hop::Cut,
            },
        }
    }

    /// The notice at the bound.
    pub fn notice(&self) -> String {
        format!(
            "This reply chain is {} replies deep, so I stop answering in it: that is how I keep bots from answering each other forever. To go on, send a new message instead of a reply to mine.",
            self.max_reply_chain
        )
    }
}

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

/// The intake's end: the depths of our recent replies, and of the deepest
/// mention taken in per thread.
#[derive(Debug)]
pub struct LoopGuard {
    reports: mpsc::UnboundedReceiver<Recorded>,
    /// Per reply of ours, the depth of a mention answering it.
    replies: Depths,
    /// Per thread root, the depth of the deepest mention taken in there.
    threads: Depths,
}

/// A guard and the recorder that feeds it.
pub fn loop_guard() -> (ReplyRecorder, LoopGuard) {
    let (sender, reports) = mpsc::unbounded_channel();
    let guard = LoopGuard {
        reports,
        replies: Depths::new(REMEMBERED_REPLIES),
        threads: Depths::new(REMEMBERED_THREADS),
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
        while let Ok(Recorded { reply, mention_depth }) = self.reports.try_recv() {
            self.replies.raise(reply, mention_depth + 1);
        }
        self.replies.get(&parent).unwrap_or(0)
    }

    /// Depth of an untagged follow-up in the thread rooted at `root` that
    /// replies to `replies_to`: one deeper than the deepest mention taken
    /// in there, or as deep as the reply of ours it answers.
    pub fn follow_up_depth(&mut self, root: EventId, replies_to: Option<EventId>) -> u32 {
        let continued = self.threads.get(&root).map_or(0, |deepest| deepest + 1);
        self.depth_of(replies_to).max(continued)
    }

    /// A mention `depth` deep in the thread rooted at `root` was taken in.
    pub fn taken_in_thread(&mut self, root: EventId, depth: u32) {
        self.threads.raise(root, depth);
    }
}

/// Depths by event id, the oldest entries forgotten past a capacity.
#[derive(Debug)]
struct Depths {
    depth: HashMap<EventId, u32>,
    order: VecDeque<EventId>,
    capacity: usize,
}

impl Depths {
    fn new(capacity: usize) -> Self {
        Depths {
            depth: HashMap::new(),
            order: VecDeque::new(),
            capacity,
        }
    }

    fn get(&self, id: &EventId) -> Option<u32> {
        self.depth.get(id).copied()
    }

    /// Remembers `depth` for `id` unless a deeper one is remembered.
    fn raise(&mut self, id: EventId, depth: u32) {
        match self.depth.get_mut(&id) {
            Some(known) => *known = (*known).max(depth),
            None => {
                self.depth.insert(id, depth);
                self.order.push_back(id);
            }
        }
        while self.order.len() > self.capacity {
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
    fn siblings_are_cut_at_the_hop_bound_others_told_at_the_chain_bound_then_cut() {
        let bounds = ChainBounds {
            max_bot_hops: 2,
            max_reply_chain: 5,
        };
        let hops = |standing| {
            (0..8)
                .map(|depth| bounds.hop(depth, standing))
                .collect::<Vec<_>>()
        };
        use Hop::{Answer, Cut, Notice};
        assert_eq!(
            hops(Standing::Sibling),
            [Answer, Answer, Cut, Cut, Cut, Cut, Cut, Cut]
        );
        for standing in [Standing::Stranger, Standing::Allowlisted] {
            assert_eq!(
                hops(standing),
                [Answer, Answer, Answer, Answer, Answer, Notice, Cut, Cut]
            );
        }
        assert_eq!(hops(Standing::Owner), [Answer; 8]);
    }

    #[test]
    fn untagged_follow_ups_continue_the_threads_deepest_exchange_whatever_they_reply_to() {
        let (recorder, mut guard) = loop_guard();
        let (root, other_bots_message) = (id(100), id(101));
        // Never seen: a follow-up starts at the depth of what it replies to.
        assert_eq!(guard.follow_up_depth(root, Some(other_bots_message)), 0);
        guard.taken_in_thread(root, 0);
        // Replying to the root, or to another bot's message, it still
        // continues the exchange: one deeper each time.
        for expected in 1..5 {
            let depth = guard.follow_up_depth(root, Some(other_bots_message));
            assert_eq!(depth, expected);
            guard.taken_in_thread(root, depth);
        }
        // A reply of ours deeper than the thread's record counts as it does.
        recorder.record_reply(id(1), 9);
        assert_eq!(guard.follow_up_depth(root, Some(id(1))), 10);
        assert_eq!(
            guard.follow_up_depth(id(200), None),
            0,
            "another thread is its own"
        );
    }

    #[test]
    fn memory_is_bounded() {
        let (recorder, mut guard) = loop_guard();
        for n in 0..(REMEMBERED_REPLIES as u32 + 10) {
            recorder.record_reply(id(n), 0);
        }
        assert_eq!(guard.depth_of(Some(id(0))), 0, "oldest forgotten");
        assert_eq!(guard.replies.depth.len(), REMEMBERED_REPLIES);
        assert_eq!(guard.depth_of(Some(id(REMEMBERED_REPLIES as u32 + 9))), 1);
        for n in 0..(REMEMBERED_THREADS as u32 + 10) {
            guard.taken_in_thread(id(n), 1);
        }
        assert_eq!(guard.threads.depth.len(), REMEMBERED_THREADS);
        assert_eq!(guard.follow_up_depth(id(0), None), 0, "oldest thread forgotten");
    }
}
