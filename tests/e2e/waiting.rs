//! Honest waiting: a mention that waits for its turn past
//! `--wait-notice-after` is told once, in its thread, why and for how long.

use nostr_sdk::prelude::*;

use crate::support::*;

/// The threshold the tests run with: short, so that a queued mention is
/// told soon; a quick turn still never waits that long in the queue.
const WAIT_NOTICE_AFTER: &str = "1s";

/// The bot's waiting notices in the thread of `mention`, as stored now.
async fn waiting_notices(scene: &Scene, mention: &Event, opening: &str) -> Vec<Event> {
    let events = scene.owner.events_referencing(&scene.bot, &mention.id).await;
    events
        .into_iter()
        .filter(|event| event.content.starts_with(opening))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_queued_behind_busy_agents_are_told_their_place_once() {
    let scene = Scene::builder()
        .flags(&[
            "--agents",
            "1",
            "--turns-per-agent",
            "1",
            "--wait-notice-after",
            WAIT_NOTICE_AFTER,
        ])
        .metrics()
        .start()
        .await;
    let bot = scene.bot;
    let long = scene
        .mention_mid_turn("a", "a long one [rounds=300][delay=100]")
        .await;
    let first = scene.mention("b", "first in line").await;
    let second = scene.mention("c", "second in line").await;
    let told_first = scene
        .owner
        .reply_containing(
            &bot,
            &first.id,
            "Queued: yours is next in line (1 of 1 agent turns busy)",
        )
        .await;
    let told_second = scene
        .owner
        .reply_containing(
            &bot,
            &second.id,
            "Queued: 1 turn(s) ahead of you (1 of 1 agent turns busy)",
        )
        .await;
    println!("told: {:?} / {:?}", told_first.content, told_second.content);

    scene.mention("a", "!cancel").await;
    scene.owner.reply_containing(&bot, &long.id, "Cancelled").await;
    scene.owner.reply_containing(&bot, &first.id, "done: ").await;
    scene.owner.reply_containing(&bot, &second.id, "done: ").await;
    // Answered after their notices: the second moved up a place while it
    // waited, and still heard only once.
    assert_eq!(waiting_notices(&scene, &first, "Queued").await.len(), 1);
    assert_eq!(waiting_notices(&scene, &second, "Queued").await.len(), 1);
    assert!(
        waiting_notices(&scene, &long, "Queued").await.is_empty(),
        "the mention that got its turn at once is not told to wait"
    );
    let metrics = http_get(scene.metrics_port(), "/metrics").await;
    assert!(
        metrics.contains("acp_bridge_wait_notices_total{reason=\"capacity\"} 2"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_waiting_through_failed_starts_is_told_the_failure_and_the_retry_once() {
    let scene = Scene::builder()
        .agent(&["--exit-immediately"])
        .flags(&["--wait-notice-after", WAIT_NOTICE_AFTER])
        .start()
        .await;
    let bot = scene.bot;
    let mention = scene.mention("room", "hello?").await;
    let told = scene
        .owner
        .reply_containing(&bot, &mention.id, "Waiting: the last attempt failed (")
        .await;
    // Told during a backoff ("retrying in N s") or while the agent starts
    // again ("trying again"), whichever the wait reached first.
    assert!(
        told.content.contains("failed to start up")
            && (told.content.contains("retrying in") || told.content.contains("trying again")),
        "names the failure and the retry: {}",
        told.content
    );
    // It waits through backoffs and attempts, then is given up on: the
    // give-up notice comes after every waiting notice it could get.
    scene
        .owner
        .reply_containing(&bot, &mention.id, "Giving up after")
        .await;
    let notices = waiting_notices(&scene, &mention, "Waiting:").await;
    println!("waiting notices through {} attempts: {}", 3, notices.len());
    assert_eq!(notices.len(), 1, "{notices:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_answered_without_waiting_gets_no_notice() {
    let scene = Scene::builder()
        .flags(&["--wait-notice-after", WAIT_NOTICE_AFTER])
        .start()
        .await;
    // The agent is up: the next mention's turn starts at once.
    scene.settle("room").await;
    let mark = scene.bridge.log.cursor();
    let mention = scene.mention("room", "quick one").await;
    let answer = scene.reply_to(&mention).await;
    assert!(
        answer.content.contains("done: "),
        "the first word is the answer: {}",
        answer.content
    );
    let settled = scene.settle("room").await;
    assert_eq!(
        scene
            .owner
            .events_referencing(&scene.bot, &mention.id)
            .await
            .len(),
        1,
        "only the answer"
    );
    assert!(
        scene
            .bridge
            .log
            .matching(mark, Line::new("telling a waiting mention why it waits"))
            .is_empty(),
        "no waiting notice up to the answer of {}",
        settled.id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_waiting_for_a_slow_agent_to_start_is_told_so_once() {
    let scene = Scene::builder()
        .agent(&[
            "--init-delay-ms",
            "3000",
            "--rounds",
            "1",
            "--round-delay-ms",
            "10",
        ])
        .flags(&["--wait-notice-after", WAIT_NOTICE_AFTER])
        .start()
        .await;
    let bot = scene.bot;
    let mention = scene.mention("room", "are you up?").await;
    scene
        .owner
        .reply_containing(&bot, &mention.id, "Waiting: the agent is starting")
        .await;
    scene.owner.reply_containing(&bot, &mention.id, "done: ").await;
    assert_eq!(waiting_notices(&scene, &mention, "Waiting:").await.len(), 1);
}
