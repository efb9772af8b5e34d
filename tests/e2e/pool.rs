//! The agent pool end to end: an agent slow to start holds up its own
//! conversation only, not another conversation's turn on another agent, nor
//! the owner's commands.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::*;

/// How long the first agent takes to answer `initialize`, in milliseconds:
/// far longer than the other conversation's whole turn.
const SLOW_INIT_MS: u32 = 10_000;

/// An `--agent-command` whose first agent is slow to start: `mkdir` of a
/// marker succeeds for exactly one of the agents it starts.
fn slow_first_agent(dir: &Path) -> PathBuf {
    let script = dir.join("agent.sh");
    let marker = dir.join("first-agent-started");
    let bridge = bridge_binary();
    let text = format!(
        "#!/bin/sh\n\
         if mkdir '{marker}' 2>/dev/null; then\n\
         \x20 exec '{bridge}' \"$@\" --init-delay-ms {SLOW_INIT_MS}\n\
         fi\n\
         exec '{bridge}' \"$@\"\n",
        marker = marker.display(),
    );
    std::fs::write(&script, text).expect("agent script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_slow_to_start_holds_up_only_its_own_conversation() {
    let script = slow_first_agent(&temp_dir("slow-agent"));
    let scene = Scene::builder()
        .agent_command(script.to_str().expect("UTF-8 path"))
        .flags(&["--agents", "2"])
        .start()
        .await;
    let log = &scene.bridge.log;
    let initialized = Line::new("agent initialized");

    let slow = scene.mention("room-a", "you start slowly").await;
    // The first agent process is the slow one, and it is room-a's.
    scene.bridge.wait_for_agents().await;
    let other = scene.mention("room-b", "you do not").await;
    let status = scene.mention("room-c", "!status").await;

    let answer = scene.reply_to(&other).await;
    assert!(answer.content.contains("> you do not"), "{}", answer.content);
    let status_reply = scene.reply_to(&status).await;
    assert!(
        status_reply.content.starts_with("Turns in flight:"),
        "{}",
        status_reply.content
    );
    assert_eq!(
        log.matching(log.start(), initialized.clone()).len(),
        1,
        "answered while the slow agent was still starting"
    );

    let answer = scene.reply_to(&slow).await;
    assert!(
        answer.content.contains("> you start slowly"),
        "{}",
        answer.content
    );
    assert_eq!(log.matching(log.start(), initialized).len(), 2);
}
