//! The heart end to end: mid-turn mentions steered into the live turn
//! (natively, or by cancel + merge), queue and interrupt modes, crash
//! retries, concurrency across conversations, and SIGTERM.

mod support;

use std::time::Duration;

use nostr_sdk::prelude::*;
use support::*;

/// A bridge whose scripted agent logs the frames it receives.
fn spec_with_frame_log(
    relay: &TestRelay,
    owner: &Person,
    agent: &[&str],
    flags: &[&str],
) -> (BridgeSpec, std::path::PathBuf) {
    let frames = temp_dir("frames");
    let mut agent_flags: Vec<&str> = agent.to_vec();
    let frames_flag = frames.to_str().expect("utf-8 path").to_owned();
    agent_flags.push("--frame-log-dir");
    let spec = BridgeSpec::new(&relay.url(), owner.public_key()).flags(flags);
    let mut spec = spec.agent(&agent_flags);
    spec.agent_flags.push(frames_flag);
    (spec, frames)
}

fn count(methods: &[String], method: &str) -> usize {
    methods.iter().filter(|m| m.as_str() == method).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_mid_turn_folds_into_the_same_turn() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let (spec, frames) =
        spec_with_frame_log(&relay, &owner, &["--rounds", "6", "--round-delay-ms", "300"], &[]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;

    let first = owner.mention_in_group(&bot, "room", "write the report").await;
    bridge.wait_for_log("agent run started").await;
    let second = owner
        .mention_in_group(&bot, "room", "also cover the budget")
        .await;
    bridge.wait_for_log("steered into the live turn").await;

    let reply = owner.replies_from(&bot, &second.id, 1).await.remove(0);
    assert!(reply.content.contains("> write the report"), "{}", reply.content);
    assert!(
        reply.content.contains("steer: "),
        "the steer is in the same turn's answer: {}",
        reply.content
    );
    assert!(
        reply.content.contains("> also cover the budget"),
        "{}",
        reply.content
    );
    assert!(
        reply
            .tags
            .iter()
            .any(|tag| tag.kind() == TagKind::q() && tag.content() == Some(first.id.to_hex().as_str())),
        "{:?}",
        reply.tags
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    let methods = agent_methods(&frames);
    assert_eq!(count(&methods, "session/prompt"), 1, "one turn: {methods:?}");
    assert_eq!(count(&methods, "session/cancel"), 0, "no cancel: {methods:?}");
    assert_eq!(count(&methods, "_goose/unstable/session/steer"), 1);
    assert_eq!(
        answers_to(&owner, &bot, &first.id).await.len(),
        1,
        "the first mention is answered by the same reply"
    );
    let ends = bridge.log_events("turn finished");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["stop_reason"], "end_turn");
    assert_eq!(ends[0]["steer_path"], "native");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_native_steer_a_burst_is_merged_with_exactly_one_cancel() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let (spec, frames) = spec_with_frame_log(
        &relay,
        &owner,
        &["--no-steer", "--rounds", "40", "--round-delay-ms", "100"],
        &[],
    );
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;

    let first = owner.mention_in_group(&bot, "room", "long task").await;
    bridge.wait_for_log("agent run started").await;
    let mut burst = Vec::new();
    for n in 0..5 {
        // `[rounds=2]` makes the merged re-prompt short (the last directive wins).
        burst.push(
            owner
                .mention_in_group(&bot, "room", &format!("addendum {n} [rounds=2]"))
                .await,
        );
    }
    let newest = burst.last().expect("five").id;
    let reply = owner.replies_from(&bot, &newest, 1).await.remove(0);
    assert!(reply.content.contains("> long task"), "{}", reply.content);
    for n in 0..5 {
        assert!(
            reply.content.contains(&format!("> addendum {n}")),
            "{}",
            reply.content
        );
    }
    assert!(
        reply
            .content
            .contains("New messages arrived while you were working"),
        "steer framing: {}",
        reply.content
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    let methods = agent_methods(&frames);
    assert_eq!(
        count(&methods, "session/cancel"),
        1,
        "one burst, one cancel: {methods:?}"
    );
    assert_eq!(
        count(&methods, "session/prompt"),
        2,
        "the turn and its merged re-prompt: {methods:?}"
    );
    for mention in std::iter::once(&first).chain(burst.iter()) {
        assert_eq!(
            answers_to(&owner, &bot, &mention.id).await.len(),
            1,
            "answered once by the one reply"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_mode_answers_two_turns_in_order() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let (spec, frames) = spec_with_frame_log(
        &relay,
        &owner,
        &["--rounds", "4", "--round-delay-ms", "150"],
        &["--multiple-event-handling", "queue"],
    );
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let first = owner.mention_in_group(&bot, "room", "first question").await;
    bridge.wait_for_log("agent run started").await;
    let second = owner.mention_in_group(&bot, "room", "second question").await;
    let first_reply = owner.replies_from(&bot, &first.id, 1).await.remove(0);
    let second_reply = owner.replies_from(&bot, &second.id, 1).await.remove(0);
    assert!(
        !first_reply.content.contains("second question"),
        "{}",
        first_reply.content
    );
    assert!(second_reply.content.contains("> second question"));
    assert!(first_reply.created_at <= second_reply.created_at);
    let methods = agent_methods(&frames);
    assert_eq!(count(&methods, "session/prompt"), 2);
    assert_eq!(count(&methods, "session/cancel"), 0);
    assert_eq!(
        count(&methods, "session/new"),
        1,
        "one session for the conversation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_mode_cancels_and_reprompts_with_interrupt_framing() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let (spec, frames) = spec_with_frame_log(
        &relay,
        &owner,
        &["--rounds", "40", "--round-delay-ms", "100"],
        &["--multiple-event-handling", "interrupt"],
    );
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    owner.mention_in_group(&bot, "room", "old plan").await;
    bridge.wait_for_log("agent run started").await;
    let new = owner
        .mention_in_group(&bot, "room", "new plan instead [rounds=1]")
        .await;
    let reply = owner.replies_from(&bot, &new.id, 1).await.remove(0);
    assert!(reply.content.contains("supersedes"), "{}", reply.content);
    assert!(reply.content.contains("> old plan") && reply.content.contains("> new plan instead"));
    let methods = agent_methods(&frames);
    assert_eq!(count(&methods, "session/cancel"), 1);
    assert_eq!(
        count(&methods, "_goose/unstable/session/steer"),
        0,
        "interrupt never steers"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_interrupt_interrupts_for_the_owner_and_queues_others() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let guest = Person::join(&relay.url()).await;
    let (spec, frames) = spec_with_frame_log(
        &relay,
        &owner,
        &["--rounds", "20", "--round-delay-ms", "100"],
        &[
            "--multiple-event-handling",
            "owner-interrupt",
            "--respond-to",
            "anyone",
        ],
    );
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let start = owner.mention_in_group(&bot, "room", "start [rounds=8]").await;
    bridge.wait_for_log("agent run started").await;
    let queued = guest
        .mention_in_group(&bot, "room", "guest asks [rounds=1]")
        .await;
    let start_reply = owner.replies_from(&bot, &start.id, 1).await.remove(0);
    assert!(
        !start_reply.content.contains("supersedes"),
        "{}",
        start_reply.content
    );
    owner.replies_from(&bot, &queued.id, 1).await;
    assert_eq!(
        count(&agent_methods(&frames), "session/cancel"),
        0,
        "a guest never interrupts"
    );

    owner.mention_in_group(&bot, "room", "long one").await;
    bridge.wait_for_log("agent run started").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let takeover = owner
        .mention_in_group(&bot, "room", "owner takes over [rounds=1]")
        .await;
    let reply = owner.replies_from(&bot, &takeover.id, 1).await.remove(0);
    assert!(reply.content.contains("supersedes"), "{}", reply.content);
    assert_eq!(count(&agent_methods(&frames), "session/cancel"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_mid_turn_is_replaced_and_the_mention_answered_once() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key()).agent(&[
        "--rounds",
        "6",
        "--round-delay-ms",
        "200",
    ]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let mention = owner.mention_in_group(&bot, "room", "survive a crash").await;
    bridge.wait_for_log("agent run started").await;
    for pid in bridge.agent_pids() {
        std::process::Command::new("kill")
            .arg("-KILL")
            .arg(pid.to_string())
            .status()
            .expect("kill");
    }
    let reply = owner.replies_from(&bot, &mention.id, 1).await.remove(0);
    assert!(reply.content.contains("> survive a crash"), "{}", reply.content);
    bridge.wait_for_log("turn failed; will retry").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        owner.events_referencing(&bot, &mention.id).await.len(),
        1,
        "answered exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_conversations_run_at_once_on_two_agents() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key())
        .agent(&["--rounds", "5", "--round-delay-ms", "200"])
        .flags(&["--agents", "2"]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let mut mentions = Vec::new();
    for room in ["one", "two", "three"] {
        mentions.push(
            owner
                .mention_in_group(&bot, room, &format!("work in {room}"))
                .await,
        );
    }
    for mention in &mentions {
        owner.replies_from(&bot, &mention.id, 1).await;
    }
    // All three were prompted before the first finished: none waited for another.
    let log = log_lines(&bridge.log());
    let position = |message: &str, nth: usize| {
        log.iter()
            .enumerate()
            .filter(|(_, line)| line["message"] == message)
            .nth(nth)
            .map(|(index, _)| index)
    };
    let third_prompt = position("prompting the agent", 2).expect("three prompts");
    let first_end = position("turn finished", 0).expect("a turn finished");
    assert!(
        third_prompt < first_end,
        "the third turn started while the first ran"
    );
    assert_eq!(bridge.agent_pids().len(), 2, "two agent processes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_turn_exits_cleanly_within_the_grace_and_the_mention_resumes() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key())
        .agent(&["--rounds", "100", "--round-delay-ms", "100"])
        .flags(&["--shutdown-grace", "2s"]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let mention = owner.mention_in_group(&bot, "room", "a long job").await;
    bridge.wait_for_log("agent run started").await;
    let stopping = std::time::Instant::now();
    let status = bridge.terminate(Duration::from_secs(20)).await;
    assert!(status.success(), "exit 0: {status}");
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "within the grace (plus shutdown work)"
    );
    assert!(owner.events_referencing(&bot, &mention.id).await.is_empty());

    let restarted = Bridge::start(&spec.clone().agent(&["--rounds", "1", "--round-delay-ms", "10"]))
        .ready()
        .await;
    let reply = owner.replies_from(&bot, &mention.id, 1).await.remove(0);
    assert!(reply.content.contains("> a long job"));
    drop(restarted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_steer_the_run_dropped_is_answered_in_the_next_turn() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let (spec, frames) = spec_with_frame_log(
        &relay,
        &owner,
        &[
            "--end-run-after-steer",
            "--rounds",
            "20",
            "--round-delay-ms",
            "200",
        ],
        &[],
    );
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let first = owner.mention_in_group(&bot, "room", "first [rounds=20]").await;
    bridge.wait_for_log("agent run started").await;
    let late = owner
        .mention_in_group(&bot, "room", "the late one [rounds=1]")
        .await;
    let first_reply = owner.replies_from(&bot, &first.id, 1).await.remove(0);
    assert!(
        !first_reply.content.contains("the late one"),
        "not folded: {}",
        first_reply.content
    );
    let late_reply = owner.replies_from(&bot, &late.id, 1).await.remove(0);
    assert!(
        late_reply.content.contains("> the late one"),
        "{}",
        late_reply.content
    );
    bridge.wait_for_log("steer acknowledged but not folded in").await;
    let methods = agent_methods(&frames);
    assert_eq!(
        count(&methods, "session/prompt"),
        2,
        "the late one got its own turn: {methods:?}"
    );
    assert_eq!(count(&methods, "session/cancel"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_commands_cancel_status_and_rotate() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let guest = Person::join(&relay.url()).await;
    let (spec, frames) = spec_with_frame_log(
        &relay,
        &owner,
        &["--rounds", "100", "--round-delay-ms", "100"],
        &["--respond-to", "anyone", "--multiple-event-handling", "queue"],
    );
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let work = owner.mention_in_group(&bot, "room", "endless work").await;
    bridge.wait_for_log("agent run started").await;

    // A guest's `!cancel` is plain text: it waits in the queue like any message.
    let guest_cancel = guest.mention_in_group(&bot, "room", "!cancel").await;
    let status = owner.mention_in_group(&bot, "room", "!status").await;
    let status_reply = owner.replies_from(&bot, &status.id, 1).await.remove(0);
    assert!(
        status_reply.content.contains("Turns in flight: 1"),
        "{}",
        status_reply.content
    );
    assert!(
        status_reply.content.contains("Mentions waiting: 1"),
        "{}",
        status_reply.content
    );

    let cancel = owner.mention_in_group(&bot, "room", "!cancel").await;
    owner.replies_from(&bot, &cancel.id, 1).await;
    let notice = owner.replies_from(&bot, &work.id, 1).await.remove(0);
    assert!(
        notice.content.contains("Cancelled by the owner"),
        "{}",
        notice.content
    );
    // The guest's text then runs as an ordinary turn.
    let guest_reply = owner.replies_from(&bot, &guest_cancel.id, 1).await.remove(0);
    assert!(
        guest_reply.content.contains("> !cancel"),
        "{}",
        guest_reply.content
    );

    let rotate = owner.mention_in_group(&bot, "room", "!rotate").await;
    owner.replies_from(&bot, &rotate.id, 1).await;
    let after = owner
        .mention_in_group(&bot, "room", "fresh start [rounds=1]")
        .await;
    owner.replies_from(&bot, &after.id, 1).await;
    assert_eq!(
        count(&agent_methods(&frames), "session/new"),
        2,
        "rotate opened a new session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_that_keeps_failing_ends_in_a_notice() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key()).agent(&["--crash-after-rounds", "0"]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let mention = owner.mention_in_group(&bot, "room", "doomed").await;
    let notice = owner.replies_from(&bot, &mention.id, 1).await.remove(0);
    assert!(notice.content.contains("could not answer"), "{}", notice.content);
    assert!(!notice.content.contains("done:"));
    assert_eq!(
        bridge.log_events("turn failed; will retry").len(),
        2,
        "three attempts in all"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_ups_sent_the_moment_a_reply_lands_are_never_lost() {
    // A reply is out before its turn's report reaches the heart: a follow-up
    // sent the moment the reply lands is handed to a turn that is already
    // over. It must come back for the next turn (this raced and lost
    // mentions before).
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec =
        BridgeSpec::new(&relay.url(), owner.public_key()).agent(&["--rounds", "1", "--round-delay-ms", "0"]);
    let bot = spec.bot.public_key();
    let _bridge = Bridge::start(&spec).ready().await;
    let mut conversations = Vec::new();
    for room in 0..6 {
        let owner = Person::join_as(owner.keys.clone(), &relay.url()).await;
        conversations.push(tokio::spawn(async move {
            let replies = Filter::new()
                .author(bot)
                .kind(Kind::Custom(9))
                .since(Timestamp::now());
            owner.client.subscribe(replies, None).await.expect("subscribe");
            let mut pushed = owner.client.notifications();
            let mut ids = Vec::new();
            for turn in 0..30 {
                let mention = owner
                    .mention_in_group(&bot, &format!("rapid-{room}"), &format!("turn {turn}"))
                    .await;
                ids.push(mention.id);
                // React to the reply as it is pushed, not after polling for it.
                let wait = async {
                    while let Ok(notification) = pushed.recv().await {
                        if let RelayPoolNotification::Event { event, .. } = notification
                            && e_tags(&event).contains(&(mention.id.to_hex(), "reply".to_owned()))
                        {
                            return;
                        }
                    }
                };
                if tokio::time::timeout(Duration::from_secs(10), wait).await.is_err() {
                    break; // lost: the tally below says so
                }
            }
            ids
        }));
    }
    let mut ids = Vec::new();
    for conversation in conversations {
        ids.extend(conversation.await.expect("conversation"));
    }
    assert_exactly_once(tally("rapid follow-ups", &owner, &bot, &ids).await);
}
