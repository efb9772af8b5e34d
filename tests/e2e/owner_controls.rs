//! The owner's `!model` and `!mode` (listed and chosen through the agent's
//! config options, `session/set_mode` as the fallback), kept with the
//! conversation and applied again after a restart, and `!status`'s words
//! for the conversation it is sent in.

use std::sync::atomic::{AtomicUsize, Ordering};

use nostr_sdk::prelude::*;

use crate::mcp::mcp_status_for;
use crate::support::*;

/// A scene whose scripted agent offers a model and a mode `how`
/// (`config` or `modes`), with quick turns and its frames logged.
fn controlled(how: &str, agent: &[&str]) -> SceneBuilder {
    let mut flags = vec!["--controls", how, "--rounds", "1", "--round-delay-ms", "10"];
    flags.extend_from_slice(agent);
    Scene::builder().agent(&flags).frame_log()
}

fn count(methods: &[String], method: &str) -> usize {
    methods.iter().filter(|m| m.as_str() == method).count()
}

/// The owner says `text` in `room` and gets the bot's answer's text. A
/// numbered `@ask-N` (set aside by the command parser) keeps the same text
/// said twice within a second from being the same event.
async fn ask(scene: &Scene, text: &str) -> String {
    static ASKED: AtomicUsize = AtomicUsize::new(0);
    let n = ASKED.fetch_add(1, Ordering::Relaxed);
    let mention = scene.mention("room", &format!("{text} @ask-{n}")).await;
    scene.reply_to(&mention).await.content
}

/// The tokens the agent was offered, in order.
fn offered_tokens(scene: &Scene) -> Vec<String> {
    scene
        .offered_mcp_tokens()
        .into_iter()
        .map(|(_, token)| token)
        .collect()
}

/// Also `!rotate` as one call: the conversation has a session, the owner's
/// choices, a context mark (`--thread-context`: the group's chat before it
/// was given once) and an MCP token; after `!rotate` the next turn runs on
/// a new session that is given the chat again and keeps the choices, and
/// the old token is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_lists_sets_and_the_next_turn_runs_on_it() {
    let scene = controlled("config", &[])
        .flags(&["--thread-context", "10"])
        .start()
        .await;
    let before = EventBuilder::new(Kind::Custom(9), "the build is red again")
        .tag(Tag::custom(TagKind::h(), ["room"]))
        .custom_created_at(Timestamp::from_secs(Timestamp::now().as_secs() - 10));
    scene.owner.publish(before).await;
    let first = ask(&scene, "hello").await;
    assert!(first.contains("model: fast, mode: ask"), "{first}");
    assert!(first.contains("> the build is red again"), "{first}");

    let listed = ask(&scene, "!model").await;
    assert!(
        listed.contains("Models of this conversation's session"),
        "{listed}"
    );
    assert!(
        listed.contains("* fast (Fast)"),
        "the current one is marked: {listed}"
    );
    assert!(listed.contains("- deep (Deep)"), "{listed}");

    let unknown = ask(&scene, "!model huge").await;
    assert!(
        unknown.contains("Unknown model `huge`. Valid: fast, deep."),
        "{unknown}"
    );

    let set = ask(&scene, "!model deep").await;
    assert!(set.contains("Model set to deep"), "{set}");
    let modes = ask(&scene, "!mode code").await;
    assert!(modes.contains("Mode set to code"), "{modes}");

    let next = ask(&scene, "and now").await;
    assert!(next.contains("model: deep, mode: code"), "{next}");
    let listed = ask(&scene, "!model").await;
    assert!(listed.contains("* deep (Deep)"), "{listed}");
    let methods = scene.agent_methods();
    assert_eq!(count(&methods, "session/set_config_option"), 2, "{methods:?}");
    let last = ask(&scene, "once more").await;
    assert!(last.contains("model: deep, mode: code"), "{last}");
    assert!(
        !last.contains("the build is red again"),
        "the session saw the chat already: {last}"
    );
    assert_eq!(
        count(&scene.agent_methods(), "session/set_config_option"),
        2,
        "a session that holds the choice is not asked again"
    );

    let old_token = offered_tokens(&scene).pop().expect("a token offered");
    let live = mcp_status_for(&scene, &old_token).await;
    assert!(live.starts_with("HTTP/1.1 404"), "a live token: {live}");

    // The choice is the conversation's: a fresh session gets it too.
    ask(&scene, "!rotate").await;
    let refused = mcp_status_for(&scene, &old_token).await;
    let fresh = ask(&scene, "on a fresh session").await;
    assert!(fresh.contains("model: deep, mode: code"), "{fresh}");
    assert!(
        fresh.contains("> the build is red again"),
        "the fresh session is given the chat again: {fresh}"
    );
    let methods = scene.agent_methods();
    assert_eq!(count(&methods, "session/new"), 2, "{methods:?}");
    assert_eq!(count(&methods, "session/set_config_option"), 4, "{methods:?}");
    let tokens = offered_tokens(&scene);
    let new_token = tokens.last().expect("a token offered");
    println!(
        "after !rotate: the old token {refused}; {} token(s) offered, the new one {}",
        tokens.len(),
        mcp_status_for(&scene, new_token).await
    );
    assert!(
        refused.starts_with("HTTP/1.1 401"),
        "the old token is refused: {refused}"
    );
    assert_ne!(*new_token, old_token, "the new session has a token of its own");
    let served = mcp_status_for(&scene, new_token).await;
    assert!(
        served.starts_with("HTTP/1.1 404"),
        "the new token is live: {served}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_choice_is_applied_again_after_a_restart() {
    let mut scene = controlled("config", &["--reopen-sessions", "resume"])
        .start()
        .await;
    ask(&scene, "hello").await;
    let set = ask(&scene, "!model deep").await;
    assert!(set.contains("Model set to deep"), "{set}");
    let before = ask(&scene, "before the restart").await;
    assert!(before.contains("model: deep"), "{before}");
    let status = scene.bridge.terminate(PATIENCE).await;
    assert!(status.success(), "{status}");

    scene.restart(scene.spec()).await;
    let after = ask(&scene, "after the restart").await;
    assert!(after.contains("model: deep"), "{after}");
    let methods = scene.agent_methods();
    assert_eq!(count(&methods, "session/new"), 1, "{methods:?}");
    assert_eq!(count(&methods, "session/resume"), 1, "{methods:?}");
    assert_eq!(
        count(&methods, "session/set_config_option"),
        2,
        "the resumed session got the choice again: {methods:?}"
    );
    let log = &scene.bridge.log;
    log.wait(
        log.start(),
        Line::new("applied the owner's choice to the session").with("value", "deep"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_mode_is_the_fallback_for_an_agent_with_only_modes() {
    let scene = controlled("modes", &[]).start().await;
    ask(&scene, "hello").await;
    let listed = ask(&scene, "!mode").await;
    assert!(listed.contains("* ask (Ask)"), "{listed}");
    assert!(listed.contains("- code (Code)"), "{listed}");
    let no_models = ask(&scene, "!model").await;
    assert!(
        no_models.contains("This agent offers no model choice."),
        "{no_models}"
    );
    let refused = ask(&scene, "!model deep").await;
    assert!(refused.contains("nothing to set"), "{refused}");

    let set = ask(&scene, "!mode code").await;
    assert!(set.contains("Mode set to code"), "{set}");
    let next = ask(&scene, "and now").await;
    assert!(next.contains("mode: code"), "{next}");
    let methods = scene.agent_methods();
    assert_eq!(count(&methods, "session/set_mode"), 1, "{methods:?}");
    assert_eq!(count(&methods, "session/set_config_option"), 0, "{methods:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_either_gets_a_clear_answer_once() {
    let scene = Scene::builder()
        .agent(&["--rounds", "1", "--round-delay-ms", "10"])
        .start()
        .await;
    let unknown = ask(&scene, "!model").await;
    assert!(unknown.contains("has not told its models yet"), "{unknown}");
    let kept = ask(&scene, "!model deep").await;
    assert!(
        kept.contains("will apply when this conversation's session starts"),
        "{kept}"
    );

    let (owner, bot) = (&scene.owner, scene.bot);
    let first = scene.mention("room", "hello").await;
    let note = owner
        .reply_containing(&bot, &first.id, "could not be applied")
        .await;
    assert!(
        note.content.contains("this agent offers no model choice"),
        "{}",
        note.content
    );
    owner.reply_containing(&bot, &first.id, "done:").await;

    let listed = ask(&scene, "!model").await;
    assert!(listed.contains("This agent offers no model choice."), "{listed}");
    let second = scene.mention("room", "again").await;
    scene.reply_to(&second).await;
    // The choice was dropped when it could not apply: the second turn,
    // answered after its start, did not try again.
    let log = &scene.bridge.log;
    let dropped = Line::new("cannot apply the owner's choice; dropped it");
    let tries = log
        .lines(log.start())
        .iter()
        .filter(|line| dropped.matches(line))
        .count();
    assert_eq!(tries, 1, "told once, not at every turn");
    let answers = owner.events_referencing(&bot, &second.id).await;
    assert_eq!(answers.len(), 1, "{answers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_model_command_is_an_ordinary_message() {
    let scene = controlled("config", &[])
        .flags(&["--respond-to", "anyone"])
        .start()
        .await;
    let guest = scene.join().await;
    let said = guest.mention_in_group(&scene.bot, "room", "!model deep").await;
    let answer = scene.reply_to(&said).await;
    assert!(answer.content.contains("done:"), "a turn: {}", answer.content);
    assert!(answer.content.contains("model: fast"), "{}", answer.content);
    let next = ask(&scene, "and now").await;
    assert!(next.contains("model: fast"), "nothing was chosen: {next}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_tells_the_conversation_and_a_mid_turn_choice_waits_for_the_next_turn() {
    let scene = Scene::builder()
        .agent(&[
            "--controls",
            "config",
            "--rounds",
            "100",
            "--round-delay-ms",
            "100",
        ])
        .flags(&["--multiple-event-handling", "queue"])
        .start()
        .await;
    ask(&scene, "warm up [rounds=1]").await;
    let work = scene.mention_mid_turn("room", "endless work").await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    let waiting = scene.mention("room", "later [rounds=1]").await;
    log.wait(mark, Line::accepted(&waiting.id)).await;

    let status = ask(&scene, "!status").await;
    assert!(
        status.contains("This conversation: a turn in flight for "),
        "{status}"
    );
    assert!(status.contains(" s, 1 mention(s) waiting."), "{status}");
    assert!(status.contains("model fast, mode ask"), "{status}");
    assert!(
        status.contains("mid-turn messages steer via goose (cancel + merge when refused)"),
        "{status}"
    );

    // A choice made mid-turn waits for the next turn: the waiting mention's.
    let set = ask(&scene, "!model deep").await;
    assert!(set.contains("the turn in flight keeps its model"), "{set}");
    ask(&scene, "!cancel").await;
    scene.reply_to(&work).await;
    let later = scene.reply_to(&waiting).await.content;
    assert!(later.contains("model: deep"), "{later}");
    let idle = ask(&scene, "!status").await;
    assert!(
        idle.contains("This conversation: no turn in flight, 0 mention(s) waiting."),
        "{idle}"
    );
}
