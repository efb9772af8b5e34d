//! The agent pool end to end: an agent slow to start holds up its own
//! conversation only, not another conversation's turn on another agent, nor
//! the owner's commands.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use support::*;

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
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let script = slow_first_agent(&temp_dir("slow-agent"));
    let spec = BridgeSpec::new(&relay.url(), owner.public_key())
        .agent_command(script.to_str().expect("UTF-8 path"))
        .flags(&["--agents", "2"]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;

    let slow = owner.mention_in_group(&bot, "room-a", "you start slowly").await;
    // The slow agent serves (and the pool waits for its `initialize`).
    bridge
        .wait_for_log(&format!("--init-delay-ms {SLOW_INIT_MS}"))
        .await;
    let other = owner.mention_in_group(&bot, "room-b", "you do not").await;
    let status = owner.mention_in_group(&bot, "room-c", "!status").await;

    let answer = owner.replies_from(&bot, &other.id, 1).await.remove(0);
    assert!(answer.content.contains("> you do not"), "{}", answer.content);
    let status_reply = owner.replies_from(&bot, &status.id, 1).await.remove(0);
    assert!(
        status_reply.content.starts_with("Turns in flight:"),
        "{}",
        status_reply.content
    );
    assert_eq!(
        bridge.log_events("agent initialized").len(),
        1,
        "answered while the slow agent was still starting"
    );

    let answer = owner.replies_from(&bot, &slow.id, 1).await.remove(0);
    assert!(
        answer.content.contains("> you start slowly"),
        "{}",
        answer.content
    );
    assert_eq!(bridge.log_events("agent initialized").len(), 2);
}
