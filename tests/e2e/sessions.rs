//! Sessions from the chat (issue 37 §3): `!new` says what became of the old
//! session, `!sessions` lists this conversation's sessions and never
//! another's, `!resume` goes back to one, `!fork` answers a side question
//! in a fork without prompting the conversation's session, and the
//! session's title shows in `!status` and as the NIP-14 subject of the
//! first answer in a new note thread. On the scripted agent
//! (`--list-sessions`), then on claude-agent-acp through the fake provider.

use std::sync::atomic::{AtomicUsize, Ordering};

use nostr_sdk::prelude::*;

use crate::support::*;

/// A scene whose scripted agent lists, forks and resumes sessions, with
/// quick turns and its frames logged.
fn listing(extra: &[&str]) -> SceneBuilder {
    let mut flags = vec![
        "--rounds",
        "1",
        "--round-delay-ms",
        "10",
        "--reopen-sessions",
        "resume",
    ];
    flags.extend_from_slice(extra);
    Scene::builder().agent(&flags).frame_log()
}

/// The owner says `text` in the group `room`; the bot's answer's text. A
/// numbered `@ask-N` (set aside by the command parser) keeps the same
/// text said twice within a second from being the same event.
async fn ask(scene: &Scene, room: &str, text: &str) -> String {
    static ASKED: AtomicUsize = AtomicUsize::new(0);
    let n = ASKED.fetch_add(1, Ordering::Relaxed);
    let mention = scene.mention(room, &format!("{text} @ask-{n}")).await;
    scene.reply_to(&mention).await.content
}

/// The session of the agent's last prompt whose text holds `needle`.
fn prompted_session(scene: &Scene, needle: &str) -> String {
    scene
        .agent_frames()
        .iter()
        .filter(|frame| frame["method"] == "session/prompt")
        .filter(|frame| frame["params"]["prompt"].to_string().contains(needle))
        .rev()
        .find_map(|frame| frame["params"]["sessionId"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no prompt holds {needle}"))
}

/// The `sessionId`s of the frames of `method` the agent received, in order.
fn sessions_of(scene: &Scene, method: &str) -> Vec<String> {
    scene
        .agent_frames()
        .iter()
        .filter(|frame| frame["method"] == method)
        .filter_map(|frame| frame["params"]["sessionId"].as_str().map(str::to_owned))
        .collect()
}

/// `!new` moves the next turn to a new session and says the old one is
/// kept; `!resume` with that id takes the conversation back to it, which
/// the agent reopens with `session/resume`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_then_resume_returns_to_the_old_session() {
    let scene = listing(&["--list-sessions"]).start().await;
    ask(&scene, "a", "first words").await;
    let first = prompted_session(&scene, "first words");

    let renewed = ask(&scene, "a", "!new").await;
    println!("!new answered: {renewed}");
    assert!(
        renewed.contains(&format!("The old session {first} is kept by the agent")),
        "{renewed}"
    );
    assert!(renewed.contains(&format!("!resume {first}")), "{renewed}");
    ask(&scene, "a", "second words").await;
    let second = prompted_session(&scene, "second words");
    assert_ne!(second, first, "the turn after !new runs on a new session");

    let listed = ask(&scene, "a", "!sessions").await;
    println!("!sessions answered:\n{listed}");
    assert!(
        listed.contains(&format!("* {second}: Title of {second}")),
        "{listed}"
    );
    assert!(
        listed.contains(&format!("- {first}: Title of {first}")),
        "{listed}"
    );

    let resumed = ask(&scene, "a", &format!("!resume {first}")).await;
    assert!(
        resumed.contains(&format!("next turns run on session {first} (Title of {first})")),
        "{resumed}"
    );
    ask(&scene, "a", "third words").await;
    assert_eq!(prompted_session(&scene, "third words"), first);
    assert_eq!(
        sessions_of(&scene, "session/resume"),
        std::slice::from_ref(&first),
        "the agent reopened the chosen session"
    );
    assert!(
        sessions_of(&scene, "session/close").contains(&second),
        "the live session was closed"
    );
}

/// The threat: in a shared workspace the agent lists every
/// conversation's sessions for the one `cwd`; a conversation's
/// `!sessions` (read by everyone in its thread) shows only its own, and
/// `!resume` does not take another conversation's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_lists_this_conversation_s_sessions_and_never_another_s() {
    let scene = listing(&["--list-sessions"]).start().await;
    ask(&scene, "a", "ours here").await;
    let ours = prompted_session(&scene, "ours here");
    ask(&scene, "private", "the owner's secret plans").await;
    let theirs = prompted_session(&scene, "the owner's secret plans");

    let listed = ask(&scene, "a", "!sessions").await;
    let asked = scene
        .agent_frames()
        .into_iter()
        .rev()
        .find(|frame| frame["method"] == "session/list")
        .expect("the agent was asked for its sessions");
    println!(
        "session/list asked with cwd {}; !sessions in a answered:\n{listed}",
        asked["params"]["cwd"]
    );
    assert!(asked["params"]["cwd"].is_string(), "{asked}");
    assert!(listed.contains(&ours), "{listed}");
    assert!(
        !listed.contains(&theirs),
        "another conversation's session shown: {listed}"
    );

    let refused = ask(&scene, "a", &format!("!resume {theirs}")).await;
    assert!(
        refused.contains(&format!("No session of this conversation starts with `{theirs}`")),
        "{refused}"
    );
    ask(&scene, "a", "still ours").await;
    assert_eq!(prompted_session(&scene, "still ours"), ours);
    assert!(sessions_of(&scene, "session/resume").is_empty());
}

/// An agent that neither lists nor reopens sessions: `!new` says the old
/// session is closed, `!sessions` says the agent lists none, `!fork` that
/// it does not fork.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_session_list_is_told_so() {
    let scene = Scene::builder()
        .agent(&["--rounds", "1", "--round-delay-ms", "10"])
        .frame_log()
        .start()
        .await;
    ask(&scene, "a", "hello").await;
    let old = prompted_session(&scene, "hello");
    let renewed = ask(&scene, "a", "!new").await;
    assert!(
        renewed.contains(&format!("The old session {old} is closed")),
        "{renewed}"
    );
    let listed = ask(&scene, "a", "!sessions").await;
    assert!(
        listed.contains("This agent does not list its sessions"),
        "{listed}"
    );
    let forked = ask(&scene, "a", "!fork a side question").await;
    assert!(forked.contains("This agent does not fork sessions"), "{forked}");
    assert!(
        !scene
            .agent_methods()
            .iter()
            .any(|method| method == "session/list")
    );
}

/// `!fork TEXT` is answered in a fork of the conversation's session; the
/// conversation's session is not prompted with it, and its next turn runs
/// on it as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_answers_a_side_question_without_prompting_the_main_session() {
    let scene = listing(&["--list-sessions"]).start().await;
    ask(&scene, "a", "the main thing").await;
    let main = prompted_session(&scene, "the main thing");

    let side = ask(&scene, "a", "!fork what about the side thing?").await;
    println!("!fork answered: {side}");
    assert!(side.contains("Side answer"), "{side}");
    assert!(
        side.contains("what about the side thing?"),
        "the fork's own answer: {side}"
    );
    assert_eq!(
        sessions_of(&scene, "session/fork"),
        std::slice::from_ref(&main),
        "forked from the main session"
    );
    let forked_in = prompted_session(&scene, "what about the side thing?");
    assert_ne!(forked_in, main, "the side question went to the fork");
    let main_prompts = sessions_of(&scene, "session/prompt")
        .iter()
        .filter(|session| **session == main)
        .count();
    assert_eq!(main_prompts, 1, "the main session was not prompted");

    ask(&scene, "a", "back to the main thing").await;
    assert_eq!(prompted_session(&scene, "back to the main thing"), main);
}

/// The session's title, set by the agent on the first prompt, is the
/// NIP-14 subject of the bot's first answer in a new note thread (and of
/// no later answer there), and `!status` in that thread shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_answer_in_a_note_thread_carries_the_title_and_status_shows_it() {
    let scene = listing(&["--list-sessions"]).start().await;
    let root = scene
        .owner
        .mention_in_note(&scene.bot, "a new thread about titles")
        .await;
    let first = scene.reply_to(&root).await;
    let session = prompted_session(&scene, "a new thread about titles");
    let subject = |event: &Event| {
        event
            .tags
            .iter()
            .find(|tag| tag.kind() == TagKind::Subject)
            .and_then(|tag| tag.content())
            .map(str::to_owned)
    };
    println!("the first answer's subject: {:?}", subject(&first));
    assert_eq!(subject(&first), Some(format!("Title of {session}")));

    let later = scene
        .owner
        .publish(ask_in_thread(&root, scene.bot, "and a follow-up"))
        .await;
    let second = scene.reply_to(&later).await;
    assert_eq!(
        subject(&second),
        None,
        "only the thread's first answer: {second:?}"
    );

    let status = scene
        .owner
        .publish(ask_in_thread(&root, scene.bot, "!status"))
        .await;
    let status = scene.reply_to(&status).await.content;
    assert!(
        status.contains(&format!("Its session's title: \"Title of {session}\".")),
        "{status}"
    );
    // In a group, no subject: the title is no thread's.
    let in_group = scene.mention("a", "in a group").await;
    assert_eq!(subject(&scene.reply_to(&in_group).await), None);
}

/// The session `session opened` names after `mark`.
async fn opened_session(scene: &Scene, mark: Cursor) -> String {
    let opened = scene.bridge.log.wait(mark, Line::new("session opened")).await;
    opened["session"].as_str().expect("a session id").to_owned()
}

/// claude-agent-acp through the fake provider: `!sessions` lists the
/// conversation's session, `!new` keeps it (claude lists and resumes
/// sessions) and moves the next turn to a new one, which `!sessions` then
/// marks live beside the old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_new_work_on_claude() {
    use crate::real_agents::{RealAgent, provider};
    use test_support::fake_provider::Streaming;

    let provider = provider(Streaming::default());
    let scene = RealAgent::claude(&provider).scene(&[]).start().await;
    let mark = scene.bridge.log.cursor();
    ask(&scene, "room", "hello claude").await;
    let first = opened_session(&scene, mark).await;

    let listed = ask(&scene, "room", "!sessions").await;
    println!("claude's !sessions after one turn:\n{listed}");
    assert!(listed.contains(&format!("* {}", &first[..8])), "{listed}");

    let renewed = ask(&scene, "room", "!new").await;
    println!("claude's !new: {renewed}");
    assert!(
        renewed.contains(&format!("The old session {first} is kept by the agent")),
        "{renewed}"
    );
    let mark = scene.bridge.log.cursor();
    ask(&scene, "room", "hello again claude").await;
    let second = opened_session(&scene, mark).await;
    assert_ne!(second, first);

    let listed = ask(&scene, "room", "!sessions").await;
    println!("claude's !sessions after !new and a turn:\n{listed}");
    assert!(listed.contains(&format!("* {}", &second[..8])), "{listed}");
    assert!(listed.contains(&format!("- {}", &first[..8])), "{listed}");
}
