//! The ledger: every journal transition of a mention, in one type.
//!
//! A mention is journaled at acceptance (the intake), counted per attempt
//! (the heart), and finished exactly once: answered or notified together
//! with the event that says so (the replier stores the event and finishes
//! the mentions in one transaction), or dropped without an event. Nothing
//! else writes a mention's state, so "every accepted mention ends in a
//! reply, a merge into a reply, or a notice" is a property of this type's
//! callers, which hand it the mentions they end, and of the store's
//! transactions underneath.
//!
//! The ledger owns the mapping of [`Mention`] onto the store's rows (hex ids
//! and JSON payloads). It owns no queue and decides nothing.

use std::collections::HashSet;
use std::sync::Arc;

use acp_bridge_core::mention::{ConversationKey, Mention};
use nostr_sdk::prelude::{Event, EventId, JsonUtil, PublicKey, Timestamp};

use crate::state::store::{
    AnsweredThreads, Finish, MentionState, NewMention, OutgoingEvent, PendingCursor, Store, StoreError,
    sql_now, sql_seconds,
};

/// Pending mentions read from the journal in one go at start-up.
const PENDING_PAGE: usize = 512;

#[derive(Debug, thiserror::Error)]
pub(crate) enum LedgerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot serialize a mention: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// A mention of a conversation another shard answers (`--shard`): what
/// the journal keeps of it, only so that it is a duplicate when a relay
/// offers it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OtherShards {
    pub event_id: EventId,
    pub author: PublicKey,
    pub conversation: ConversationKey,
    pub accepted_at: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct Ledger {
    store: Arc<Store>,
    /// Threads answered without an event of ours (`thread_answered`).
    threads: AnsweredThreads,
}

impl Ledger {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Ledger {
            threads: AnsweredThreads::new(Arc::clone(&store)),
            store,
        }
    }

    /// Journals `mentions` as pending, in one transaction. One flag per
    /// mention, in order: false for a mention taken in before (a duplicate).
    #[cfg(test)]
    pub(crate) fn accept(&self, mentions: &[&Mention]) -> Result<Vec<bool>, LedgerError> {
        self.take_in(mentions, &[]).map(|(fresh, _)| fresh)
    }

    /// [`Ledger::accept`] for `ours`, and in the same transaction `others`
    /// (conversations another shard answers) journaled as finished at
    /// once: seen, so never taken twice, and never resumed here. One flag
    /// per mention of each slice, in order: false for a duplicate.
    pub(crate) fn take_in(
        &self,
        ours: &[&Mention],
        others: &[&OtherShards],
    ) -> Result<(Vec<bool>, Vec<bool>), LedgerError> {
        let ids: Vec<String> = ours.iter().map(|mention| mention.event_id.to_hex()).collect();
        let payloads = ours
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<Vec<String>, _>>()?;
        let records: Vec<NewMention<'_>> = ours
            .iter()
            .zip(&ids)
            .zip(&payloads)
            .map(|((mention, event_id), payload)| NewMention {
                event_id,
                conversation: mention.conversation.as_str(),
                payload,
                accepted_at: sql_seconds(mention.accepted_at),
            })
            .collect();
        let other_ids: Vec<String> = others.iter().map(|other| other.event_id.to_hex()).collect();
        let other_records: Vec<NewMention<'_>> = others
            .iter()
            .zip(&other_ids)
            .map(|(other, event_id)| NewMention {
                event_id,
                conversation: other.conversation.as_str(),
                // Never read: the row is finished, kept only as a seen id.
                payload: "{}",
                accepted_at: sql_seconds(other.accepted_at),
            })
            .collect();
        Ok(self.store.journal_take_in(&records, &other_records, sql_now())?)
    }

    /// Hands a delegated task's result back (see `heart/tasks`): finishes
    /// the task's own row `task` (its turn's mention, or the sibling
    /// bot's reply; `None` for a task without one) as `finish`, and
    /// journals `result` (`None`: nothing to deliver) pending in its
    /// parent conversation, in one transaction. False, and nothing
    /// written, when the task's row was finished before.
    pub(crate) fn hand_back(
        &self,
        task: Option<&Mention>,
        finish: Finish,
        result: Option<&Mention>,
    ) -> Result<bool, LedgerError> {
        let task_id = task.map(|task| task.event_id.to_hex());
        let result_id = result.map(|result| result.event_id.to_hex());
        let payload = result.map(serde_json::to_string).transpose()?;
        let record =
            result
                .zip(result_id.as_deref())
                .zip(payload.as_deref())
                .map(|((result, event_id), payload)| NewMention {
                    event_id,
                    conversation: result.conversation.as_str(),
                    payload,
                    accepted_at: sql_seconds(result.accepted_at),
                });
        Ok(self
            .store
            .journal_hand_back(task_id.as_deref(), finish, record.as_ref(), sql_now())?)
    }

    /// Journals `event_ids` as seen and finished: the bot's own replies on a
    /// relay show that a daemon of this bot took them (a shard before the
    /// shard count changed, or this daemon before its state dir was lost),
    /// so offering them again is a duplicate. Ids journaled already keep
    /// their state (a pending one still resumes). Returns the new ones.
    pub(crate) fn taken_elsewhere(&self, event_ids: &[EventId]) -> Result<Vec<EventId>, LedgerError> {
        let ids: Vec<String> = event_ids.iter().map(EventId::to_hex).collect();
        let now = sql_now();
        let records: Vec<NewMention<'_>> = ids
            .iter()
            .map(|event_id| NewMention {
                event_id,
                // Never read: the row is finished, kept only as a seen id.
                conversation: "",
                payload: "{}",
                accepted_at: now,
            })
            .collect();
        let (_, fresh) = self.store.journal_take_in(&[], &records, now)?;
        let new_ones = event_ids.iter().zip(fresh).filter(|(_, fresh)| *fresh);
        Ok(new_ones.map(|(event_id, _)| *event_id).collect())
    }

    /// Journals what `mention` is now to become (its intent changed after
    /// acceptance), so a restart resumes it as that.
    pub(crate) fn reclassify(&self, mention: &Mention) -> Result<(), LedgerError> {
        let payload = serde_json::to_string(mention)?;
        Ok(self
            .store
            .journal_rewrite_pending(&mention.event_id.to_hex(), &payload)?)
    }

    /// Remembers that the bot answered in the thread of `mention` (DMs have
    /// none); true when the thread is new to it.
    pub(crate) fn thread_answered(&self, mention: &Mention) -> bool {
        let Some(root) = mention.thread.root_event() else {
            return false;
        };
        self.threads
            .answered(root, Timestamp::now())
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "cannot remember an answered thread");
                false
            })
    }

    /// Which of `event_ids` the journal took in (and has not pruned).
    pub(crate) fn journaled_among(&self, event_ids: &[EventId]) -> Result<HashSet<EventId>, StoreError> {
        let ids: Vec<String> = event_ids.iter().map(EventId::to_hex).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let found = self.store.journal_contains_any(&ids)?;
        Ok(event_ids
            .iter()
            .zip(&ids)
            .filter(|(_, id)| found.contains(*id))
            .map(|(event_id, _)| *event_id)
            .collect())
    }

    /// How many mentions are pending (for `--max-queued`).
    pub(crate) fn pending_count(&self) -> Result<u64, StoreError> {
        self.store.journal_pending_count()
    }

    /// Removes mentions finished before `finished_before` and accepted
    /// before `accepted_before` (unix seconds); returns how many. Pending
    /// mentions are never removed; a removed id is no longer a duplicate.
    pub(crate) fn prune(&self, finished_before: i64, accepted_before: i64) -> Result<usize, StoreError> {
        self.store.journal_prune(finished_before, accepted_before)
    }

    /// Every delegated task id the journal holds, in any state (see
    /// `heart/tasks`: new ids go on after them).
    pub(crate) fn task_ids(&self) -> Result<Vec<String>, StoreError> {
        self.store.journal_task_ids()
    }

    /// Whether `event_id` is journaled and not finished yet (waiting or
    /// running).
    pub(crate) fn is_pending(&self, event_id: &EventId) -> Result<bool, StoreError> {
        Ok(self.store.journal_state(&event_id.to_hex())? == Some(MentionState::Pending))
    }

    /// Whether the event was taken in before (the seen set).
    pub(crate) fn seen(&self, event_id: &str) -> bool {
        self.store.journal_contains(event_id).unwrap_or(false)
    }

    /// The mentions accepted but not finished (after a restart), oldest
    /// first, a page of at most [`PENDING_PAGE`] after `after` at a time;
    /// with the cursor of the next page, `None` after the last. An
    /// unreadable entry is finished as dropped (and logged) rather than
    /// blocking the rest.
    pub(crate) fn pending_page(&self, after: Option<PendingCursor>) -> (Vec<Mention>, Option<PendingCursor>) {
        let page = match self.store.journal_pending_page(after, PENDING_PAGE) {
            Ok(page) => page,
            Err(error) => {
                tracing::error!(%error, "cannot read the journal");
                return (Vec::new(), None);
            }
        };
        let next = (page.len() == PENDING_PAGE)
            .then(|| page.last().map(|entry| entry.cursor))
            .flatten();
        let mentions = page
            .into_iter()
            .filter_map(|entry| match serde_json::from_str::<Mention>(&entry.payload) {
                Ok(mention) => Some(mention),
                Err(error) => {
                    tracing::error!(event_id = %entry.event_id, %error, "unreadable journal entry dropped");
                    self.finish(&[entry.event_id.as_str()], Finish::Dropped);
                    None
                }
            })
            .collect();
        (mentions, next)
    }

    /// Mention `event_id` if it was taken in for `conversation` (and is
    /// still journaled); `None` for a mention of any other conversation.
    pub(crate) fn mention_in(&self, event_id: &EventId, conversation: &ConversationKey) -> Option<Mention> {
        let payload = self
            .store
            .journal_payload_in(&event_id.to_hex(), conversation.as_str())
            .inspect_err(|error| tracing::error!(%error, "cannot read the journal"))
            .ok()??;
        serde_json::from_str(&payload).ok()
    }

    /// Counts one more failed turn for `mentions`; returns the most any of
    /// them has had (so a retry bound holds across restarts).
    pub(crate) fn attempted(&self, mentions: &[Mention], unknown: u32) -> u32 {
        mentions
            .iter()
            .filter_map(|mention| self.store.journal_record_attempt(&mention.event_id.to_hex()).ok())
            .max()
            .unwrap_or(unknown)
    }

    /// Stores a signed outgoing event and finishes `settles` with it in one
    /// transaction. `settles` may be empty (a question, a courtesy notice).
    pub(crate) fn record_outgoing(
        &self,
        outgoing: &OutgoingEvent<'_>,
        settles: &[Mention],
        finish: Finish,
    ) -> Result<(), StoreError> {
        let ids = hex_ids(settles);
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        self.store.outbox_put(outgoing, &ids, finish, sql_now())
    }

    /// Stores the signed events of one answer (the parts of a series, in
    /// order) for the relay `relay_hint` (`None`: every relay), finishes
    /// `settles` with the first of them and remembers the thread of
    /// `answers_in` as answered (see [`thread_answered`](Self::thread_answered)),
    /// in one transaction. True when that thread is new to the bot.
    pub(crate) fn record_series(
        &self,
        events: &[Event],
        relay_hint: Option<&str>,
        settles: &[Mention],
        finish: Finish,
        answers_in: Option<&Mention>,
    ) -> Result<bool, StoreError> {
        let rows: Vec<(String, String)> = events
            .iter()
            .map(|event| (event.id.to_hex(), event.as_json()))
            .collect();
        let outgoing: Vec<OutgoingEvent<'_>> = rows
            .iter()
            .map(|(event_id, json)| OutgoingEvent {
                event_id,
                relay_hint,
                json,
            })
            .collect();
        let ids = hex_ids(settles);
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let root = answers_in.and_then(thread_root);
        self.store
            .outbox_put_series(&outgoing, &ids, finish, root.as_deref(), sql_now())
    }

    /// Finishes `mentions` without an event of ours (`--reply-mode agent`:
    /// the agent answered for itself).
    pub(crate) fn settle_without_event(
        &self,
        mentions: &[Mention],
        finish: Finish,
    ) -> Result<(), StoreError> {
        let ids = hex_ids(mentions);
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        self.store.journal_finish(&ids, finish, sql_now())
    }

    fn finish(&self, event_ids: &[&str], finish: Finish) {
        if let Err(error) = self.store.journal_finish(event_ids, finish, sql_now()) {
            tracing::error!(%error, "cannot finish a journal entry");
        }
    }
}

/// The root of the thread `mention` is in (`Thread::root_event`; DMs and
/// encrypted groups have none), as the store keeps it.
fn thread_root(mention: &Mention) -> Option<String> {
    mention.thread.root_event().map(|root| root.to_hex())
}

fn hex_ids(mentions: &[Mention]) -> Vec<String> {
    mentions.iter().map(|mention| mention.event_id.to_hex()).collect()
}

#[cfg(test)]
mod tests {

    use acp_bridge_core::mention::test_mention;

    use super::*;
    use crate::state::store::MentionState;
    use crate::state::store::scratch::ScratchDir;

    fn ledger(dir: &ScratchDir) -> Ledger {
        Ledger::new(Arc::new(Store::open(dir.path()).expect("store")))
    }

    #[test]
    fn a_mention_is_pending_from_acceptance_until_an_event_settles_it() {
        let dir = ScratchDir::new("ledger");
        let ledger = ledger(&dir);
        let (first, second) = (
            test_mention("room", 1, "a", true),
            test_mention("room", 2, "b", true),
        );
        assert_eq!(
            ledger.accept(&[&first, &second, &first]).unwrap(),
            [true, true, false]
        );
        assert!(ledger.seen(&first.event_id.to_hex()));
        assert_eq!(ledger.pending_page(None).0, [first.clone(), second.clone()]);

        assert_eq!(ledger.attempted(std::slice::from_ref(&first), 9), 1);
        assert_eq!(ledger.attempted(&[first.clone(), second.clone()], 9), 2);

        ledger
            .record_outgoing(
                &OutgoingEvent {
                    event_id: "reply",
                    relay_hint: None,
                    json: "{}",
                },
                std::slice::from_ref(&first),
                Finish::Answered,
            )
            .unwrap();
        ledger
            .settle_without_event(std::slice::from_ref(&second), Finish::Dropped)
            .unwrap();
        assert!(ledger.pending_page(None).0.is_empty());
        let state = |mention: &Mention| ledger.store.journal_state(&mention.event_id.to_hex()).unwrap();
        assert_eq!(state(&first), Some(MentionState::Answered));
        assert_eq!(state(&second), Some(MentionState::Dropped));
    }

    #[test]
    fn a_task_row_resumes_as_a_task_until_its_result_is_handed_back_once() {
        let dir = ScratchDir::new("ledger-tasks");
        let ledger = ledger(&dir);
        let parent = ConversationKey::from_journal("group:room");
        let mut task = test_mention("room/task/t1", 1, "count the apples", true);
        task.intent = acp_bridge_core::mention::Intent::Task {
            task: "t1".to_owned(),
            parent: parent.clone(),
        };
        ledger.take_in(&[&task], &[]).unwrap();
        assert_eq!(
            ledger.pending_page(None).0,
            [task.clone()],
            "a task resumes as one"
        );

        let mut result = test_mention("room", 2, "42", true);
        result.intent = acp_bridge_core::mention::Intent::TaskResult {
            task: "t1".to_owned(),
        };
        assert!(
            ledger
                .hand_back(Some(&task), Finish::Answered, Some(&result))
                .unwrap()
        );
        assert_eq!(
            ledger.pending_page(None).0,
            [result.clone()],
            "the result resumes, the task does not"
        );
        let mut again = result.clone();
        again.event_id = test_mention("room", 3, "", true).event_id;
        assert!(
            !ledger
                .hand_back(Some(&task), Finish::Answered, Some(&again))
                .unwrap()
        );
        assert_eq!(ledger.pending_page(None).0, [result], "handed back once");
    }

    #[test]
    fn pending_mentions_are_read_a_page_at_a_time_in_acceptance_order() {
        let dir = ScratchDir::new("ledger-pages");
        let ledger = ledger(&dir);
        let total = PENDING_PAGE + 3;
        let mentions: Vec<Mention> = (0..total as u64)
            .map(|n| test_mention("room", n + 1, &n.to_string(), true))
            .collect();
        ledger.accept(&mentions.iter().collect::<Vec<_>>()).unwrap();

        let (first, next) = ledger.pending_page(None);
        assert_eq!(first.len(), PENDING_PAGE);
        let (second, last) = ledger.pending_page(next);
        assert_eq!(last, None, "the short page is the last");
        let read: Vec<Mention> = first.into_iter().chain(second).collect();
        assert_eq!(read, mentions);
    }

    #[test]
    fn an_unreadable_entry_is_dropped_and_the_rest_resume() {
        let dir = ScratchDir::new("ledger-unreadable");
        let ledger = ledger(&dir);
        let good = test_mention("room", 1, "fine", true);
        ledger.accept(&[&good]).unwrap();
        let broken = NewMention {
            event_id: "broken",
            conversation: "room",
            payload: "{not json",
            accepted_at: 0,
        };
        ledger.store.journal_accept_all(&[broken]).unwrap();
        assert_eq!(ledger.pending_page(None).0, [good]);
        assert_eq!(
            ledger.store.journal_state("broken").unwrap(),
            Some(MentionState::Dropped)
        );
    }
}
