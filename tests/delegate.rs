//! Delegated tasks (issue 24 §1: `delegate`, `task_status`, `task_stop`),
//! end to end: the scripted agent calls the bridge's MCP tools over HTTP
//! (`[mcp-delegate=…]`, see its `mcp_tasks`), the task runs on a fresh
//! session of the same agent (which answers `done: <its prompt>`), and
//! its result comes back framed by the bridge: steered into the live
//! turn, or starting the conversation's next turn.

mod support;

use nostr_sdk::prelude::*;
use support::*;

/// The bot's events under `mention` once its conversation has settled.
async fn settled_replies(scene: &Scene, channel: &str, mention: &Event) -> Vec<Event> {
    scene.settle(channel).await;
    scene.owner.events_referencing(&scene.bot, &mention.id).await
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
    let answer = scene
        .owner
        .reply_containing(&scene.bot, &mention.id, "done: ")
        .await;
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
    let first = scene
        .owner
        .reply_containing(&scene.bot, &mention.id, "done: ")
        .await;
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
    let answer = scene
        .owner
        .reply_containing(&scene.bot, &started.id, "done: ")
        .await;
    assert!(
        answer.content.contains("ok: task t1 started"),
        "{}",
        answer.content
    );

    let other = scene
        .mention("elsewhere", "[mcp-task-status=t1] [mcp-task-stop=t1]")
        .await;
    let refused = scene
        .owner
        .reply_containing(&scene.bot, &other.id, "done: ")
        .await;
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
            .contains("0 mention(s) waiting, 1 delegated task(s) running."),
        "!status counts the conversation's running task: {}",
        status.content
    );

    let own = scene
        .mention("room", "[mcp-task-status=t1] [mcp-task-stop=t1]")
        .await;
    let own = scene.owner.reply_containing(&scene.bot, &own.id, "done: ").await;
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
    let scene = Scene::builder().start().await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    let mention = scene
        .mention("room", "[mcp-delegate=quick sums] [mcp-delegate-wait]")
        .await;
    let answer = scene
        .owner
        .reply_containing(&scene.bot, &mention.id, "done: ")
        .await;
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
