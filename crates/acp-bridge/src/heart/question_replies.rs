//! Which agent question, if any, a mention answers.
//!
//! Owns the rule and the memory of closed questions; performs no I/O. The
//! heart asks [`route`] for every mention before anything else, so an
//! answer goes to the question it answers and nothing else is swallowed:
//!
//! - A reply that tags a question (NIP-10 `reply`, or a NIP-17 `e` tag to
//!   the question's rumor) answers that question and only it, when it is
//!   the owner's and the question is open.
//! - The owner's reply to a question that is closed (answered, timed out,
//!   withdrawn, or its turn ended) is never applied to another question:
//!   the owner is told it is closed, and it is not prompted either (it was
//!   meant for a question, not for the agent).
//! - An untagged DM answers an open question only when it is the owner's,
//!   exactly one question is open in the owner's DM (questions about any
//!   DM are asked there), and it reads as an answer to it (else it is a
//!   message to the agent, not a failed answer). With shards, a question
//!   another replica asked there counts as open until it would have timed
//!   out (no replica learns when another's closes), so the owner replies
//!   to the question instead while one may be.
//! - Everything else (a sibling's DM, a stranger's reply to a question,
//!   the owner's DM while two questions are open) is an ordinary mention:
//!   queued behind the question and told so, never dropped.

use std::collections::{HashSet, VecDeque};

use acp_bridge_core::mention::{ConversationKey, Mention};
use acp_bridge_core::turn::TurnMachine;
use nostr_sdk::prelude::EventId;

/// Closed questions remembered, newest kept: enough for every question of
/// days of turns; an older one's reply is an ordinary mention.
const MAX_CLOSED_QUESTIONS_REMEMBERED: usize = 4096;

/// What a mention is to the questions of the turns in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QuestionReply {
    /// The owner's answer to the open question of the turn of this
    /// conversation.
    Answers(ConversationKey),
    /// The owner's reply to a question that is closed.
    Closed,
    /// Not an answer: a mention like any other.
    Mention,
}

/// What [`route`] needs to know beside the mention.
pub(crate) struct Venue {
    /// Whether this replica owns the mention's conversation. One it does
    /// not own reaches the heart only as the owner's reply to a question
    /// this replica asked (see `intake`): if that question is not open any
    /// more, the reply is to a closed one.
    pub owns_conversation: bool,
    /// Whether another shard may have a question open in the owner's DM.
    pub asked_elsewhere: bool,
}

/// Which question `mention` answers among the turns in flight (`turns`),
/// by the rules of the module doc.
pub(crate) fn route<'a>(
    mention: &Mention,
    turns: impl Iterator<Item = (&'a ConversationKey, &'a TurnMachine)>,
    closed: &ClosedQuestions,
    venue: Venue,
) -> QuestionReply {
    let mut open = turns.filter_map(|(key, turn)| Some((key, turn.question_event()?, turn.asks_privately())));
    if let Some(replied) = mention.replies_to {
        let answered = open.find(|(_, event, _)| *event == replied);
        return match answered {
            Some((key, ..)) if mention.from_owner => QuestionReply::Answers(key.clone()),
            None if mention.from_owner && (closed.contains(replied) || !venue.owns_conversation) => {
                QuestionReply::Closed
            }
            _ => QuestionReply::Mention,
        };
    }
    if !mention.from_owner || !mention.thread.is_direct() || venue.asked_elsewhere {
        return QuestionReply::Mention;
    }
    let mut in_the_owners_dm = open.filter(|(_, _, private)| *private);
    match (in_the_owners_dm.next(), in_the_owners_dm.next()) {
        (Some((key, ..)), None) => QuestionReply::Answers(key.clone()),
        _ => QuestionReply::Mention,
    }
}

/// Questions that were posted and have closed, the newest
/// [`MAX_CLOSED_QUESTIONS_REMEMBERED`]: a reply to one is told so.
#[derive(Debug, Default)]
pub(crate) struct ClosedQuestions {
    ids: HashSet<EventId>,
    order: VecDeque<EventId>,
}

impl ClosedQuestions {
    pub(super) fn record(&mut self, question: EventId) {
        if !self.ids.insert(question) {
            return;
        }
        self.order.push_back(question);
        if self.order.len() > MAX_CLOSED_QUESTIONS_REMEMBERED
            && let Some(oldest) = self.order.pop_front()
        {
            self.ids.remove(&oldest);
        }
    }

    pub(super) fn contains(&self, question: EventId) -> bool {
        self.ids.contains(&question)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use acp_bridge_core::mention::{Thread, test_mention};
    use acp_bridge_core::turn::{Ask, Asked, Input, TurnStart};
    use nostr_sdk::prelude::Keys;

    use super::*;

    const ONE_SHARD: Venue = Venue {
        owns_conversation: true,
        asked_elsewhere: false,
    };

    fn id(seed: u8) -> EventId {
        EventId::from_slice(&[seed; 32]).expect("id")
    }

    /// A DM mention (the owner's when `from_owner`) in conversation `key`.
    fn dm(key: &str, seed: u64, from_owner: bool) -> Mention {
        let mut mention = test_mention(key, seed, "1", from_owner);
        mention.thread = Thread::Direct {
            peer: Keys::generate().public_key(),
            message: mention.event_id,
        };
        mention.conversation = ConversationKey::from_journal(key);
        mention
    }

    /// A turn for `mention` whose question is posted as `question`.
    fn asking(mention: Mention, question: EventId) -> TurnMachine {
        let now = Instant::now();
        let start = TurnStart {
            batch: vec![mention],
            queue_wait_ms: 0,
            question_timeout: Duration::from_secs(60),
        };
        let (mut turn, _) = TurnMachine::start(start, now);
        turn.handle(Input::Leased, now);
        let asked = Asked {
            ticket: 1,
            summary: "a tool".into(),
            shows: String::new(),
            ask: Ask::Permission(Vec::new()),
        };
        turn.handle(Input::QuestionAsked(asked), now);
        turn.handle(
            Input::QuestionPosted {
                ticket: 1,
                event: Some(question),
            },
            now,
        );
        turn
    }

    fn route_among(
        mention: &Mention,
        turns: &[(ConversationKey, TurnMachine)],
        closed: &ClosedQuestions,
        venue: Venue,
    ) -> QuestionReply {
        route(
            mention,
            turns.iter().map(|(key, turn)| (key, turn)),
            closed,
            venue,
        )
    }

    #[test]
    fn a_reply_tagging_a_question_answers_that_one_only_from_the_owner() {
        let (sibling, owner) = (dm("dm:sibling", 1, false), dm("dm:owner", 2, true));
        let turns = [
            (sibling.conversation.clone(), asking(sibling.clone(), id(7))),
            (owner.conversation.clone(), asking(owner.clone(), id(8))),
        ];
        let closed = ClosedQuestions::default();
        let mut reply = dm("dm:owner", 3, true);
        reply.replies_to = Some(id(7));
        assert_eq!(
            route_among(&reply, &turns, &closed, ONE_SHARD),
            QuestionReply::Answers(sibling.conversation.clone())
        );
        reply.from_owner = false;
        assert_eq!(
            route_among(&reply, &turns, &closed, ONE_SHARD),
            QuestionReply::Mention
        );
    }

    #[test]
    fn the_owners_reply_to_a_closed_question_is_told_closed_never_applied_to_another() {
        let owner = dm("dm:owner", 1, true);
        let turns = [(owner.conversation.clone(), asking(owner.clone(), id(8)))];
        let mut closed = ClosedQuestions::default();
        closed.record(id(7));
        let mut reply = dm("dm:owner", 2, true);
        reply.replies_to = Some(id(7));
        assert_eq!(
            route_among(&reply, &turns, &closed, ONE_SHARD),
            QuestionReply::Closed
        );
        reply.from_owner = false;
        assert_eq!(
            route_among(&reply, &turns, &closed, ONE_SHARD),
            QuestionReply::Mention
        );

        // Another shard's conversation reaches this one only as a reply to
        // a question asked here: not open any more, it is closed.
        let mut forgotten = dm("dm:owner", 3, true);
        forgotten.replies_to = Some(id(9));
        let elsewhere = Venue {
            owns_conversation: false,
            asked_elsewhere: false,
        };
        assert_eq!(
            route_among(&forgotten, &turns, &closed, elsewhere),
            QuestionReply::Closed
        );
        assert_eq!(
            route_among(&forgotten, &turns, &closed, ONE_SHARD),
            QuestionReply::Mention
        );
    }

    #[test]
    fn an_untagged_dm_answers_only_the_owners_single_open_question() {
        let (sibling, owner) = (dm("dm:sibling", 1, false), dm("dm:owner", 2, true));
        let one = [(owner.conversation.clone(), asking(owner.clone(), id(8)))];
        let closed = ClosedQuestions::default();
        let untagged = dm("dm:owner", 3, true);
        assert_eq!(
            route_among(&untagged, &one, &closed, ONE_SHARD),
            QuestionReply::Answers(owner.conversation.clone())
        );
        let another_shard_asked = Venue {
            owns_conversation: true,
            asked_elsewhere: true,
        };
        assert_eq!(
            route_among(&untagged, &one, &closed, another_shard_asked),
            QuestionReply::Mention
        );

        let two = [
            (owner.conversation.clone(), asking(owner.clone(), id(8))),
            (sibling.conversation.clone(), asking(sibling.clone(), id(7))),
        ];
        assert_eq!(
            route_among(&untagged, &two, &closed, ONE_SHARD),
            QuestionReply::Mention
        );

        // The sibling's own DM while its conversation waits: a mention.
        let from_sibling = dm("dm:sibling", 4, false);
        let its_own = [(sibling.conversation.clone(), asking(sibling.clone(), id(7)))];
        assert_eq!(
            route_among(&from_sibling, &its_own, &closed, ONE_SHARD),
            QuestionReply::Mention
        );

        // Public threads answer only by replying to the question.
        let public = test_mention("room", 5, "1", true);
        let in_public = [(public.conversation.clone(), asking(public.clone(), id(6)))];
        assert_eq!(
            route_among(&public, &in_public, &closed, ONE_SHARD),
            QuestionReply::Mention
        );
    }

    #[test]
    fn closed_questions_are_remembered_up_to_the_bound() {
        let mut closed = ClosedQuestions::default();
        for n in 0..=MAX_CLOSED_QUESTIONS_REMEMBERED as u64 {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&n.to_be_bytes());
            closed.record(EventId::from_slice(&bytes).expect("id"));
        }
        assert_eq!(closed.order.len(), MAX_CLOSED_QUESTIONS_REMEMBERED);
        assert!(
            !closed.contains(EventId::from_slice(&[0u8; 32]).expect("id")),
            "the oldest is forgotten"
        );
    }
}
