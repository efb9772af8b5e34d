//! Issue 37 §4, approvals the owner does not repeat: under
//! `--permission-policy ask-owner` a permission question shows what is
//! approved (the command, the diff, bounded), and an "always" answer is
//! remembered for that conversation and tool (across a restart), so the
//! agent's next question about it is answered without asking, until
//! `!permissions forget`; in someone else's turn it is used once only.

use std::time::Duration;

use crate::support::*;

const ASKED: &str = "asks for permission";
/// The scripted agent's tool call that runs a command (its key is its
/// kind, `execute`), asked for in the mention `n` (each its own text: the
/// same text in the same second would be the same event).
fn run_tests(n: u32) -> String {
    format!("run the tests, take {n} [permission-command=make test]")
}
const STOP_WITHIN: Duration = Duration::from_secs(10);

fn ask_owner(extra: &[&str]) -> SceneBuilder {
    Scene::builder()
        .agent(&["--rounds", "1", "--round-delay-ms", "20"])
        .flags(&["--permission-policy", "ask-owner"])
        .flags(extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_question_shows_the_command_and_the_diff_cut_with_a_marker() {
    let scene = ask_owner(&[]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene
        .mention(
            "room",
            "tidy up [permission-command=cargo fmt --all] [permission-diff=100]",
        )
        .await;
    let question = owner.reply_containing(&bot, &mention.id, ASKED).await;
    let text = &question.content;
    assert!(text.contains("\n$ cargo fmt --all\n"), "the command: {text}");
    assert!(
        text.contains("--- src/generated.rs\n+++ src/generated.rs\n@@ -1,100 +1,100 @@\n-old line 1\n"),
        "the unified diff: {text}"
    );
    // The command (1), the diff's headers (3) and 36 of its 200 lines.
    assert!(
        text.contains("-old line 36\n… 164 more lines not shown\n1. Allow once"),
        "cut with the marker, the options after it: {text}"
    );
    assert!(!text.contains("old line 37"), "{text}");
    owner
        .reply_in_group(&bot, "room", &mention.id, &question.id, "reject once")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer.content.contains("tool: rejected (reject_once)"),
        "{}",
        answer.content
    );
    println!(
        "diff of 200 changed lines and a command: question {} bytes, {} lines, 164 diff lines not shown",
        text.len(),
        text.lines().count()
    );
}

/// The owner's turn in `channel` runs [`run_tests`] (`n`), and the bridge answers
/// its permission question itself: the agent's answer says it was allowed
/// with the "always" option, no question was asked (none posted by the
/// time the answer arrived, none logged), and the log names the choice.
async fn answered_without_asking(scene: &Scene, channel: &str, n: u32) {
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let mark = log.cursor();
    let mention = scene.mention(channel, &run_tests(n)).await;
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer.content.contains("tool: allowed (allow_always)"),
        "the agent saw its allow option chosen: {}",
        answer.content
    );
    let posted = owner.events_referencing(&bot, &mention.id).await;
    assert!(
        posted.iter().all(|event| !event.content.contains(ASKED)),
        "not asked again: {posted:?}"
    );
    assert!(log.matching(mark, Line::new("asked the owner")).is_empty());
    let remembered = Line::new("permission answered by remembered choice")
        .with("tool", "execute")
        .with("verdict", "allow");
    assert_eq!(log.matching(mark, remembered).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_allow_is_not_asked_again_survives_a_restart_and_forget_revokes_it() {
    let mut scene = ask_owner(&[]).start().await;
    let bot = scene.bot;
    let mention = scene.mention("room", &run_tests(1)).await;
    let question = scene.owner.reply_containing(&bot, &mention.id, ASKED).await;
    assert!(question.content.contains("$ make test"), "{}", question.content);
    scene
        .owner
        .reply_in_group(&bot, "room", &mention.id, &question.id, "Always allow")
        .await;
    let answer = scene.owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer.content.contains("tool: allowed (allow_always)"),
        "{}",
        answer.content
    );

    answered_without_asking(&scene, "room", 0).await;
    // Another conversation is asked: a choice is its conversation's.
    let elsewhere = scene.mention("hall", &run_tests(2)).await;
    let asked = scene.owner.reply_containing(&bot, &elsewhere.id, ASKED).await;
    scene
        .owner
        .reply_in_group(&bot, "hall", &elsewhere.id, &asked.id, "reject once")
        .await;
    scene.owner.reply_containing(&bot, &elsewhere.id, "done:").await;

    scene.bridge.terminate(STOP_WITHIN).await;
    scene.restart(scene.spec()).await;
    answered_without_asking(&scene, "room", 99).await;

    let list = scene.mention("room", "!permissions").await;
    let listed = scene.reply_to(&list).await;
    assert!(listed.content.contains("- execute: allow"), "{}", listed.content);
    let forget = scene.mention("room", "!permissions forget execute").await;
    let forgot = scene.reply_to(&forget).await;
    assert!(
        forgot
            .content
            .starts_with("Forgot the remembered answer for execute"),
        "{}",
        forgot.content
    );

    let again = scene.mention("room", &run_tests(3)).await;
    let asked = scene.owner.reply_containing(&bot, &again.id, ASKED).await;
    scene
        .owner
        .reply_in_group(&bot, "room", &again.id, &asked.id, "allow once")
        .await;
    let answer = scene.owner.reply_containing(&bot, &again.id, "done:").await;
    assert!(
        answer.content.contains("tool: allowed (allow_once)"),
        "{}",
        answer.content
    );
    println!(
        "always allow: asked 1, answered by the remembered choice 2 (one after a restart), asked again after forget 1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_strangers_turn_an_always_is_used_once_until_the_owner_says_so() {
    let scene = ask_owner(&["--respond-to", "anyone"]).start().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let stranger = scene.join().await;

    let mention = stranger.mention_in_group(&bot, "yard", &run_tests(4)).await;
    let question = owner.reply_containing(&bot, &mention.id, ASKED).await;
    owner
        .reply_in_group(&bot, "yard", &mention.id, &question.id, "2")
        .await;
    let told = owner
        .reply_containing(&bot, &mention.id, "Used once, not remembered")
        .await;
    assert!(
        told.content.contains("`!permissions allow execute`"),
        "how to make it stick: {}",
        told.content
    );
    let answer = owner.reply_containing(&bot, &mention.id, "done:").await;
    assert!(
        answer.content.contains("tool: allowed (allow_always)"),
        "{}",
        answer.content
    );

    let mark = log.cursor();
    let next = stranger.mention_in_group(&bot, "yard", &run_tests(5)).await;
    let asked = owner.reply_containing(&bot, &next.id, ASKED).await;
    assert!(
        log.matching(mark, Line::new("permission answered by remembered choice"))
            .is_empty()
    );
    owner
        .reply_in_group(&bot, "yard", &next.id, &asked.id, "reject once")
        .await;
    owner.reply_containing(&bot, &next.id, "done:").await;

    // The owner says so: from then on the stranger's turns are not asked.
    let allow = scene.mention("yard", "!permissions allow execute").await;
    let allowed = scene.reply_to(&allow).await;
    assert!(allowed.content.starts_with("Remembered:"), "{}", allowed.content);
    let mark = log.cursor();
    let last = stranger.mention_in_group(&bot, "yard", &run_tests(6)).await;
    let answer = owner.reply_containing(&bot, &last.id, "done:").await;
    assert!(
        answer.content.contains("tool: allowed (allow_always)"),
        "{}",
        answer.content
    );
    assert!(log.matching(mark, Line::new("asked the owner")).is_empty());
    println!(
        "stranger's turn: always answered 1, remembered 0, asked again 1; after !permissions allow: asked 0"
    );
}
