use std::time::Duration;

use super::*;
use crate::mention::test_mention;
use crate::prompt::Framing;
use crate::turn::TurnStart;

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
fn refused_mentions_leave_the_next_batch_and_the_rest_starts() {
    let mut conversations = Conversations::<Vec<Mention>>::new(Some(AFTER));
    let now = Instant::now();
    conversations.enqueue(mention("a", 1), now);
    conversations.enqueue(mention("a", 2), now);
    conversations.enqueue(mention("b", 1), now);
    let refused = conversations.refuse_next(|m| (m.content == "a-1").then_some("spent"));
    assert_eq!(refused.len(), 1);
    assert_eq!((refused[0].0.content.as_str(), refused[0].1), ("a-1", "spent"));
    assert_eq!(conversations.waiting(), 2);
    let (key, batch) = start(&mut conversations).expect("a");
    assert_eq!((key.as_str(), contents(&batch)), ("group:a", vec!["a-2"]));
    let refused = conversations.refuse_next(|_| Some("spent"));
    assert_eq!(refused.len(), 1, "b's only mention");
    assert_eq!(conversations.waiting(), 0);
    assert!(start(&mut conversations).is_none());

    let mut alone = Conversations::<Vec<Mention>>::new(Some(AFTER));
    alone.enqueue(mention("c", 1), now);
    assert!(alone.next_due().is_some());
    assert_eq!(alone.refuse_next(|_| Some("spent")).len(), 1);
    assert_eq!(alone.next_due(), None, "a refused mention is due no notice");
    assert!(alone.by_key.is_empty(), "nor is its conversation kept");
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

const AFTER: Duration = Duration::from_secs(5);

fn waiter(conversation: &str, n: u64) -> Mention {
    test_mention(conversation, n, "hi", false)
}

/// Fails the conversation's turn; its work is queued again for a retry
/// at `at`.
fn fail_and_requeue(conversations: &mut Conversations<Vec<Mention>>, key: &ConversationKey, at: Instant) {
    let retry = Retry {
        at,
        after: "the agent failed to start up".to_owned(),
    };
    let work = conversations.end_turn(key, Some(retry)).expect("a turn").link;
    assert!(conversations.push_front(work).is_empty());
}

/// Whether `id` waits in a turn whose agent is starting.
fn starting(
    conversations: &Conversations<Vec<Mention>>,
    key: &ConversationKey,
    id: &EventId,
) -> Option<Holdup> {
    match conversations.why_waits(key, id, Instant::now(), 1)? {
        (holdup @ Holdup::AgentStarting { .. }, mention) => {
            assert_eq!(mention.event_id, *id);
            Some(holdup)
        }
        _ => None,
    }
}

#[test]
fn a_mention_that_starts_in_time_is_never_due() {
    let mut conversations = Conversations::new(Some(AFTER));
    let now = Instant::now();
    let mention = waiter("a", 1);
    let key = mention.conversation.clone();
    conversations.enqueue(mention, now);
    assert_eq!(conversations.next_due(), Some(now + AFTER));
    start(&mut conversations).expect("a turn");
    conversations.agent_up(&key);
    assert_eq!(conversations.next_due(), None);
    assert!(conversations.take_due(now + AFTER).is_empty());
}

#[test]
fn a_mention_is_told_once_through_retries_and_a_conversation_once_for_its_batch() {
    let mut conversations = Conversations::new(Some(AFTER));
    let now = Instant::now();
    let (first, second) = (waiter("a", 1), waiter("a", 2));
    let (key, first_id) = (first.conversation.clone(), first.event_id);
    conversations.enqueue(first, now);
    conversations.enqueue(second, now + Duration::from_secs(1));
    assert_eq!(conversations.take_due(now + AFTER), vec![(key.clone(), first_id)]);
    assert_eq!(
        conversations.next_due(),
        None,
        "the batch's other mention counts as told"
    );
    start(&mut conversations).expect("a turn");
    conversations.agent_up(&key);
    fail_and_requeue(&mut conversations, &key, now + AFTER * 2);
    assert_eq!(conversations.waiting_in(&key), 2);
    assert_eq!(
        conversations.next_due(),
        None,
        "told mentions wait silently after a retry"
    );
}

#[test]
fn a_mention_waits_on_while_its_agent_starts_and_the_reason_names_a_failure_retried() {
    let mut conversations = Conversations::new(Some(AFTER));
    let now = Instant::now();
    let mention = waiter("a", 1);
    let (id, key) = (mention.event_id, mention.conversation.clone());
    conversations.enqueue(mention, now);
    start(&mut conversations).expect("a turn");
    assert_eq!(conversations.next_due(), Some(now + AFTER), "still waiting");
    assert_eq!(
        starting(&conversations, &key, &id),
        Some(Holdup::AgentStarting { after_failure: None })
    );
    let retry_at = now + Duration::from_secs(1);
    fail_and_requeue(&mut conversations, &key, retry_at);
    conversations.wake(retry_at);
    start(&mut conversations).expect("the retry");
    let holdup = starting(&conversations, &key, &id).expect("starting");
    assert!(
        holdup
            .describe()
            .contains("the last attempt failed (the agent failed to start up)")
    );
    assert_eq!(conversations.next_due(), Some(now + AFTER), "still waiting");
    conversations.agent_up(&key);
    assert!(starting(&conversations, &key, &id).is_none());
    assert_eq!(conversations.next_due(), None, "the agent is up: no more waiting");
}

#[test]
fn a_retried_mention_keeps_its_first_queueing_time() {
    let mut conversations = Conversations::new(Some(AFTER));
    let now = Instant::now();
    let mention = waiter("a", 1);
    let key = mention.conversation.clone();
    conversations.enqueue(mention, now);
    start(&mut conversations).expect("a turn");
    conversations.agent_up(&key);
    fail_and_requeue(&mut conversations, &key, now + Duration::from_secs(3));
    assert_eq!(conversations.next_due(), Some(now + AFTER));
    conversations.wake(now + Duration::from_secs(3));
    start(&mut conversations).expect("the retry");
    conversations.end_turn(&key, None);
    assert_eq!(conversations.next_due(), None);
    assert!(conversations.by_key.is_empty(), "done: forgotten");
}

#[test]
fn steers_given_back_are_not_tracked_and_off_means_off() {
    let now = Instant::now();
    let mut conversations = Conversations::<Vec<Mention>>::new(Some(AFTER));
    conversations.push_back(waiter("a", 1));
    assert_eq!(conversations.next_due(), None);
    let mut off = Conversations::<Vec<Mention>>::new(None);
    off.enqueue(waiter("a", 1), now);
    assert_eq!(off.next_due(), None);
    let waits = off.by_key.values().flat_map(|conversation| &conversation.waiting);
    assert!(waits.map(|waiting| waiting.wait).all(|wait| wait.is_none()));
}

#[test]
fn a_mention_that_joins_a_starting_turn_waits_with_its_batch() {
    let mut conversations = Conversations::new(Some(AFTER));
    let now = Instant::now();
    let first = waiter("a", 1);
    let joined = test_mention("a", 2, "me too", false);
    let key = first.conversation.clone();
    assert!(
        !conversations.join_turn(&key, joined.event_id, now),
        "no turn is starting"
    );
    conversations.enqueue(first, now);
    start(&mut conversations).expect("a turn");
    let absorb = Input::Absorb {
        mentions: vec![joined.clone()],
        framing: Framing::Steer,
    };
    let joined_at = now + Duration::from_secs(1);
    conversations.step(&key, absorb, joined_at, |running, input| {
        running.turn.handle(input, joined_at)
    });
    assert_eq!(
        starting(&conversations, &key, &joined.event_id),
        Some(Holdup::AgentStarting { after_failure: None }),
        "waits with the batch"
    );
    assert_eq!(
        conversations.take_due(now + AFTER * 2),
        vec![(key.clone(), joined.event_id)]
    );
    assert_eq!(conversations.next_due(), None, "one notice for the batch");
    conversations.step(&key, Input::Leased, now, |running, input| {
        running.turn.handle(input, now)
    });
    assert!(
        !conversations.join_turn(&key, joined.event_id, now),
        "the turn is live now"
    );
}

#[test]
fn the_queue_behind_a_starting_turn_is_told_for_itself() {
    let now = Instant::now();
    let (starting, queued) = (waiter("a", 1), waiter("a", 2));
    let (key, starting_id, queued_id) = (starting.conversation.clone(), starting.event_id, queued.event_id);
    let mut conversations = Conversations::new(Some(AFTER));
    conversations.enqueue(starting.clone(), now);
    start(&mut conversations).expect("a turn");
    conversations.enqueue(queued.clone(), now + Duration::from_secs(2));
    assert_eq!(
        conversations.take_due(now + AFTER),
        vec![(key.clone(), starting_id)],
        "the starting batch is due first"
    );
    assert_eq!(
        conversations.next_due(),
        Some(now + Duration::from_secs(2) + AFTER),
        "the queued mention is not counted as told by the batch's notice"
    );
    assert_eq!(
        conversations.take_due(now + AFTER * 2),
        vec![(key.clone(), queued_id)]
    );
    assert!(matches!(
        conversations.why_waits(&key, &queued_id, now, 1),
        Some((Holdup::TurnInFlight, _))
    ));
    // Both due in one look: one notice for each group.
    let mut conversations = Conversations::new(Some(AFTER));
    conversations.enqueue(starting, now);
    start(&mut conversations).expect("a turn");
    conversations.enqueue(queued, now);
    let mut due = conversations.take_due(now + AFTER);
    due.sort_by_key(|(_, id)| *id);
    let mut expected = vec![(key.clone(), starting_id), (key, queued_id)];
    expected.sort_by_key(|(_, id)| *id);
    assert_eq!(due, expected);
    assert_eq!(conversations.next_due(), None);
}

#[test]
fn a_full_conversation_drops_its_oldest_with_its_due_notice() {
    let mut conversations = Conversations::<Vec<Mention>>::new(Some(AFTER));
    let now = Instant::now();
    conversations.enqueue(waiter("a", 0), now);
    for n in 1..=CONVERSATION_QUEUE_CAP as u64 {
        conversations.enqueue(waiter("a", n), now + Duration::from_secs(1));
    }
    assert_eq!(
        conversations.next_due(),
        Some(now + Duration::from_secs(1) + AFTER),
        "the dropped mention is due nothing"
    );
}
