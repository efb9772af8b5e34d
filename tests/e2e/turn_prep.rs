//! A returning conversation's first prompt is prepared beside its lease:
//! while the agent reopens the session (`--session-idle` closed it), the
//! thread context is read and the mention's image fetched, so the prompt
//! waits for the slower of the two, not their sum (issue 39); and what was
//! read ahead gives way to a fresh read when the lease opened a new
//! session, which is given the thread again.

use nostr_sdk::prelude::*;

use crate::media::{PNG, image_server};
use crate::support::*;

/// How long the scripted agent takes to reopen a session: far longer than
/// a loopback relay read or image fetch.
const REOPEN_DELAY_MS: &str = "1500";

/// Where the first line matching `line` is among `lines`, failing with them.
fn position(lines: &[serde_json::Value], line: Line) -> usize {
    lines
        .iter()
        .position(|json| line.matches(json))
        .unwrap_or_else(|| panic!("no {line} in:\n{lines:#?}"))
}

/// A scene whose agent takes images and whose daemon gives each first
/// prompt its thread's context and fetches loopback images; `agent` and
/// `flags` add to those.
async fn image_thread_scene(agent: &[&str], flags: &[&str]) -> Scene {
    let agent = [&["--rounds", "1", "--round-delay-ms", "10", "--images"], agent].concat();
    let flags = [
        &[
            "--thread-context",
            "10",
            "--follow-threads",
            "off",
            "--fetch-private-addresses",
        ],
        flags,
    ]
    .concat();
    Scene::builder().agent(&agent).flags(&flags).start().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_and_media_of_a_returning_conversation_are_ready_before_its_session_reopens() {
    let images = image_server().await;
    let scene = image_thread_scene(
        &[
            "--reopen-sessions",
            "resume",
            "--reopen-delay-ms",
            REOPEN_DELAY_MS,
        ],
        &["--session-idle", "1s"],
    )
    .await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let root = owner.publish(EventBuilder::text_note("a thread")).await;
    let first = owner.publish(ask_in_thread(&root, bot, "first")).await;
    scene.reply_to(&first).await;
    log.wait(log.start(), Line::new("session closed (idle)")).await;

    owner
        .publish(note_in_thread(&root, "a note while the bot was away", 0))
        .await;
    let mark = log.cursor();
    let image = format!("{images}/small.png");
    let again = owner
        .publish(ask_in_thread(&root, bot, &format!("and this? {image}")))
        .await;
    let answer = scene.reply_to(&again).await.content;
    println!("answer:\n{answer}");
    let reopened = log.wait(mark, Line::new("session reopened")).await;
    assert_eq!(reopened["how"], "resumed", "{reopened}");

    let lines = log.lines(mark);
    let context = position(&lines, Line::new("thread context for the prompt"));
    let reopen = position(&lines, Line::new("session reopened"));
    assert!(
        context < reopen,
        "the context was read while the session reopened, not after (lines {context} and {reopen})"
    );
    let prepared = position(&lines, Line::new("turn prepared"));
    let prep = &lines[prepared];
    println!(
        "reopen {} ms · context {} ms · media {} ms · lease pending {}",
        reopened["latency_ms"], prep["context_ms"], prep["media_ms"], prep["lease_pending"]
    );
    // Logged once both ended: whether the preparation ended first.
    assert_eq!(
        prep["lease_pending"], true,
        "prepared before the reopen ended: {prep}"
    );
    assert_eq!(prep["media_fetched"], 1, "{prep}");

    assert_eq!(
        answer.matches("a note while the bot was away").count(),
        1,
        "the context, once: {answer}"
    );
    assert!(
        answer.contains(&format!("[image image/png, {} bytes]", PNG.len())),
        "the image fetched ahead reached the agent: {answer}"
    );
    assert_eq!(answer.matches("[image image/").count(), 1, "{answer}");
}

/// An agent that cannot reopen sessions, after a restart of the daemon:
/// the next mention starts a new session, slowly (`initialize`), and the
/// context read ahead from the old session's mark gives way: the new
/// session is given the thread again, its earlier note included, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_opened_by_the_lease_gets_the_whole_thread_not_the_context_read_ahead() {
    let mut scene = Scene::builder()
        .agent(&[
            "--rounds",
            "1",
            "--round-delay-ms",
            "10",
            "--init-delay-ms",
            "500",
        ])
        .flags(&["--thread-context", "10", "--follow-threads", "off"])
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let root = owner.publish(EventBuilder::text_note("a thread")).await;
    owner.publish(note_in_thread(&root, "the earlier note", 5)).await;
    let first = owner.publish(ask_in_thread(&root, bot, "first")).await;
    let answer = scene.reply_to(&first).await.content;
    assert_eq!(answer.matches("the earlier note").count(), 1, "{answer}");

    let status = scene.bridge.terminate(PATIENCE).await;
    assert!(status.success(), "{status}");
    scene.restart(scene.spec()).await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let mark = log.cursor();
    let again = owner.publish(ask_in_thread(&root, bot, "again")).await;
    let answer = scene.reply_to(&again).await.content;
    println!("answer:\n{answer}");
    assert_eq!(
        answer.matches("the earlier note").count(),
        1,
        "the new session is given the thread again: {answer}"
    );
    let reread = log
        .wait(
            mark,
            Line::new("the thread context read ahead is stale: reading it again"),
        )
        .await;
    assert_eq!(reread["why"], "the lease opened a new session", "{reread}");
}

/// A conversation whose session is live is leased at once: nothing to
/// hide behind the lease, so nothing is prepared beside it (two things in
/// flight would only wake a second runtime worker); the prompt reads the
/// thread and fetches the media in line, and carries them as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_sessions_turn_prepares_nothing_beside_its_lease() {
    let images = image_server().await;
    let scene = image_thread_scene(&[], &[]).await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let root = owner.publish(EventBuilder::text_note("a thread")).await;
    let first = owner.publish(ask_in_thread(&root, bot, "first")).await;
    scene.reply_to(&first).await;

    owner
        .publish(note_in_thread(&root, "a note between the two", 0))
        .await;
    let mark = log.cursor();
    let image = format!("{images}/small.png");
    let again = owner
        .publish(ask_in_thread(&root, bot, &format!("and this? {image}")))
        .await;
    // The reply comes after the prompt, which comes after any preparation.
    let answer = scene.reply_to(&again).await.content;
    println!("answer:\n{answer}");
    let lines = log.lines(mark);
    assert!(
        !lines.iter().any(|json| Line::new("turn prepared").matches(json)),
        "prepared beside the lease of a live session:\n{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|json| Line::new("thread context for the prompt").matches(json)),
        "the context was read in line"
    );
    assert_eq!(answer.matches("a note between the two").count(), 1, "{answer}");
    assert!(
        answer.contains(&format!("[image image/png, {} bytes]", PNG.len())),
        "the image was fetched in line: {answer}"
    );
}
