//! The agent's own slash commands and config options from chat (issue 37
//! §2): `/name args` reaches the agent as exactly that prompt, an unknown
//! one gets the list and reaches nothing, `!commands` lists them;
//! `!options` lists every config option, `!set` (the owner's only) sets
//! one, which a resumed session gets again after a restart. A stranger the
//! gate hears may run the agent's commands (see RELIABILITY.md), not ours.

use std::sync::atomic::{AtomicUsize, Ordering};

use nostr_sdk::prelude::*;
use serde_json::Value;

use crate::support::*;

const COMMANDS: &str = "compact:Summarise the session|echo:Echo what follows";

fn quick(agent: &[&str]) -> SceneBuilder {
    let mut flags = vec!["--rounds", "1", "--round-delay-ms", "10"];
    flags.extend_from_slice(agent);
    Scene::builder().agent(&flags).frame_log()
}

/// The owner says `text` in `room` and gets the bot's answer's text (a
/// numbered `@ask-N`, set aside by the command parser, keeps the same text
/// said twice from being the same event).
async fn ask(scene: &Scene, text: &str) -> String {
    static ASKED: AtomicUsize = AtomicUsize::new(0);
    let n = ASKED.fetch_add(1, Ordering::Relaxed);
    let mention = scene.mention("room", &format!("{text} @ask-{n}")).await;
    scene.reply_to(&mention).await.content
}

/// The text of every prompt the agents received, in order.
fn prompts(scene: &Scene) -> Vec<String> {
    scene
        .agent_frames()
        .iter()
        .filter(|frame| frame["method"] == "session/prompt")
        .map(|frame| {
            let blocks = frame["params"]["prompt"].as_array().cloned().unwrap_or_default();
            blocks.iter().filter_map(|block| block["text"].as_str()).collect()
        })
        .collect()
}

/// The params of every `session/set_config_option` the agents received.
fn sets(scene: &Scene) -> Vec<Value> {
    scene
        .agent_frames()
        .into_iter()
        .filter(|frame| frame["method"] == "session/set_config_option")
        .map(|frame| frame["params"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_command_is_the_whole_prompt_and_an_unknown_one_is_not_sent() {
    let scene = quick(&["--commands", COMMANDS]).start().await;
    // A fresh session's first prompt: the list arrives after session/new.
    let mention = scene
        .mention(
            "room",
            &format!("nostr:{} /echo hi  there", scene.bot.to_bech32().unwrap()),
        )
        .await;
    let ran = scene.reply_to(&mention).await.content;
    assert!(ran.contains("ran /echo with args: hi  there"), "{ran}");
    assert_eq!(prompts(&scene), ["/echo hi  there"], "no framing before it");

    let mention = scene.mention("room", "/nope now").await;
    let refused = scene.reply_to(&mention).await.content;
    println!("the notice for /nope: {refused:?}");
    assert!(
        refused.contains("`/nope` is not a command this agent offers, so it was not sent."),
        "{refused}"
    );
    assert!(
        refused.contains("/compact — Summarise the session\n/echo — Echo what follows"),
        "{refused}"
    );
    assert_eq!(prompts(&scene).len(), 1, "/nope reached no agent");

    let listed = ask(&scene, "!commands").await;
    assert!(
        listed.starts_with("Commands of this conversation's agent session"),
        "{listed}"
    );
    assert!(listed.contains("/echo — Echo what follows"), "{listed}");
    let plain = ask(&scene, "/etc/hosts is broken").await;
    assert!(!plain.contains("ran /"), "a path is a message: {plain}");
    assert!(prompts(&scene)[1].contains("[acp-bridge]"), "framed as a message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_command_mid_turn_waits_for_a_turn_of_its_own() {
    let scene = quick(&["--commands", COMMANDS])
        .flags(&["--multiple-event-handling", "steer"])
        .start()
        .await;
    let work = scene.mention_mid_turn("room", "long work [delay=1500]").await;
    let command = scene.mention("room", "/echo later").await;
    let worked = scene.reply_to(&work).await.content;
    assert!(!worked.contains("ran /echo"), "{worked}");
    let ran = scene.reply_to(&command).await.content;
    assert!(ran.contains("ran /echo with args: later"), "{ran}");
    let prompts = prompts(&scene);
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    assert_eq!(prompts[1], "/echo later");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_are_listed_set_by_the_owner_only_and_set_again_after_a_restart() {
    let agent = [
        "--controls",
        "config",
        "--reopen-sessions",
        "resume",
        "--commands",
        COMMANDS,
    ];
    let mut scene = quick(&agent).flags(&["--respond-to", "anyone"]).start().await;
    let first = ask(&scene, "hello").await;
    assert!(first.contains("effort: low, brief: false"), "{first}");
    let listed = ask(&scene, "!options").await;
    println!("!options: {listed:?}");
    assert!(
        listed.contains("- effort (Effort, thought_level): low [low, high]"),
        "{listed}"
    );
    assert!(
        listed.contains("- brief (Brief answers): false [true, false]"),
        "{listed}"
    );

    let stranger = scene.join().await;
    let theirs = stranger
        .mention_in_group(&scene.bot, "room", "!set brief true")
        .await;
    let answered = scene.reply_to(&theirs).await.content;
    assert!(!answered.contains("brief set to"), "{answered}");
    assert!(sets(&scene).is_empty(), "a stranger's !set is a message");
    let command = stranger
        .mention_in_group(&scene.bot, "room", "/echo from a stranger")
        .await;
    let ran = scene.reply_to(&command).await.content;
    println!("a heard stranger's /echo: {ran:?}");
    assert!(ran.contains("ran /echo with args: from a stranger"), "{ran}");

    let unknown = ask(&scene, "!set nope 1").await;
    assert_eq!(
        unknown,
        "Unknown option `nope`. Valid: model, mode, effort, brief."
    );
    let bad = ask(&scene, "!set effort huge").await;
    assert_eq!(bad, "`huge` is not a value of effort. Valid: low, high.");
    let set = ask(&scene, "!set Effort HIGH").await;
    assert_eq!(
        set,
        "effort set to high; it will apply from this conversation's next turn."
    );
    let set = ask(&scene, "!set brief answers true").await;
    assert!(set.starts_with("brief set to true"), "by its name: {set}");
    let set = ask(&scene, "!set model deep").await;
    assert!(set.starts_with("Model set to deep"), "as !model: {set}");

    let next = ask(&scene, "and now").await;
    assert!(
        next.contains("model: deep, mode: ask, effort: high, brief: true"),
        "{next}"
    );
    let applied = sets(&scene);
    println!("set_config_option calls: {applied:?}");
    assert!(
        applied
            .iter()
            .any(|set| set["configId"] == "brief" && set["value"] == true),
        "{applied:?}"
    );
    assert_eq!(applied.len(), 3, "{applied:?}");
    let listed = ask(&scene, "!options").await;
    assert!(
        listed.contains("- effort (Effort, thought_level): high"),
        "{listed}"
    );

    let status = scene.bridge.terminate(PATIENCE).await;
    assert!(status.success(), "{status}");
    scene.restart(scene.spec()).await;
    let after = ask(&scene, "after the restart").await;
    assert!(after.contains("effort: high, brief: true"), "{after}");
    let methods = scene.agent_methods();
    assert_eq!(
        methods.iter().filter(|m| *m == "session/resume").count(),
        1,
        "{methods:?}"
    );
    assert_eq!(sets(&scene).len(), 6, "the resumed session got the three again");
    let log = &scene.bridge.log;
    log.wait(
        log.start(),
        Line::new("applied the owner's option to the session").with("option", "brief"),
    )
    .await;
}

/// claude-agent-acp advertises Claude Code's commands: `!commands` lists
/// them, and `/compact` from chat runs as the command (Claude Code asks
/// the model for a summary of the session), not as a quoted message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_lists_its_commands_and_runs_compact_from_chat() {
    use test_support::claude_agent::ClaudeAgent;
    use test_support::fake_provider::{FakeProvider, Streaming};

    let provider = FakeProvider::start(Streaming::default()).expect("the fake provider listens");
    let home = std::env::temp_dir().join(format!("agent-commands-claude-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("a home");
    let claude = ClaudeAgent::against(&provider, &home);
    let names: Vec<&str> = claude.env.iter().map(|(name, _)| *name).collect();
    let agent_env = names.join(",");
    let home_text = home.to_string_lossy().into_owned();
    let mut env: Vec<(&str, &str)> = vec![("ACP_BRIDGE_AGENT_ARGS", ""), ("HOME", &home_text)];
    env.extend(claude.env.iter().map(|(name, value)| (*name, value.as_str())));
    let scene = Scene::builder()
        .agent_command(claude.program.to_str().expect("UTF-8 path"))
        .env(&env)
        .flags(&["--agent-env", &agent_env, "--cwd", &home_text])
        .start()
        .await;

    ask(&scene, "hello claude").await;
    let listed = ask(&scene, "!commands").await;
    println!("claude's commands: {listed}");
    assert!(
        listed.starts_with("Commands of this conversation's agent session"),
        "{listed}"
    );
    assert!(listed.contains("\n/compact"), "{listed}");

    let before = provider.generations().len();
    let log = &scene.bridge.log;
    let mark = log.cursor();
    let mention = scene.mention("room", "/compact").await;
    let answer = scene.reply_to(&mention).await.content;
    let finished = log.wait(mark, Line::new("turn finished")).await;
    let after = provider.generations();
    let asked: Vec<String> = after[before..]
        .iter()
        .flat_map(|request| request.user_texts())
        .collect();
    println!(
        "/compact: outcome {}, answer {answer:?}, {} model request(s) after it",
        finished["outcome"],
        after.len() - before
    );
    assert!(
        asked.iter().all(|text| !text.contains("> /compact")),
        "not quoted as a message: {asked:?}"
    );
    assert!(
        asked.iter().any(|text| text.to_lowercase().contains("summary")),
        "Claude Code asked the model for the session's summary: {asked:?}"
    );
}
