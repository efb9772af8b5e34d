//! Agents that run elsewhere: the agent command is a wrapper that carries
//! stdio to an agent on another machine (`kubectl run -i`, `ssh`). Here
//! `tests/fixtures/remote-agent.sh` stands in for it: the agent starts
//! after a delay, in a session of its own (out of reach of the daemon's
//! process-group kill and parent-death signal, as a pod is), behind `cat`
//! processes that relay its stdio.

use std::path::{Path, PathBuf};

use crate::support::*;

/// Seconds the stand-in waits before it starts the agent (pod scheduling).
const START_DELAY_SECS: &str = "2";

fn wrapper() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/remote-agent.sh");
    path.to_str().expect("utf-8 path").to_owned()
}

/// A scene whose agent is the scripted one behind the stand-in wrapper,
/// with the file the remote agent writes its pid to.
async fn remote_scene(extra: &[&str]) -> (Scene, PathBuf) {
    let pidfile = temp_dir("remote").join("agent.pid");
    let pidfile_arg = pidfile.to_str().expect("utf-8 path").to_owned();
    // The wrapper's arguments: the delay, the pid file, the agent's command.
    let wrapper_args = shell_words(&[
        START_DELAY_SECS,
        &pidfile_arg,
        bridge_binary(),
        "scripted-agent",
        "--rounds",
        "3",
        "--round-delay-ms",
        "150",
    ]);
    let mut flags = extra.to_vec();
    flags.extend(["--agent-args", &wrapper_args]);
    let scene = Scene::builder()
        .agent_command(&wrapper())
        .flags(&flags)
        .start()
        .await;
    (scene, pidfile)
}

/// The remote agent's pid as this test sees it, once it has started: the
/// stand-in writes the pid file as it starts it (with its pid inside the
/// agent's PID namespace, of no use out here), and the agent is the one
/// scripted agent below the daemon that leads its session.
async fn remote_pid(pidfile: &Path, daemon: u32) -> u32 {
    let probe = async || {
        std::fs::metadata(pidfile).ok()?;
        let agents: Vec<u32> = scripted_agents_below(daemon)
            .into_iter()
            .filter(|pid| session_of(*pid) == Some(*pid))
            .collect();
        match agents[..] {
            [agent] => Some(agent),
            _ => None,
        }
    };
    eventually(PATIENCE, probe, || {
        format!("the agent started by {}", pidfile.display())
    })
    .await
}

/// Whether `pid` runs (and is not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// The session `pid` belongs to (field 6 of `/proc/PID/stat`).
fn session_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split_whitespace().nth(3)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_agent_behind_a_slow_relaying_wrapper_runs_turns_steers_and_cancels() {
    let (mut scene, pidfile) = remote_scene(&[]).await;
    let log = &scene.bridge.log;

    // A turn (the first one waits for the agent's slow start).
    let hello = scene.mention("room", "hello from afar").await;
    let reply = scene.reply_to(&hello).await;
    assert!(reply.content.contains("> hello from afar"), "{}", reply.content);
    let agent = remote_pid(&pidfile, scene.bridge.pid()).await;
    assert_eq!(
        session_of(agent),
        Some(agent),
        "the agent runs out of the daemon's reach"
    );

    // A steer into the live turn.
    let long = scene.mention_mid_turn("room", "a longer one [rounds=15]").await;
    let mark = log.cursor();
    let steer = scene.mention("room", "and one more thing").await;
    log.wait(mark, Line::new("steered into the live turn")).await;
    let answered = scene.reply_to(&steer).await;
    assert!(
        answered.content.contains("and one more thing"),
        "{}",
        answered.content
    );

    // A cancel of the live turn.
    let doomed = scene
        .mention_mid_turn("room", "never mind this [rounds=200]")
        .await;
    let mark = log.cursor();
    scene.mention("room", "!cancel").await;
    let finished = log
        .wait(mark, Line::new("turn finished").in_turn(&doomed.id))
        .await;
    assert_eq!(finished["outcome"], "cancelled_by_owner", "{finished}");
    scene
        .owner
        .reply_containing(&scene.bot, &doomed.id, "Cancelled by the owner")
        .await;

    assert_exactly_once(
        scene
            .tally("remote agent: turn, steer, cancel", &[hello, long, steer])
            .await,
    );
    assert_eq!(
        remote_pid(&pidfile, scene.bridge.pid()).await,
        agent,
        "one agent process served it all"
    );

    // Ending the daemon's side ends the remote agent: its stdin closes.
    scene.bridge.kill_hard();
    let gone = async || (!running(agent)).then_some(());
    eventually(PATIENCE, gone, || format!("the remote agent {agent} to end")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_slower_to_start_than_the_start_timeout_gets_a_notice_not_a_hang() {
    // The wrapper starts the agent after 2 s; the bound is 1 s.
    let (scene, _pidfile) = remote_scene(&["--agent-start-timeout", "1s"]).await;
    let mention = scene.mention("room", "hello from afar").await;
    let notice = scene.reply_to(&mention).await;
    assert!(
        notice.content.contains("`initialize` got no answer within 1s"),
        "{}",
        notice.content
    );
    assert_exactly_once(
        scene
            .tally("agent slower than --agent-start-timeout", &[mention])
            .await,
    );
}
