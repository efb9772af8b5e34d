//! The turn's work, made visible (issue 37 §1): the answer ends with an
//! account of what the agent did (files changed with their line counts,
//! commands run, tools used; `--work-summary`), the operator's log has a
//! line for each tool call's start and end, and `!status` shows the plan
//! and the call running. The scripted agent reports the work with
//! `[plan=…]`, `[tool-edit=…]` and `[tool-exec=…]`.

use crate::support::*;

/// Two edits (one a new file) and one command, all under `/srv/proj`.
const BUSY: &str = "tidy up [tool-edit=/srv/proj/src/a.rs|one\\ntwo\\n|one\\n2\\nthree\\n] \
     [tool-edit=/srv/proj/README.md||hello\\n] [tool-exec=cargo test --locked]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_counts_the_files_lines_and_commands_and_the_log_has_each_call() {
    let scene = Scene::builder().start().await;
    let log = &scene.bridge.log;
    let from = log.cursor();
    let mention = scene.mention("room", BUSY).await;
    let answer = scene.reply_to(&mention).await;
    let (answer_text, account) = answer
        .content
        .split_once("\n\n---\n")
        .unwrap_or_else(|| panic!("no work summary below a line: {}", answer.content));
    assert!(answer_text.contains("done:"), "{}", answer.content);
    assert_eq!(
        account,
        "Changed 2 files (+3 −1): README.md, src/a.rs\n\
         Ran 1 command: cargo test --locked · Tools: edit ×2, execute ×1"
    );
    println!("work summary (short): {account:?}");

    let started = log
        .wait(from, Line::new("tool call started").with("kind", "execute"))
        .await;
    assert_eq!(started["tool"], "cargo test --locked", "{started}");
    assert_eq!(started["status"], "in_progress", "{started}");
    let ended = log
        .wait(
            from,
            Line::new("tool call ended")
                .with("kind", "edit")
                .with("tool", "Edit /srv/proj/README.md")
                .with("status", "completed"),
        )
        .await;
    assert!(ended["duration_ms"].is_u64(), "{ended}");
    assert!(ended["call_id"].is_string(), "{ended}");
    assert_eq!(ended["level"], "INFO", "{ended}");
    let calls = log.matching(from, Line::new("tool call ended").in_turn(&mention.id));
    assert_eq!(calls.len(), 3, "one end line per call: {calls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_lists_every_file_and_command_and_none_adds_nothing() {
    let scene = Scene::builder().flags(&["--work-summary", "full"]).start().await;
    let mention = scene.mention("room", BUSY).await;
    let answer = scene.reply_to(&mention).await;
    assert!(
        answer.content.ends_with(
            "\n\n---\nFiles changed (+3 −1):\n  README.md +1 −0\n  src/a.rs +2 −1\n\
             Commands run:\n  cargo test --locked\nTools: edit ×2, execute ×1"
        ),
        "{}",
        answer.content
    );
    // A turn that called no tool ends as it always did.
    let plain = scene.mention("room", "just talk").await;
    let plain = scene.reply_to(&plain).await;
    assert!(!plain.content.contains("---"), "{}", plain.content);

    let scene = Scene::builder().flags(&["--work-summary", "none"]).start().await;
    let mention = scene.mention("room", BUSY).await;
    let answer = scene.reply_to(&mention).await;
    assert!(!answer.content.contains("\n---\n"), "{}", answer.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_during_a_held_turn_shows_its_plan_and_the_call_running() {
    // The owner's permission question holds the turn in round 1, with
    // the plan's first step under way and the tool call pending.
    let scene = Scene::builder()
        .flags(&["--permission-policy", "ask-owner"])
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene
        .mention(
            "room",
            "ship it [plan=read the code|edit it|run the tests] [permission]",
        )
        .await;
    owner
        .reply_containing(&bot, &mention.id, "asks for permission")
        .await;
    let status = scene.mention("room", "!status").await;
    let status = scene.reply_to(&status).await;
    assert!(
        status.content.contains(
            "\nPlan:\n▶ read the code\n☐ edit it\n☐ run the tests\n\
             Now: scripted tool (execute) · 1 tool call so far\n"
        ),
        "{}",
        status.content
    );
    println!("!status during the turn: {:?}", status.content);
}
