//! Delegated tasks (issue 24 §1: `delegate`, `task_status`, `task_stop`),
//! end to end: the scripted agent calls the bridge's MCP tools over HTTP
//! (`[mcp-delegate=…]`, see its `mcp_tasks`), the task runs on a fresh
//! session of the same agent (which answers `done: <its prompt>`), and
//! its result comes back framed by the bridge: steered into the live
//! turn, or starting the conversation's next turn. A task is a turn of its
//! own conversation, journaled: a restart runs a pending one again and
//! delivers a pending result once, and its turn meets the budget as any.

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

/// The bot's events under `mention` that carry task `id`'s result, once
/// its conversation has settled.
async fn results_of(scene: &Scene, mention: &Event, id: &str) -> Vec<Event> {
    let header = format!("Result of task {id}");
    let replies = settled_replies(scene, "room", mention).await;
    replies
        .into_iter()
        .filter(|reply| reply.content.contains(&header))
        .collect()
}

/// How many mentions the daemon resumed from its journal at this start.
async fn resumed_at_start(log: &LogFile) -> u64 {
    let resumed = log
        .wait(
            log.start(),
            Line::new("resuming mentions accepted before the last stop"),
        )
        .await;
    resumed["mentions"].as_u64().expect("a count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_running_when_the_daemon_is_killed_runs_again_and_its_result_reaches_the_conversation() {
    let mut scene = Scene::builder().start().await;
    let bot = scene.bot;
    let mark = scene.bridge.log.cursor();
    // The parent's turn ends at once; its task runs 20 rounds 300 ms apart.
    let mention = scene
        .mention("room", "[mcp-delegate=count the pears {rounds=20} {delay=300}]")
        .await;
    let first = answer_to(&scene, &mention).await;
    assert!(
        first.content.contains("mcp delegate: ok: task t1 started"),
        "{}",
        first.content
    );
    scene
        .bridge
        .log
        .wait(mark, Line::new("task session leased"))
        .await;
    scene.bridge.kill_hard();

    scene.restart(scene.spec()).await;
    let log = &scene.bridge.log;
    let resumed = resumed_at_start(log).await;
    log.wait(log.start(), Line::new("task resumed").with("task_id", "t1"))
        .await;
    let result = scene
        .owner
        .reply_containing(&bot, &mention.id, "Result of task t1")
        .await;
    assert!(
        result.content.contains("> > count the pears"),
        "the task ran again from its prompt: {}",
        result.content
    );
    let results = results_of(&scene, &mention, "t1").await;
    println!(
        "a task running at SIGKILL: {resumed} row(s) resumed, its result answered {} time(s) under the delegating mention",
        results.len()
    );
    assert_eq!(resumed, 1, "the task's row");
    assert_eq!(results.len(), 1, "delivered once: {results:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_result_journaled_before_a_kill_is_delivered_once_after_the_restart() {
    let mut scene = Scene::builder().start().await;
    let bot = scene.bot;
    let mark = scene.bridge.log.cursor();
    // The task's result starts the room's next turn, which runs 10 rounds
    // 300 ms apart (the task's directives, quoted back): the daemon is
    // killed while that turn runs, its answer not yet published.
    let mention = scene
        .mention("room", "[mcp-delegate=weigh the plums {rounds=10} {delay=300}]")
        .await;
    answer_to(&scene, &mention).await;
    scene
        .bridge
        .log
        .wait(mark, Line::new("task result starts the next turn"))
        .await;
    scene.bridge.kill_hard();
    let before = scene
        .owner
        .events_referencing(&bot, &mention.id)
        .await
        .into_iter()
        .filter(|reply| reply.content.contains("Result of task t1"))
        .count();
    assert_eq!(before, 0, "killed before the result's turn answered");

    scene.restart(scene.spec()).await;
    let log = &scene.bridge.log;
    let resumed = resumed_at_start(log).await;
    let result = scene
        .owner
        .reply_containing(&bot, &mention.id, "Result of task t1")
        .await;
    assert!(
        result.content.contains("> > weigh the plums"),
        "{}",
        result.content
    );
    let results = results_of(&scene, &mention, "t1").await;
    let reran = log.matching(log.start(), Line::new("task session leased")).len();
    println!(
        "a task result journaled before SIGKILL: {resumed} row(s) resumed, the task run again {reran} time(s), its result answered {} time(s)",
        results.len()
    );
    assert_eq!(resumed, 1, "the result's row, not the finished task's");
    assert_eq!(reran, 0, "the task ended before the kill: it does not run again");
    assert_eq!(results.len(), 1, "delivered once: {results:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_delegated_after_a_restart_does_not_reuse_a_finished_tasks_id() {
    let mut scene = Scene::builder().start().await;
    let bot = scene.bot;
    let mention = scene.mention("room", "[mcp-delegate=count the apples]").await;
    let first = answer_to(&scene, &mention).await;
    assert!(
        first.content.contains("mcp delegate: ok: task t1 started"),
        "{}",
        first.content
    );
    scene
        .owner
        .reply_containing(&bot, &mention.id, "Result of task t1")
        .await;
    scene.settle("room").await;
    let status = scene.bridge.terminate(std::time::Duration::from_secs(30)).await;
    assert!(status.success(), "clean exit: {status}");

    // Nothing pending: the finished task is known from the journal only.
    scene.restart(scene.spec()).await;
    let again = scene.mention("room", "[mcp-delegate=count the kiwis]").await;
    let answer = answer_to(&scene, &again).await;
    let started = answer
        .content
        .split_once("ok: task ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    println!("a task delegated after a restart, the first (t1) finished before it: its id is {started}");
    assert!(
        answer.content.contains("mcp delegate: ok: task t2 started"),
        "a new id, not the finished t1: {}",
        answer.content
    );
    let result = scene
        .owner
        .reply_containing(&bot, &again.id, "Result of task t2")
        .await;
    assert!(
        result.content.contains("> > count the kiwis"),
        "{}",
        result.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_turn_would_pass_the_budget_is_refused_as_a_turn_is() {
    let mut scene = Scene::builder()
        .flags(&["--respond-to", "anyone", "--budget-author-per-day", "2 turns"])
        .start()
        .await;
    let stranger = scene.join().await;
    let bot = scene.bot;
    let mark = scene.bridge.log.cursor();
    // The parent's turn is the stranger's first of the day, its task's
    // turn the second; the daemon is killed while the task runs.
    let mention = stranger
        .mention_in_group(&bot, "room", "[mcp-delegate=long sums {rounds=20} {delay=300}]")
        .await;
    stranger
        .reply_containing(&bot, &mention.id, "ok: task t1 started")
        .await;
    scene
        .bridge
        .log
        .wait(mark, Line::new("task session leased"))
        .await;
    scene.bridge.kill_hard();

    // Its turn would be the third: refused at its start as any turn, the
    // task fails, and its result meets the same budget: the stranger is
    // told, as for a mention of theirs.
    scene.restart(scene.spec()).await;
    let log = &scene.bridge.log;
    let notice = stranger
        .reply_containing(&bot, &mention.id, "your daily budget is spent")
        .await;
    println!("the delegating author was told: {}", notice.content);
    assert!(
        notice
            .content
            .starts_with("Sorry, I cannot take this on: your daily budget is spent (2 turns of 2 turns)"),
        "{}",
        notice.content
    );
    log.wait(
        log.start(),
        Line::new("task ended")
            .with("task_id", "t1")
            .with("outcome", "failed"),
    )
    .await;
    let refused = log.matching(
        log.start(),
        Line::new("mention refused: budget spent").with("scope", "author"),
    );
    let leased = log.matching(log.start(), Line::new("task session leased")).len();
    println!(
        "a resumed task over its author's budget: {} refusal(s) at a turn's start, {leased} task session(s) leased",
        refused.len()
    );
    assert_eq!(refused.len(), 2, "the task's turn, then its result's");
    assert_eq!(leased, 0, "no agent ran the refused task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_ends_within_the_shutdown_grace_hands_its_result_back_and_does_not_run_again() {
    let mut scene = Scene::builder().flags(&["--shutdown-grace", "20s"]).start().await;
    let bot = scene.bot;
    let mark = scene.bridge.log.cursor();
    // The task runs 8 rounds 250 ms apart: SIGTERM comes as it starts,
    // and it ends well within the grace.
    let mention = scene
        .mention("room", "[mcp-delegate=sort the figs {rounds=8} {delay=250}]")
        .await;
    answer_to(&scene, &mention).await;
    scene
        .bridge
        .log
        .wait(mark, Line::new("task session leased"))
        .await;
    let status = scene.bridge.terminate(std::time::Duration::from_secs(30)).await;
    assert!(status.success(), "clean exit: {status}");

    scene.restart(scene.spec()).await;
    let log = &scene.bridge.log;
    let resumed = resumed_at_start(log).await;
    let result = scene
        .owner
        .reply_containing(&bot, &mention.id, "Result of task t1")
        .await;
    assert!(result.content.contains("> > sort the figs"), "{}", result.content);
    let results = results_of(&scene, &mention, "t1").await;
    let reran = log.matching(log.start(), Line::new("task session leased")).len();
    println!(
        "a task ending within the shutdown grace: {resumed} row(s) resumed, the task run again {reran} time(s), its result answered {} time(s)",
        results.len()
    );
    assert_eq!(reran, 0, "its result was journaled as the daemon stopped");
    assert_eq!(resumed, 1, "the result's row");
    assert_eq!(results.len(), 1, "delivered once: {results:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_permission_question_is_put_to_the_owner_as_a_turns_is() {
    let scene = Scene::builder()
        .flags(&["--permission-policy", "ask-owner"])
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);
    // The parent's turn runs on (20 rounds 300 ms apart) and takes the
    // result as a steer; the task's turn asks in the delegating mention's
    // thread.
    let mention = scene
        .mention(
            "room",
            "[mcp-delegate=tidy the temp files {permission}] [rounds=20] [delay=300]",
        )
        .await;
    let question = owner
        .reply_containing(&bot, &mention.id, "asks for permission")
        .await;
    owner
        .reply_in_group(&bot, "room", &mention.id, &question.id, "1")
        .await;
    let answer = answer_to(&scene, &mention).await;
    println!(
        "the task asked: {}",
        question.content.lines().next().unwrap_or_default()
    );
    let (_, steered) = answer
        .content
        .split_once("steer: ")
        .expect("the result came as a steer of the parent's turn");
    assert!(steered.contains("Result of task t1"), "{}", answer.content);
    assert!(
        steered.contains("tool: allowed (allow_once)"),
        "the owner's answer reached the task's agent: {}",
        answer.content
    );
}
