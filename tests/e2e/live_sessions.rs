//! What stays live. `--session-idle`: a conversation quiet past the limit
//! has its session closed — `session/close` where the agent offers it, its
//! agent stopped where it does not — and its next mention reopens the same
//! session, with the owner's model choice applied again; a schedule's
//! session too, between its runs.
//! `--max-live-sessions`: a conversation that needs a session when the
//! pool is full closes the least recently used idle one first, or waits
//! (and is told so) while every live one is busy.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::*;

/// Short enough that a test waits about a second for a session to close.
const SESSION_IDLE: &str = "1s";

/// The scripted agent's flags for quick turns, reopening sessions `how`
/// (`resume`, which also offers `session/close`, or `load`, which does
/// not).
fn quick_agent(how: &str) -> Vec<&str> {
    vec![
        "--rounds",
        "1",
        "--round-delay-ms",
        "10",
        "--reopen-sessions",
        how,
    ]
}

/// A scene whose agent reopens sessions `how` ([`quick_agent`]), its
/// frames logged and `extra` agent flags.
fn quiet_after_a_second(how: &str, extra: &[&str]) -> SceneBuilder {
    let mut agent = quick_agent(how);
    agent.extend_from_slice(extra);
    Scene::builder()
        .agent(&agent)
        .flags(&["--session-idle", SESSION_IDLE])
        .frame_log()
}

/// The owner says `text` in `room` and gets the bot's answer's text.
async fn ask(scene: &Scene, text: &str) -> String {
    ask_in(scene, "room", text).await
}

/// The owner says `text` in `channel` and gets the bot's answer's text; a
/// numbered suffix keeps the same text said twice from being one event.
async fn ask_in(scene: &Scene, channel: &str, text: &str) -> String {
    static ASKED: AtomicUsize = AtomicUsize::new(0);
    let n = ASKED.fetch_add(1, Ordering::Relaxed);
    let mention = scene.mention(channel, &format!("{text} @ask-{n}")).await;
    scene.reply_to(&mention).await.content
}

/// The `sessionId` of each frame the agents received with `method`.
fn sessions_of(scene: &Scene, method: &str) -> Vec<String> {
    scene
        .agent_frames()
        .iter()
        .filter(|frame| frame["method"] == method)
        .filter_map(|frame| frame["params"]["sessionId"].as_str().map(str::to_owned))
        .collect()
}

/// The sessions the agents were sent `session/close` for, once they hold
/// `count`: the daemon logs a close as it asks for it, and the agent
/// records the frame when it arrives.
async fn closes_received(scene: &Scene, count: usize) -> Vec<String> {
    eventually(
        PATIENCE,
        async || {
            let closed = sessions_of(scene, "session/close");
            (closed.len() >= count).then_some(closed)
        },
        || format!("{count} session/close frame(s) at the agent"),
    )
    .await
}

/// The conversation's session: the one its first prompt went to.
fn first_session(scene: &Scene) -> String {
    prompted_sessions(scene)
        .into_iter()
        .next()
        .expect("a session/prompt")
}

/// The sessions prompted so far, each once, in the order of their first
/// prompt.
fn prompted_sessions(scene: &Scene) -> Vec<String> {
    let mut sessions = sessions_of(scene, "session/prompt");
    let mut seen = std::collections::HashSet::new();
    sessions.retain(|session| seen.insert(session.clone()));
    sessions
}

fn count(methods: &[String], method: &str) -> usize {
    methods.iter().filter(|m| m.as_str() == method).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_session_is_closed_and_the_next_mention_resumes_it() {
    let scene = quiet_after_a_second("resume", &[]).start().await;
    let log = &scene.bridge.log;
    let first = ask(&scene, "remember this").await;
    assert!(first.contains("> remember this"), "{first}");
    let session = first_session(&scene);
    let agents = scene.bridge.wait_for_agents().await;

    let closed = log.wait(log.start(), Line::new("session closed (idle)")).await;
    assert_eq!(closed["how"], "session/close", "{closed}");
    assert_eq!(closed["session"], session.as_str(), "{closed}");
    assert_eq!(closes_received(&scene, 1).await, vec![session.clone()]);
    assert_eq!(
        scene.bridge.agent_pids(),
        agents,
        "the agent process keeps running for other sessions"
    );
    let status = ask(&scene, "!status").await;
    assert!(status.contains(" Live sessions: 0. "), "{status}");

    let mark = log.cursor();
    let again = ask(&scene, "and now").await;
    assert!(again.contains("> and now"), "{again}");
    let reopened = log.wait(mark, Line::new("session reopened")).await;
    assert_eq!(reopened["how"], "resumed", "{reopened}");
    assert!(reopened["latency_ms"].is_u64(), "{reopened}");
    assert_eq!(sessions_of(&scene, "session/resume"), vec![session]);
    assert_eq!(count(&scene.agent_methods(), "session/new"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_cannot_close_a_session_is_stopped_once_its_only_session_is_quiet() {
    let scene = quiet_after_a_second("load", &[]).start().await;
    let log = &scene.bridge.log;
    let daemon = scene.bridge.pid();
    ask(&scene, "remember this").await;
    let session = first_session(&scene);

    let closed = log.wait(log.start(), Line::new("session closed (idle)")).await;
    assert_eq!(closed["how"], "agent stopped", "{closed}");
    let gone = async || scripted_agents_below(daemon).is_empty().then_some(());
    eventually(PATIENCE, gone, || "the idle agent process gone".to_owned()).await;
    assert_eq!(count(&scene.agent_methods(), "session/close"), 0);

    let mark = log.cursor();
    let again = ask(&scene, "and now").await;
    assert!(again.contains("> and now"), "{again}");
    let reopened = log.wait(mark, Line::new("session reopened")).await;
    assert_eq!(reopened["how"], "loaded", "{reopened}");
    assert_eq!(sessions_of(&scene, "session/load"), vec![session]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopened_session_gets_the_owner_s_model_again() {
    let scene = quiet_after_a_second("resume", &["--controls", "config"])
        .start()
        .await;
    let log = &scene.bridge.log;
    ask(&scene, "hello").await;
    let set = ask(&scene, "!model deep").await;
    assert!(set.contains("Model set to deep"), "{set}");
    let before = ask(&scene, "before the close").await;
    assert!(before.contains("model: deep"), "{before}");
    // The session may have closed and reopened already while the owner
    // chose (a second is short): count from here.
    let mark = log.cursor();
    let applied = count(&scene.agent_methods(), "session/set_config_option");
    assert!(applied >= 1, "the choice was applied");

    log.wait(mark, Line::new("session closed (idle)")).await;
    let after = ask(&scene, "after the close").await;
    assert!(after.contains("model: deep"), "{after}");
    let reopened = log.wait(mark, Line::new("session reopened")).await;
    assert_eq!(reopened["how"], "resumed", "{reopened}");
    let methods = scene.agent_methods();
    assert_eq!(count(&methods, "session/new"), 1, "{methods:?}");
    assert_eq!(
        count(&methods, "session/set_config_option"),
        applied + 1,
        "the reopened session got the choice again: {methods:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_closes_the_least_recently_used_idle_session_first() {
    let scene = Scene::builder()
        .agent(&quick_agent("resume"))
        .flags(&["--max-live-sessions", "2", "--session-idle", "off"])
        .frame_log()
        .start()
        .await;
    let log = &scene.bridge.log;
    ask_in(&scene, "a", "first").await;
    ask_in(&scene, "b", "second").await;
    let [a, b] = <[String; 2]>::try_from(prompted_sessions(&scene)).expect("two sessions");
    assert!(sessions_of(&scene, "session/close").is_empty());

    let third = ask_in(&scene, "c", "third").await;
    assert!(third.contains("> third"), "{third}");
    let closed = log.wait(log.start(), Line::new("session closed (lru)")).await;
    assert_eq!(
        closed["session"],
        a.as_str(),
        "a's is the least recently used: {closed}"
    );
    assert_eq!(closes_received(&scene, 1).await, vec![a.clone()]);
    let status = ask_in(&scene, "c", "!status").await;
    assert!(status.contains(" Live sessions: 2. "), "{status}");

    let mark = log.cursor();
    let again = ask_in(&scene, "a", "back again").await;
    assert!(again.contains("> back again"), "{again}");
    let closed = log.wait(mark, Line::new("session closed (lru)")).await;
    assert_eq!(closed["session"], b.as_str(), "now b's is: {closed}");
    let reopened = log.wait(mark, Line::new("session reopened")).await;
    assert_eq!(reopened["session"], a.as_str(), "{reopened}");
    assert_eq!(count(&scene.agent_methods(), "session/new"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_live_session_busy_a_new_conversation_waits_is_told_and_is_answered_after() {
    let scene = Scene::builder()
        .agent(&["--reopen-sessions", "resume"])
        .flags(&[
            "--max-live-sessions",
            "2",
            "--session-idle",
            "off",
            "--wait-notice-after",
            "1s",
        ])
        .metrics()
        .start()
        .await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let long_a = scene
        .mention_mid_turn("a", "a long one [rounds=300][delay=100]")
        .await;
    scene
        .mention_mid_turn("b", "another long one [rounds=300][delay=100]")
        .await;

    let third = scene.mention("c", "third").await;
    let told = scene
        .owner
        .reply_containing(&bot, &third.id, "Queued: every live agent session is busy")
        .await;
    println!("told: {:?}", told.content);
    assert!(
        log.matching(log.start(), Line::new("session closed (lru)"))
            .is_empty(),
        "no busy session is closed"
    );

    scene.mention("a", "!cancel").await;
    scene.owner.reply_containing(&bot, &long_a.id, "Cancelled").await;
    scene.owner.reply_containing(&bot, &third.id, "done: ").await;
    log.wait(log.start(), Line::new("session closed (lru)")).await;
    let metrics = http_get(scene.metrics_port(), "/metrics").await;
    for series in [
        "acp_bridge_sessions_closed_total{reason=\"lru\"} 1",
        "acp_bridge_wait_notices_total{reason=\"live_sessions_busy\"} 1",
        // b's, still busy, and c's; a's was closed to make room.
        "acp_bridge_sessions_live{profile=\"default\"} 2",
    ] {
        assert!(metrics.contains(series), "{series}: {metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_session_gives_up_its_mcp_token_and_the_reopened_one_gets_a_working_one() {
    let scene = quiet_after_a_second("resume", &[]).start().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    ask(&scene, "hello").await;
    log.wait(log.start(), Line::new("session closed (idle)")).await;

    let mark = log.cursor();
    let again = scene.mention("room", "[mcp-post=back again]").await;
    let answer = owner.reply_containing(&bot, &again.id, "done: ").await;
    assert!(
        answer.content.contains("mcp post_message: ok"),
        "the reopened session's token works: {}",
        answer.content
    );
    log.wait(mark, Line::new("session reopened")).await;
    let offered: Vec<String> = scene
        .offered_mcp_tokens()
        .into_iter()
        .map(|(_, token)| token)
        .collect();
    assert_eq!(offered.len(), 2, "{offered:?}");
    assert!(offered[0].starts_with("Bearer "), "{offered:?}");
    assert_ne!(
        offered[0], offered[1],
        "the closed session's token was revoked: the reopened one has a new token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_while_its_quiet_agent_stops_reopens_the_session_only_once_the_agent_is_gone() {
    // A lingering agent ignores the end of its input: stopping it takes the
    // daemon's whole stop grace, and only then is it killed.
    let scene = quiet_after_a_second("load", &["--linger"]).start().await;
    let log = &scene.bridge.log;
    let daemon = scene.bridge.pid();
    ask(&scene, "remember this").await;
    let session = first_session(&scene);
    log.wait(
        log.start(),
        Line::new("session closed (idle)").with("how", "agent stopped"),
    )
    .await;

    let again = ask(&scene, "and now").await;
    assert!(again.contains("> and now"), "{again}");
    assert_eq!(
        scripted_agents_below(daemon).len(),
        1,
        "the stopping agent was gone before its session was loaded on a new one"
    );
    assert_eq!(sessions_of(&scene, "session/load"), vec![session]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_s_session_is_closed_between_its_runs_and_resumed_by_the_next() {
    let file = temp_dir("live-sessions").join("acp-bridge.toml");
    std::fs::write(
        &file,
        "[[schedule]]\nid = \"tick\"\ncron = \"*/2 * * * * *\"\ntarget = \"dm\"\nprompt = \"scheduled check-in\"\n",
    )
    .expect("config file");
    let scene = Scene::builder()
        .agent(&quick_agent("resume"))
        .flags(&[
            "--config",
            file.to_str().expect("a UTF-8 path"),
            "--session-idle",
            "500ms",
        ])
        .start()
        .await;
    let log = &scene.bridge.log;
    let closed = log.wait(log.start(), Line::new("session closed (idle)")).await;
    assert_eq!(closed["how"], "session/close", "{closed}");
    let mark = log.cursor();
    let reopened = log.wait(mark, Line::new("session reopened")).await;
    assert_eq!(reopened["how"], "resumed", "{reopened}");
    assert_eq!(
        reopened["session"], closed["session"],
        "the next run resumed the schedule's session"
    );
    log.wait(mark, Line::new("turn finished")).await;
}
