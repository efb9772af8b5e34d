//! Issue 37 §4, approvals the owner does not repeat: under
//! `--permission-policy ask-owner` a permission question shows what is
//! approved (the command, the diff, bounded), and an "always" answer is
//! remembered for that conversation and tool (across a restart), so the
//! agent's next question about it is answered without asking, until
//! `!permissions forget`; in someone else's turn it is used once only.

use crate::support::*;

const ASKED: &str = "asks for permission";

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
