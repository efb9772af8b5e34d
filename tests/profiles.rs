//! Agent profiles (`[agents.NAME]` in the config file): each conversation
//! runs on its profile's own agents, picked by the routing rules and kept.

mod support;

use support::*;

/// The config file of two profiles of the scripted agent that answer
/// apart: `plain` (the default, the scene's agent flags) and `controlled`
/// (which ends every answer with its `model: …, mode: …`), routed to
/// conversations in group `routed`.
fn two_profiles(routed_channel: &str) -> String {
    let binary = bridge_binary();
    let text = format!(
        "[agents.plain]\ncommand = \"{binary}\"\ndefault = true\n\n\
         [agents.controlled]\ncommand = \"{binary}\"\n\
         args = [\"scripted-agent\", \"--rounds\", \"1\", \"--round-delay-ms\", \"10\", \"--controls\", \"config\"]\n\
         channels = [\"{routed_channel}\"]\n"
    );
    let file = temp_dir("profiles").join("acp-bridge.toml");
    std::fs::write(&file, text).expect("config file");
    file.to_str().expect("utf-8 path").to_owned()
}

/// A channel rule sends one group's conversation to its profile's agent,
/// and every other conversation to the default's: each answered by its
/// own agent process, and the turn's log names the profile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_rule_routes_a_conversation_to_its_profile() {
    let mut stage = Scene::builder()
        .agent(&["--rounds", "1", "--round-delay-ms", "10"])
        .stage()
        .await;
    let relay = stage.spec.relay_url.trim_end_matches('/').to_owned();
    let config = two_profiles(&format!("{relay}'routed"));
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

    let log = &scene.bridge.log;
    for profile in ["controlled", "plain"] {
        log.wait(
            log.start(),
            Line::new("session opened").in_span("profile", profile),
        )
        .await;
    }
}
