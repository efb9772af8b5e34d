//! Delegated tasks (issue 24 §1: `delegate`, `task_status`, `task_stop`),
//! end to end: the scripted agent calls the bridge's MCP tools over HTTP
//! (`[mcp-delegate=…]`, see its `mcp_tasks`), the task runs on a fresh
//! session of the same agent (which answers `done: <its prompt>`), and
//! its result comes back framed by the bridge: steered into the live
//! turn, or starting the conversation's next turn.

use acp_bridge::Attestation;
use nostr_sdk::prelude::*;

use crate::support::*;

/// The bot's events under `mention` once its conversation has settled.
async fn settled_replies(scene: &Scene, channel: &str, mention: &Event) -> Vec<Event> {
    scene.settle(channel).await;
    scene.owner.events_referencing(&scene.bot, &mention.id).await
}

/// The scripted agent's answer to `mention`: its final message (`done: …`),
/// with a line for each tool call it made.
async fn answer_to(scene: &Scene, mention: &Event) -> Event {
    scene
        .owner
        .reply_containing(&scene.bot, &mention.id, "done: ")
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_task_result_is_steered_into_the_live_turn() {
    let scene = Scene::builder().metrics().start().await;
    let log = &scene.bridge.log;
    let mark = log.cursor();

    let mention = scene
        .mention(
            "room",
            "plan it [mcp-delegate=count the apples] [rounds=12] [delay=400]",
        )
        .await;
    log.wait(mark, Line::new("task result steered into the live turn"))
        .await;
    let answer = answer_to(&scene, &mention).await;
    let text = &answer.content;
    assert!(text.contains("mcp delegate: ok: task t1 started"), "{text}");
    let (_, steered) = text
        .split_once("steer: ")
        .expect("the result came as a steer of this turn");
    assert!(
        steered.contains("[acp-bridge] Result of task t1, which you delegated"),
        "{text}"
    );
    assert!(
        steered.contains("> done: [acp-bridge (quoted)] You are running task t1"),
        "the task's final message, quoted: {text}"
    );
    assert!(
        steered.contains("> > count the apples"),
        "the task saw its prompt: {text}"
    );
    assert!(
        !steered.contains("plan it"),
        "the task saw nothing of the parent's prompt: {text}"
    );

    let replies = settled_replies(&scene, "room", &mention).await;
    assert_eq!(
        replies.len(),
        1,
        "one answer, the result folded into it: {replies:#?}"
    );
    let done = metric(
        scene.metrics_port(),
        "acp_bridge_delegated_tasks_total{outcome=\"done\"}",
    )
    .await;
    assert_eq!(done, 1.0, "the task's outcome is counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_after_the_turn_ended_starts_the_next_turn_under_the_mention() {
    let scene = Scene::builder().start().await;
    let log = &scene.bridge.log;
    let mark = log.cursor();

    let mention = scene
        .mention("room", "[mcp-delegate=slow work {rounds=8} {delay=300}]")
        .await;
    let first = answer_to(&scene, &mention).await;
    assert!(
        first.content.contains("mcp delegate: ok: task t1 started"),
        "{}",
        first.content
    );
    assert!(!first.content.contains("Result of task"), "{}", first.content);

    log.wait(mark, Line::new("task result starts the next turn"))
        .await;
    let second = scene
        .owner
        .reply_containing(&scene.bot, &mention.id, "Result of task t1")
        .await;
    assert_ne!(second.id, first.id);
    assert!(second.content.contains("> > slow work"), "{}", second.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cannot_delegate_past_the_depth_cap() {
    let scene = Scene::builder().start().await;
    let mention = scene
        .mention(
            "room",
            "[mcp-delegate=go deeper {mcp-delegate=deepest}] [rounds=12] [delay=400]",
        )
        .await;
    let answer = scene
        .owner
        .reply_containing(&scene.bot, &mention.id, "Result of task t1")
        .await;
    assert!(
        answer
            .content
            .contains("> mcp delegate: error: this session runs a delegated task itself"),
        "the task's own delegate was refused, and the task said so: {}",
        answer.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_stop_stops_a_running_task_and_it_reports_back_as_stopped() {
    let scene = Scene::builder().metrics().start().await;
    let mention = scene
        .mention(
            "room",
            "[mcp-delegate=long work {rounds=60} {delay=500}] [mcp-task-stop] [rounds=12] [delay=400]",
        )
        .await;
    let answer = scene
        .owner
        .reply_containing(&scene.bot, &mention.id, "Result of task t1")
        .await;
    let text = &answer.content;
    assert!(text.contains("mcp task_stop: ok: task t1 is stopping"), "{text}");
    assert!(text.contains("> The task was stopped before it ended."), "{text}");
    let stopped = metric(
        scene.metrics_port(),
        "acp_bridge_delegated_tasks_total{outcome=\"stopped\"}",
    )
    .await;
    assert_eq!(stopped, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_of_another_conversation_is_not_found() {
    let scene = Scene::builder().start().await;
    let started = scene
        .mention("room", "[mcp-delegate=long work {rounds=60} {delay=500}]")
        .await;
    let answer = answer_to(&scene, &started).await;
    assert!(
        answer.content.contains("ok: task t1 started"),
        "{}",
        answer.content
    );

    let other = scene
        .mention("elsewhere", "[mcp-task-status=t1] [mcp-task-stop=t1]")
        .await;
    let refused = answer_to(&scene, &other).await;
    for tool in ["task_status", "task_stop"] {
        assert!(
            refused
                .content
                .contains(&format!("mcp {tool}: error: no task t1 in this conversation")),
            "{}",
            refused.content
        );
    }

    let status = scene.mention("room", "!status").await;
    let status = scene.reply_to(&status).await;
    assert!(
        status
            .content
            .contains("0 mention(s) waiting, 1 delegated task(s) running (t1)."),
        "!status counts the conversation's running task: {}",
        status.content
    );

    let own = scene
        .mention("room", "[mcp-task-status=t1] [mcp-task-stop=t1]")
        .await;
    let own = answer_to(&scene, &own).await;
    assert!(
        own.content.contains("mcp task_status: ok: task t1 is running"),
        "{}",
        own.content
    );
    assert!(
        own.content.contains("mcp task_stop: ok: task t1 is stopping"),
        "{}",
        own.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_delegation_returns_the_result_as_the_tool_result() {
    // One agent, two turn slots: the parent's turn holds one while it
    // waits, the task the other (a task is refused when none is free, so
    // the wait cannot deadlock).
    let scene = Scene::builder()
        .flags(&["--agents", "1", "--turns-per-agent", "2"])
        .start()
        .await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    let mention = scene
        .mention("room", "[mcp-delegate=quick sums] [mcp-delegate-wait]")
        .await;
    let answer = answer_to(&scene, &mention).await;
    let (_, returned) = answer
        .content
        .split_once("mcp delegate: ok: ")
        .expect("the tool answered");
    assert!(
        returned.contains("done: [acp-bridge] You are running task t1"),
        "the tool's result is the task's final message: {}",
        answer.content
    );
    let replies = settled_replies(&scene, "room", &mention).await;
    assert_eq!(
        replies.len(),
        1,
        "the result is not delivered again: {replies:#?}"
    );
    assert!(
        log.matching(mark, Line::new("task result returned to the waiting tool call"))
            .len()
            == 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sibling_bots_reply_is_folded_into_the_live_turn() {
    let stage = Scene::builder().stage().await;
    let sibling = stage.join().await;
    let attestation = Attestation::sign(&stage.owner.keys, &sibling.public_key(), "kind=9").expect("sign");
    sibling
        .publish(EventBuilder::metadata(&Metadata::new().name("sibling")).tag(attestation.to_tag()))
        .await;
    let stranger = Keys::generate().public_key();
    let scene = stage.start().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    // The gate learns the sibling when it first writes to the bot.
    let hello = sibling.mention_in_group(&bot, "bots", "hello").await;
    sibling.reply_containing(&bot, &hello.id, "done: ").await;

    let refused = scene
        .mention(
            "room",
            &format!(
                "[mcp-delegate=hi] [mcp-delegate-to={}]",
                stranger.to_bech32().expect("npub")
            ),
        )
        .await;
    let refused = scene.owner.reply_containing(&bot, &refused.id, "done: ").await;
    assert!(
        refused.content.contains("is not a sibling bot this bridge hears"),
        "{}",
        refused.content
    );

    let mark = log.cursor();
    let npub = sibling.public_key().to_bech32().expect("npub");
    let mention = scene
        .mention(
            "room",
            &format!("[mcp-delegate=add two and two] [mcp-delegate-to={npub}] [rounds=20] [delay=400]"),
        )
        .await;
    let posted = log.wait(mark, Line::new("task posted for a sibling bot")).await;
    let task_post = EventId::parse(posted["event"].as_str().expect("event id")).expect("id");
    let probe = async || {
        let found = sibling.events_referencing(&bot, &mention.id).await;
        found.into_iter().find(|event| event.id == task_post)
    };
    let task_post = eventually(PATIENCE, probe, || "the task's post".to_owned()).await;
    assert!(
        task_post.content.contains("add two and two"),
        "{}",
        task_post.content
    );
    assert!(
        p_tags(&task_post, &sibling.public_key()),
        "the post mentions the sibling"
    );

    let answer = sibling
        .publish(group_message(
            &bot,
            "room",
            "four",
            &[
                Tag::parse(["e", &mention.id.to_hex(), "", "root"]).expect("tag"),
                Tag::parse(["e", &task_post.id.to_hex(), "", "reply"]).expect("tag"),
            ],
        ))
        .await;
    log.wait(mark, Line::new("a sibling bot replied with a task's result"))
        .await;
    let reply = scene.owner.reply_containing(&bot, &mention.id, "done: ").await;
    let (_, steered) = reply.content.split_once("steer: ").expect("steered");
    assert!(steered.contains("Result of task t1"), "{}", reply.content);
    assert!(steered.contains("> four"), "{}", reply.content);

    scene.settle("room").await;
    let answered: Vec<Event> = sibling
        .events_referencing(&bot, &answer.id)
        .await
        .into_iter()
        .filter(|event| event.kind == Kind::Custom(9))
        .collect();
    assert!(
        answered.is_empty(),
        "the sibling's reply is no turn of its own: {answered:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_fails_reports_back_as_failed() {
    let scene = Scene::builder().metrics().start().await;
    let mention = scene
        .mention("room", "[mcp-delegate=break it {fail}] [rounds=12] [delay=400]")
        .await;
    let answer = scene
        .owner
        .reply_containing(&scene.bot, &mention.id, "Result of task t1")
        .await;
    assert!(
        answer.content.contains("> The task failed: "),
        "{}",
        answer.content
    );
    let failed = metric(
        scene.metrics_port(),
        "acp_bridge_delegated_tasks_total{outcome=\"failed\"}",
    )
    .await;
    assert_eq!(failed, 1.0);
}

/// How many sessions the agents opened since `mark` (the parent's and the
/// tasks').
fn sessions_opened(log: &LogFile, mark: Cursor) -> usize {
    log.matching(mark, Line::new("session opened")).len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_spend_counts_against_the_delegating_author_and_conversation() {
    let scene = Scene::builder()
        .flags(&["--respond-to", "anyone", "--budget-author-per-day", "400 tokens"])
        .start()
        .await;
    let stranger = scene.join().await;
    let bot = scene.bot;
    // The parent reports no tokens; its task reports 300 in and 200 out.
    let mention = stranger
        .mention_in_group(
            &bot,
            "room",
            "[mcp-delegate=sum it {tokens=300/200}] [mcp-delegate-wait]",
        )
        .await;
    let answer = stranger.reply_containing(&bot, &mention.id, "done: ").await;
    assert!(
        answer.content.contains("mcp delegate: ok: ")
            && answer
                .content
                .contains("done: [acp-bridge] You are running task t1"),
        "{}",
        answer.content
    );

    let usage = scene.mention("room", "!usage").await;
    let usage = scene.reply_to(&usage).await.content;
    println!("usage after a turn and its task: {usage}");
    assert!(
        usage.contains("this conversation 2 turns, 500 tokens"),
        "the task is a turn of the conversation, and its tokens count: {usage}"
    );
    let next = stranger.mention_in_group(&bot, "room", "and again").await;
    let notice = stranger.reply_containing(&bot, &next.id, "Sorry").await;
    assert!(
        notice
            .content
            .contains("your daily budget is spent (500 tokens of 400 tokens)"),
        "the task's tokens were the delegating author's: {}",
        notice.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_author_over_budget_cannot_start_a_task() {
    let scene = Scene::builder()
        .flags(&["--respond-to", "anyone", "--budget-author-per-day", "1 turns"])
        .start()
        .await;
    let stranger = scene.join().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let mark = log.cursor();
    // The turn itself takes the stranger's one turn of the day.
    let mention = stranger
        .mention_in_group(&bot, "room", "[mcp-delegate=more work for free]")
        .await;
    let answer = stranger.reply_containing(&bot, &mention.id, "done: ").await;
    let started = log.matching(mark, Line::new("task started")).len();
    let opened = sessions_opened(log, mark);
    println!(
        "a turn whose author's budget is spent delegates: {started} task(s) started, {opened} session(s) opened"
    );
    let text = &answer.content;
    assert!(
        text.contains(
            "mcp delegate: error: no task started: your daily budget is spent (1 turns of 1 turns)"
        ),
        "{text}"
    );
    assert_eq!((started, opened), (0, 1), "the parent's session only");
    log.wait(
        mark,
        Line::new("task refused: budget spent").with("scope", "author"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_turn_cap_covers_the_turns_tasks() {
    let scene = Scene::builder()
        .flags(&["--budget-turn-cap", "1 USD"])
        .metrics()
        .start()
        .await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    // The parent spends nothing itself; its task's session grows 0.40 USD
    // a round, 30 rounds (12 USD) if nothing stops it.
    let mention = scene
        .mention(
            "room",
            "[mcp-delegate=spend {rounds=30} {delay=100} {round-cost=0.40}] [rounds=40] [delay=200]",
        )
        .await;
    let notice = scene.reply_to(&mention).await.content;
    println!("the parent's people were told: {notice}");
    assert!(
        notice
            .starts_with("I stopped this turn at the per-turn spending cap: it spent 1.20 USD of 1.00 USD."),
        "{notice}"
    );
    log.wait(mark, Line::new("turn finished").with("outcome", "capped"))
        .await;
    log.wait(
        mark,
        Line::new("task ended")
            .with("task_id", "t1")
            .with("outcome", "capped"),
    )
    .await;
    let capped = metric(
        scene.metrics_port(),
        "acp_bridge_delegated_tasks_total{outcome=\"capped\"}",
    )
    .await;
    assert_eq!(capped, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_take_turn_slots_like_turns() {
    let scene = Scene::builder()
        .flags(&[
            "--respond-to",
            "anyone",
            "--agents",
            "1",
            "--turns-per-agent",
            "2",
        ])
        .start()
        .await;
    let stranger = scene.join().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let mark = log.cursor();
    // One turn at a time, each delegating a long task in the background:
    // the first task takes the second slot, so the next turns (in the
    // first's slot) find none for theirs.
    let mut answers = Vec::new();
    for round in 1..=3 {
        let mention = stranger
            .mention_in_group(
                &bot,
                "room",
                &format!("round {round} [mcp-delegate=long work {{rounds=60}} {{delay=500}}]"),
            )
            .await;
        answers.push(
            stranger
                .reply_containing(&bot, &mention.id, "done: ")
                .await
                .content,
        );
    }
    log.wait(mark, Line::new("task session leased")).await;
    let started = log.matching(mark, Line::new("task started")).len();
    let opened = sessions_opened(log, mark);
    println!("3 delegations on 2 turn slots: {started} task(s) started, {opened} session(s) opened");
    assert!(
        answers[0].contains("mcp delegate: ok: task t1 started"),
        "{}",
        answers[0]
    );
    for later in &answers[1..] {
        assert!(
            later.contains("mcp delegate: error: no task started: every agent turn is taken (2 of 2)"),
            "{later}"
        );
    }
    assert_eq!((started, opened), (1, 2), "the room's session and t1's");
}
