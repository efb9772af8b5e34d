//! Agent profiles (`[agents.NAME]` in the config file): each conversation
//! runs on its profile's own agents, picked by the routing rules and kept.

use crate::support::*;

/// The config file of two profiles of the scripted agent that answer
/// apart: `plain` (the default, the scene's agent flags) and `controlled`
/// (which ends every answer with its `model: …, mode: …`), with the
/// routing rule `routing` (a TOML line).
fn two_profiles(routing: &str) -> String {
    let binary = bridge_binary();
    let text = format!(
        "[agents.plain]\ncommand = \"{binary}\"\ndefault = true\n\n\
         [agents.controlled]\ncommand = \"{binary}\"\n\
         args = [\"scripted-agent\", \"--rounds\", \"1\", \"--round-delay-ms\", \"10\", \"--controls\", \"config\"]\n\
         {routing}\n"
    );
    let file = temp_dir("profiles").join("acp-bridge.toml");
    std::fs::write(&file, text).expect("config file");
    file.to_str().expect("utf-8 path").to_owned()
}

/// A channel rule sends one group's conversation to its profile's agent,
/// and every other conversation to the default's: each answered by its
/// own agent process, which `!status`, the metrics and the turn's log name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_rule_routes_a_conversation_to_its_profile() {
    let mut stage = Scene::builder()
        .agent(&["--rounds", "1", "--round-delay-ms", "10"])
        .metrics()
        .stage()
        .await;
    let relay = stage.spec.relay_url.trim_end_matches('/').to_owned();
    let config = two_profiles(&format!("channels = [\"{relay}'routed\"]"));
    stage.spec.flags.extend(["--config".to_owned(), config]);
    let scene = stage.start().await;

    let routed = scene.mention("routed", "hello routed").await;
    let answer = scene.reply_to(&routed).await.content;
    assert!(
        answer.contains("model: fast, mode: ask"),
        "the routed profile's agent: {answer}"
    );

    let plain = scene.mention("room", "hello plain").await;
    let answer = scene.reply_to(&plain).await.content;
    assert!(
        !answer.contains("model:"),
        "the default profile's agent: {answer}"
    );

    let status = ask(&scene, "routed", "!status").await;
    assert!(
        status.contains("Agents alive: 2 (controlled 1, plain 1).")
            && status.contains("Its agent profile: controlled."),
        "{status}"
    );
    let metrics = http_get(scene.metrics_port(), "/metrics").await;
    for profile in ["plain", "controlled"] {
        for series in [
            format!("acp_bridge_agents_alive{{profile=\"{profile}\"}} 1"),
            format!("acp_bridge_agent_respawns_total{{profile=\"{profile}\"}} 0"),
        ] {
            assert!(metrics.contains(&series), "{series}: {metrics}");
        }
    }

    let log = &scene.bridge.log;
    let starting = log.wait(log.start(), Line::new("starting acp-bridge")).await;
    let config = starting["config"].as_str().expect("the config field");
    assert!(config.contains("profiles=[controlled,plain]"), "{config}");
    for profile in ["controlled", "plain"] {
        log.wait(
            log.start(),
            Line::new("session opened").in_span("profile", profile),
        )
        .await;
    }
}

/// The owner says `text` in `room` and gets the bot's answer's text (a
/// numbered `@ask-N`, set aside by the command parser, keeps the same
/// text said twice from being the same event).
async fn ask(scene: &Scene, room: &str, text: &str) -> String {
    static ASKED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = ASKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mention = scene.mention(room, &format!("{text} @ask-{n}")).await;
    scene.reply_to(&mention).await.content
}

/// `!agent` lists the profiles; `!agent NAME` switches the conversation
/// mid-conversation: the thread is told, and the next turn is answered by
/// the other profile's agent on a fresh session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_switches_a_conversation_to_another_profile_on_a_fresh_session() {
    let mut stage = Scene::builder()
        .agent(&["--rounds", "1", "--round-delay-ms", "10"])
        .stage()
        .await;
    stage.spec.flags.extend(["--config".to_owned(), two_profiles("")]);
    let scene = stage.start().await;
    let log = &scene.bridge.log;

    let first = ask(&scene, "room", "hello").await;
    assert!(!first.contains("model:"), "the default profile's agent: {first}");
    log.wait(
        log.start(),
        Line::new("session opened").in_span("profile", "plain"),
    )
    .await;

    let listed = ask(&scene, "room", "!agent").await;
    assert!(
        listed.contains("plain (default, this conversation's)") && listed.contains("controlled"),
        "{listed}"
    );
    let unknown = ask(&scene, "room", "!agent nosuch").await;
    assert!(
        unknown.contains("No agent profile is named `nosuch`") && unknown.contains("controlled"),
        "{unknown}"
    );

    let switched = ask(&scene, "room", "!agent controlled").await;
    assert_eq!(
        switched, "This conversation now talks to controlled; it starts a fresh session.",
        "the notice"
    );
    let after_switch = log.cursor();
    let answer = ask(&scene, "room", "hello again").await;
    assert!(
        answer.contains("model: fast, mode: ask"),
        "the other profile's agent: {answer}"
    );
    log.wait(
        after_switch,
        Line::new("session opened").in_span("profile", "controlled"),
    )
    .await;
    let listed = ask(&scene, "room", "!agent").await;
    assert!(listed.contains("controlled (this conversation's)"), "{listed}");
}

/// An author rule picks the profile of a conversation that author starts;
/// a conversation that already ran keeps its profile whoever mentions the
/// bot next, so a second author cannot flip its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_author_rule_picks_a_new_conversations_profile_and_does_not_flip_a_running_one() {
    let friend = nostr_sdk::Keys::generate();
    let friend_hex = friend.public_key().to_hex();
    let mut stage = Scene::builder()
        .agent(&["--rounds", "1", "--round-delay-ms", "10"])
        .flags(&["--respond-to", "allowlist", "--allowlist", &friend_hex])
        .stage()
        .await;
    let config = two_profiles(&format!("authors = [\"{friend_hex}\"]"));
    stage.spec.flags.extend(["--config".to_owned(), config]);
    let scene = stage.start().await;
    let friend = Person::join_as(friend, &scene.relay.url()).await;

    let owners = ask(&scene, "room", "hello").await;
    assert!(
        !owners.contains("model:"),
        "the owner's conversation: the default: {owners}"
    );
    let joined = friend.mention_in_group(&scene.bot, "room", "me too").await;
    let answer = scene.reply_to(&joined).await.content;
    assert!(
        !answer.contains("model:"),
        "the conversation keeps its profile: {answer}"
    );

    let started = friend.mention_in_group(&scene.bot, "friends", "hello").await;
    let answer = scene.reply_to(&started).await.content;
    assert!(
        answer.contains("model: fast, mode: ask"),
        "the friend's own conversation: the routed profile: {answer}"
    );
}

/// `!agent NAME` during a turn applies after it: the turn in flight is
/// answered by the profile it started on, the next by the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_mid_turn_switches_after_the_turn_in_flight() {
    let mut stage = Scene::builder()
        .agent(&["--rounds", "3", "--round-delay-ms", "300"])
        .stage()
        .await;
    stage.spec.flags.extend(["--config".to_owned(), two_profiles("")]);
    let scene = stage.start().await;

    let work = scene.mention_mid_turn("room", "long work [rounds=3]").await;
    let switched = ask(&scene, "room", "!agent controlled").await;
    assert_eq!(
        switched,
        "This conversation now talks to controlled; it starts a fresh session after the turn in flight."
    );
    let answer = scene.reply_to(&work).await.content;
    assert!(
        !answer.contains("model:"),
        "the turn in flight stays on its profile: {answer}"
    );
    let next = ask(&scene, "room", "next [rounds=1]").await;
    assert!(
        next.contains("model: fast, mode: ask"),
        "the next turn: the new profile: {next}"
    );
}

/// `acp-bridge check` starts every profile's agent once and names each.
#[test]
fn check_starts_every_profiles_agent() {
    let secret = nostr_sdk::Keys::generate().secret_key().to_secret_hex();
    let owner = nostr_sdk::Keys::generate().public_key().to_hex();
    let config = two_profiles("");
    let output = check_with_agent_args(
        "embedded",
        &owner,
        Some(&secret),
        "scripted-agent",
        &["--config", &config],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    for profile in ["plain", "controlled"] {
        assert!(
            stdout.contains(&format!("agent: ok profile {profile} `")),
            "{profile}: {stdout}"
        );
    }
    assert_eq!(
        stdout.matches("agent: ok, a session opens").count(),
        2,
        "{stdout}"
    );
}

/// A profile's value is refused as its flag refuses it, through the
/// binary: `agents = 65` in a profile in the words of `--agents 65` (the
/// bounds are the flag's, read off its declaration, not a copy).
#[test]
fn a_profiles_value_is_refused_in_its_flags_words() {
    let owner = nostr_sdk::Keys::generate().public_key().to_hex();
    let refused = |flags: &[&str]| {
        let output = check_with_agent_args("embedded", &owner, None, "scripted-agent", flags);
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        assert_eq!(output.status.code(), Some(2), "{flags:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{flags:?}: one line: {stderr}");
        stderr
    };
    let file = temp_dir("profiles").join("acp-bridge.toml");
    std::fs::write(&file, "[agents.codex]\ncommand = \"codex-acp\"\nagents = 65\n").expect("config file");
    let file = file.to_str().expect("utf-8 path");
    let flag = refused(&["--agents", "65"]);
    let profile = refused(&["--config", file]);
    println!("--agents 65: {flag}\nagents = 65: {profile}");
    let words = flag.strip_prefix("error: ").unwrap_or(&flag);
    assert!(
        profile.contains(file) && profile.ends_with(&format!("`agents.codex.agents`: {words}")),
        "the flag's words, naming the key: {profile} / {flag}"
    );
}
