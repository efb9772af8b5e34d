//! The heart end to end: mid-turn mentions steered into the live turn
//! (natively, or by cancel + merge), queue and interrupt modes, crash
//! retries, concurrency across conversations, and SIGTERM.

use std::time::Duration;

use nostr_sdk::prelude::*;

use crate::support::*;

/// A scene whose scripted agent logs the frames it receives.
fn framed(agent: &[&str], flags: &[&str]) -> SceneBuilder {
    Scene::builder().agent(agent).flags(flags).frame_log()
}

fn count(methods: &[String], method: &str) -> usize {
    methods.iter().filter(|m| m.as_str() == method).count()
}

/// The turn's last line, whose `returned` says how many mentions it hands
/// back for a next turn: with none, the conversation has nothing left.
async fn turn_finished(scene: &Scene, from: Cursor, newest: &EventId) -> serde_json::Value {
    let line = Line::new("turn finished").in_turn(newest);
    scene.bridge.log.wait(from, line).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_mid_turn_folds_into_the_same_turn() {
    native_steer_folds_into_the_same_turn(&[], "_goose/unstable/session/steer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_steering_folds_into_the_same_turn() {
    native_steer_folds_into_the_same_turn(&["--session-steering"], "_session/steering").await;
}

/// A mid-turn mention steered natively, with an agent speaking `method`
/// (scripted agent flags `agent`): one prompt, no cancel, one reply.
async fn native_steer_folds_into_the_same_turn(agent: &[&str], method: &str) {
    let mut flags = vec!["--rounds", "6", "--round-delay-ms", "300"];
    flags.extend(agent);
    let scene = framed(&flags, &[]).start().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);

    let start = log.cursor();
    let first = scene.mention_mid_turn("room", "write the report").await;
    let mark = log.cursor();
    let second = scene.mention("room", "also cover the budget").await;
    log.wait(mark, Line::new("steered into the live turn")).await;

    let reply = scene.reply_to(&second).await;
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
    let end = turn_finished(&scene, start, &first.id).await;
    assert_eq!(end["returned"], 0, "nothing left for a next turn: {end}");
    let methods = scene.agent_methods();
    assert_eq!(count(&methods, "session/prompt"), 1, "one turn: {methods:?}");
    assert_eq!(count(&methods, "session/cancel"), 0, "no cancel: {methods:?}");
    assert_eq!(count(&methods, method), 1, "{methods:?}");
    assert_eq!(
        count(&methods, "_goose/unstable/session/steer") + count(&methods, "_session/steering"),
        1,
        "one steer request: {methods:?}"
    );
    assert_eq!(
        owner.answers_from(&bot, &first.id).await.len(),
        1,
        "the first mention is answered by the same reply"
    );
    let ends = log.matching(start, Line::new("turn finished"));
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["stop_reason"], "end_turn");
    assert_eq!(ends[0]["steer_path"], "native");
    let steer_method = if method == "_session/steering" {
        method
    } else {
        "goose"
    };
    assert_eq!(ends[0]["span"]["steer_method"], steer_method);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_native_steer_a_burst_is_merged_with_exactly_one_cancel() {
    let scene = framed(&["--no-steer", "--rounds", "40", "--round-delay-ms", "100"], &[])
        .start()
        .await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);

    let start = log.cursor();
    let first = scene.mention_mid_turn("room", "long task").await;
    let mut burst = Vec::new();
    for n in 0..5 {
        // `[rounds=2]` makes the merged re-prompt short (the last directive wins).
        burst.push(scene.mention("room", &format!("addendum {n} [rounds=2]")).await);
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
    let end = turn_finished(&scene, start, &first.id).await;
    assert_eq!(end["returned"], 0, "nothing left for a next turn: {end}");
    let methods = scene.agent_methods();
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
            owner.answers_from(&bot, &mention.id).await.len(),
            1,
            "answered once by the one reply"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_mode_answers_two_turns_in_order() {
    let scene = framed(
        &["--rounds", "4", "--round-delay-ms", "150"],
        &["--multiple-event-handling", "queue"],
    )
    .start()
    .await;
    let log = &scene.bridge.log;
    let start = log.cursor();
    let first = scene.mention_mid_turn("room", "first question").await;
    let second = scene.mention("room", "second question").await;
    let first_reply = scene.reply_to(&first).await;
    let second_reply = scene.reply_to(&second).await;
    assert!(
        !first_reply.content.contains("second question"),
        "{}",
        first_reply.content
    );
    assert!(second_reply.content.contains("> second question"));
    assert!(first_reply.created_at <= second_reply.created_at);
    let end = turn_finished(&scene, start, &second.id).await;
    assert_eq!(end["returned"], 0, "nothing left for a next turn: {end}");
    let methods = scene.agent_methods();
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
    let scene = framed(
        &["--rounds", "40", "--round-delay-ms", "100"],
        &["--multiple-event-handling", "interrupt"],
    )
    .start()
    .await;
    let log = &scene.bridge.log;
    let start = log.cursor();
    let old = scene.mention_mid_turn("room", "old plan").await;
    let new = scene.mention("room", "new plan instead [rounds=1]").await;
    let reply = scene.reply_to(&new).await;
    assert!(reply.content.contains("supersedes"), "{}", reply.content);
    assert!(reply.content.contains("> old plan") && reply.content.contains("> new plan instead"));
    // The interrupt re-prompts within the turn the old plan started.
    let end = turn_finished(&scene, start, &old.id).await;
    assert_eq!(end["returned"], 0, "nothing left for a next turn: {end}");
    let methods = scene.agent_methods();
    assert_eq!(count(&methods, "session/cancel"), 1);
    assert_eq!(
        count(&methods, "_goose/unstable/session/steer"),
        0,
        "interrupt never steers"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_interrupt_interrupts_for_the_owner_and_queues_others() {
    let scene = framed(
        &["--rounds", "20", "--round-delay-ms", "100"],
        &[
            "--multiple-event-handling",
            "owner-interrupt",
            "--respond-to",
            "anyone",
        ],
    )
    .start()
    .await;
    let guest = scene.join().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let mark = log.cursor();
    let start = scene.mention_mid_turn("room", "start [rounds=8]").await;
    let queued = guest
        .mention_in_group(&bot, "room", "guest asks [rounds=1]")
        .await;
    let start_reply = scene.reply_to(&start).await;
    assert!(
        !start_reply.content.contains("supersedes"),
        "{}",
        start_reply.content
    );
    scene.reply_to(&queued).await;
    turn_finished(&scene, mark, &queued.id).await;
    assert_eq!(
        count(&scene.agent_methods(), "session/cancel"),
        0,
        "a guest never interrupts"
    );

    let mark = log.cursor();
    let long = scene.mention_mid_turn("room", "long one").await;
    let takeover = scene.mention("room", "owner takes over [rounds=1]").await;
    let reply = scene.reply_to(&takeover).await;
    assert!(reply.content.contains("supersedes"), "{}", reply.content);
    turn_finished(&scene, mark, &long.id).await;
    assert_eq!(count(&scene.agent_methods(), "session/cancel"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_mid_turn_is_replaced_and_the_mention_answered_once() {
    let scene = Scene::builder()
        .agent(&["--rounds", "6", "--round-delay-ms", "200"])
        .start()
        .await;
    let (owner, bot, bridge) = (&scene.owner, scene.bot, &scene.bridge);
    let mark = bridge.log.cursor();
    let mention = scene.mention_mid_turn("room", "survive a crash").await;
    for pid in bridge.agent_pids() {
        std::process::Command::new("kill")
            .arg("-KILL")
            .arg(pid.to_string())
            .status()
            .expect("kill");
    }
    let reply = scene.reply_to(&mention).await;
    assert!(reply.content.contains("> survive a crash"), "{}", reply.content);
    bridge.log.wait(mark, Line::new("turn failed; will retry")).await;
    scene.settle("room").await;
    assert_eq!(
        owner.answers_from(&bot, &mention.id).await.len(),
        1,
        "answered exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_conversations_run_at_once_on_two_agents() {
    let scene = Scene::builder()
        .agent(&["--rounds", "5", "--round-delay-ms", "200"])
        .flags(&["--agents", "2"])
        .start()
        .await;
    let bridge = &scene.bridge;
    let start = bridge.log.cursor();
    let mut mentions = Vec::new();
    for room in ["one", "two", "three"] {
        mentions.push(scene.mention(room, &format!("work in {room}")).await);
    }
    for mention in &mentions {
        scene.reply_to(mention).await;
    }
    // All three were prompted before the first finished: none waited for another.
    bridge.log.wait_nth(start, 3, Line::new("turn finished")).await;
    let log = bridge.log.lines(start);
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
    let mut scene = Scene::builder()
        .agent(&["--rounds", "100", "--round-delay-ms", "100"])
        .flags(&["--shutdown-grace", "2s"])
        .start()
        .await;
    let bot = scene.bot;
    let mention = scene.mention_mid_turn("room", "a long job").await;
    let stopping = std::time::Instant::now();
    let status = scene.bridge.terminate(Duration::from_secs(20)).await;
    assert!(status.success(), "exit 0: {status}");
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "within the grace (plus shutdown work)"
    );
    assert!(scene.owner.events_referencing(&bot, &mention.id).await.is_empty());

    let restarted = scene.spec().agent(&["--rounds", "1", "--round-delay-ms", "10"]);
    scene.restart(restarted).await;
    let reply = scene.reply_to(&mention).await;
    assert!(reply.content.contains("> a long job"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_steer_the_run_dropped_is_answered_in_the_next_turn() {
    let scene = framed(
        &[
            "--end-run-after-steer",
            "--rounds",
            "20",
            "--round-delay-ms",
            "200",
        ],
        &[],
    )
    .start()
    .await;
    let log = &scene.bridge.log;
    let first = scene.mention_mid_turn("room", "first [rounds=20]").await;
    let mark = log.cursor();
    let late = scene.mention("room", "the late one [rounds=1]").await;
    let first_reply = scene.reply_to(&first).await;
    assert!(
        !first_reply.content.contains("the late one"),
        "not folded: {}",
        first_reply.content
    );
    let late_reply = scene.reply_to(&late).await;
    assert!(
        late_reply.content.contains("> the late one"),
        "{}",
        late_reply.content
    );
    let not_folded = Line::new("steer acknowledged but not folded in; it goes to the next turn");
    log.wait(mark, not_folded.in_turn(&first.id)).await;
    let end = turn_finished(&scene, mark, &late.id).await;
    assert_eq!(end["returned"], 0, "nothing left for a next turn: {end}");
    let methods = scene.agent_methods();
    assert_eq!(
        count(&methods, "session/prompt"),
        2,
        "the late one got its own turn: {methods:?}"
    );
    assert_eq!(count(&methods, "session/cancel"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_commands_cancel_status_and_rotate() {
    let scene = framed(
        &["--rounds", "100", "--round-delay-ms", "100"],
        &["--respond-to", "anyone", "--multiple-event-handling", "queue"],
    )
    .start()
    .await;
    let guest = scene.join().await;
    let bot = scene.bot;
    let work = scene.mention_mid_turn("room", "endless work").await;

    // A guest's `!cancel` is plain text: it waits in the queue like any
    // message (once the guest's profile is looked up: strangers may be
    // siblings).
    let mark = scene.bridge.log.cursor();
    let guest_cancel = guest.mention_in_group(&bot, "room", "!cancel").await;
    scene
        .bridge
        .log
        .wait(mark, Line::accepted(&guest_cancel.id))
        .await;
    let status = scene.mention("room", "!status").await;
    let status_reply = scene.reply_to(&status).await;
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

    scene.cancel_by_owner("room", &work).await;
    // The guest's text then runs as an ordinary turn.
    let guest_reply = scene.reply_to(&guest_cancel).await;
    assert!(
        guest_reply.content.contains("> !cancel"),
        "{}",
        guest_reply.content
    );

    let rotate = scene.mention("room", "!rotate").await;
    scene.reply_to(&rotate).await;
    let after = scene.mention("room", "fresh start [rounds=1]").await;
    scene.reply_to(&after).await;
    assert_eq!(
        count(&scene.agent_methods(), "session/new"),
        2,
        "rotate opened a new session"
    );
}

/// A prompt that ends at the agent's token limit leaves its session full:
/// the driver rotates it through the same one call as `!rotate`, so the
/// next turn opens a new session and the old session's MCP token is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_agent_filled_up_is_rotated_token_and_all() {
    let scene = Scene::builder()
        .agent(&["--rounds", "1", "--round-delay-ms", "10"])
        .frame_log()
        .start()
        .await;
    let full = scene.mention("room", "a long one [stop=max_tokens]").await;
    scene.reply_to(&full).await;
    let (_, old_token) = scene.offered_mcp_tokens().pop().expect("a token offered");
    let refused = crate::mcp::mcp_status_for(&scene, &old_token).await;
    let next = scene.mention("room", "and now").await;
    scene.reply_to(&next).await;
    let offered = scene.offered_mcp_tokens();
    println!(
        "after max_tokens: the old token {refused}; sessions opened {}",
        offered.len()
    );
    assert!(
        refused.starts_with("HTTP/1.1 401"),
        "the full session's token is refused: {refused}"
    );
    assert_eq!(
        count(&scene.agent_methods(), "session/new"),
        2,
        "the next turn opened a new session"
    );
    assert_ne!(offered[0].1, offered[1].1, "{offered:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_that_keeps_failing_ends_in_a_notice() {
    let scene = Scene::builder()
        .agent(&["--crash-after-rounds", "0"])
        .start()
        .await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    let mention = scene.mention("room", "doomed").await;
    let notice = scene.reply_to(&mention).await;
    assert!(notice.content.contains("could not answer"), "{}", notice.content);
    assert!(!notice.content.contains("done:"));
    // After giving up, nothing is retried.
    log.wait(mark, Line::new("turn failed; giving up")).await;
    assert_eq!(
        log.matching(mark, Line::new("turn failed; will retry")).len(),
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
    let scene = Scene::builder()
        .agent(&["--rounds", "1", "--round-delay-ms", "0"])
        .start()
        .await;
    let bot = scene.bot;
    let mut conversations = Vec::new();
    for room in 0..6 {
        let owner = Person::join_as(scene.owner.keys.clone(), &scene.relay.url()).await;
        conversations.push(tokio::spawn(async move {
            let replies = Filter::new()
                .author(bot)
                .kind(Kind::Custom(9))
                .since(Timestamp::now());
            owner.client.subscribe(replies, None).await.expect("subscribe");
            let mut pushed = owner.client.notifications();
            let mut mentions = Vec::new();
            for turn in 0..30 {
                let mention = owner
                    .mention_in_group(&bot, &format!("rapid-{room}"), &format!("turn {turn}"))
                    .await;
                mentions.push(mention.clone());
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
            mentions
        }));
    }
    let mut mentions = Vec::new();
    for conversation in conversations {
        mentions.extend(conversation.await.expect("conversation"));
    }
    assert_exactly_once(scene.tally("rapid follow-ups", &mentions).await);
}
