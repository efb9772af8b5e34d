//! Fault injection against the real binary, a real relay and the scripted
//! agent. Each test prints how its mentions ended (accepted / answered /
//! answered twice / lost); lost and answered-twice must be 0.

use nostr_sdk::prelude::Event;

use crate::support::*;

/// `count` mentions by the owner, each in a room of its own.
async fn mentions(scene: &Scene, count: usize, text: &str) -> Vec<Event> {
    let mut mentions = Vec::new();
    for n in 0..count {
        mentions.push(scene.mention(&format!("room-{n}"), &format!("{text} {n}")).await);
    }
    mentions
}

fn kill(pid: u32) {
    std::process::Command::new("kill")
        .arg("-KILL")
        .arg(pid.to_string())
        .status()
        .expect("kill");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_killed_with_sigkill_mid_turn() {
    let scene = Scene::builder()
        .agent(&["--rounds", "10", "--round-delay-ms", "100"])
        .start()
        .await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    let sent = mentions(&scene, 3, "survive").await;
    // Mid-turn for all three: each has its run.
    log.wait_nth(mark, 3, Line::new("agent run started")).await;
    for pid in scene.bridge.wait_for_agents().await {
        kill(pid);
    }
    assert_exactly_once(scene.tally("agent SIGKILL mid-turn", &sent).await);
    log.wait(mark, Line::new("agent exited unexpectedly")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_that_hangs_ends_in_a_notice() {
    let scene = Scene::builder()
        .agent(&["--hang"])
        .flags(&["--idle-timeout", "500ms", "--cancel-timeout", "500ms"])
        .start()
        .await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    let sent = mentions(&scene, 1, "anyone there?").await;
    // Counted before the tally's settling mention hangs and retries too.
    log.wait(mark, Line::new("turn failed; giving up")).await;
    assert_eq!(log.matching(mark, Line::new("turn failed; will retry")).len(), 2);
    let result = scene.tally("agent hangs", &sent).await;
    assert_exactly_once(result);
    let notice = scene.reply_to(&sent[0]).await;
    assert!(notice.content.contains("went silent"), "{}", notice.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_that_ignores_cancel_is_replaced_and_nothing_is_lost() {
    let scene = Scene::builder()
        .agent(&[
            "--no-steer",
            "--ignore-cancel",
            "--rounds",
            "30",
            "--round-delay-ms",
            "100",
        ])
        .flags(&["--cancel-timeout", "500ms"])
        .start()
        .await;
    let log = &scene.bridge.log;
    let first = scene.mention_mid_turn("room", "long one").await;
    // Mid-turn: the fallback cancels, the agent ignores it, the bridge kills it.
    let mark = log.cursor();
    let second = scene.mention("room", "and this [rounds=1]").await;
    log.wait(mark, Line::new("discarding an unresponsive agent"))
        .await;
    assert_exactly_once(scene.tally("agent ignores cancel", &[first, second]).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_flooding_stdout_with_garbage_and_a_50_mb_line() {
    let scene = Scene::builder()
        .agent(&[
            "--garbage-stdout",
            "--huge-line-bytes",
            "52428800",
            "--rounds",
            "2",
            "--round-delay-ms",
            "10",
        ])
        .start()
        .await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    let sent = mentions(&scene, 2, "noisy").await;
    assert_exactly_once(scene.tally("agent floods stdout", &sent).await);
    log.wait(mark, Line::new("skipped an oversized line from the agent"))
        .await;
    log.wait(mark, Line::new("skipped a line from the agent that is not JSON"))
        .await;
}

/// An agent program that is gone after start-up (uninstalled, its volume
/// unmounted; one missing at start-up stops the start, see tests/e2e/cli.rs):
/// the daemon stays up and says the agent cannot start, with why, to the
/// person, in /healthz and in `!status`, apart from agents that crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_program_gone_after_start_is_reported_as_cannot_start() {
    use std::os::unix::fs::PermissionsExt;
    let script = temp_dir("vanishing-agent").join("agent.sh");
    let text = format!("#!/bin/sh\nexec '{}' \"$@\"\n", bridge_binary());
    std::fs::write(&script, text).expect("agent script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut scene = Scene::builder()
        .agent_command(script.to_str().expect("UTF-8 path"))
        .metrics()
        .start()
        .await;
    std::fs::remove_file(&script).expect("remove the agent");
    let reason = format!(
        "agent cannot start: `{}` does not exist: install the agent, or point --agent-command at it",
        script.display()
    );

    let mark = scene.bridge.log.cursor();
    let sent = mentions(&scene, 2, "is anyone home").await;
    assert_exactly_once(scene.tally("agent program gone", &sent).await);
    for mention in &sent {
        let notice = scene.reply_to(mention).await;
        assert!(notice.content.contains(&reason), "says why: {}", notice.content);
    }
    let cannot_start = Line::new("agent cannot start: no new attempt during the cool-down");
    scene.bridge.log.wait(mark, cannot_start).await;
    assert!(scene.bridge.alive(), "the daemon stays up");

    let health = http_get(scene.metrics_port(), "/healthz").await;
    assert!(
        health.starts_with("HTTP/1.1 503") && health.contains(&reason),
        "{health}"
    );
    assert!(!health.contains("crashing"), "{health}");
    let status = scene.mention("room", "!status").await;
    let public = scene.reply_to(&status).await;
    assert!(
        public
            .content
            .contains("Agents alive: 0 (the agent cannot start)"),
        "{}",
        public.content
    );
    scene.owner.dm(&scene.bot, "!status").await;
    let private = scene
        .owner
        .dm_containing(&scene.bot, "Agent cannot start: `")
        .await;
    assert!(
        private.content.contains(&script.display().to_string()),
        "{}",
        private.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_exiting_at_once_is_reported_and_nothing_is_lost() {
    let mut scene = Scene::builder().agent(&["--exit-immediately"]).start().await;
    let sent = mentions(&scene, 1, "hello?").await;
    assert_exactly_once(scene.tally("agent exits at once", &sent).await);
    let notice = scene.reply_to(&sent[0]).await;
    assert!(
        notice.content.contains("failed to start up"),
        "{}",
        notice.content
    );
    assert!(scene.bridge.alive());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_restarted_mid_turn_and_while_idle() {
    let mut scene = Scene::builder()
        .agent(&["--rounds", "10", "--round-delay-ms", "150"])
        .start()
        .await;
    let mid_turn = scene.mention_mid_turn("room", "keep going").await;
    scene.relay.restart().await;
    scene.reconnect_owner().await;
    assert_exactly_once(scene.tally("relay restarted mid-turn", &[mid_turn]).await);

    let mark = scene.bridge.log.cursor();
    scene.relay.restart().await;
    // Back on the relay: it noticed the restart and subscribed again.
    let log = &scene.bridge.log;
    log.wait(mark, Line::new("reconnecting to relay")).await;
    log.wait(mark, Line::new("subscribed to mentions")).await;
    scene.reconnect_owner().await;
    let idle = scene.mention("room", "after the idle restart").await;
    assert_exactly_once(scene.tally("relay restarted while idle", &[idle]).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_unreachable_at_start_up_is_waited_for() {
    let mut stage = Scene::builder().stage().await;
    stage.relay.stop();
    let mut scene = stage.launch();
    // It tried, failed, waited and tried again: still running.
    let log = &scene.bridge.log;
    log.wait_nth(log.start(), 2, Line::new("relay unreachable")).await;
    assert!(scene.bridge.alive(), "the daemon waits instead of exiting");
    scene.relay.restart().await;
    scene.bridge.ready().await;
    scene.reconnect_owner().await;
    let sent = mentions(&scene, 2, "finally").await;
    assert_exactly_once(scene.tally("relay unreachable at start-up", &sent).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_dropping_the_connection_every_few_seconds() {
    let mut scene = Scene::builder()
        .agent(&["--rounds", "3", "--round-delay-ms", "100"])
        .through_proxy()
        .start()
        .await;
    let mut sent = Vec::new();
    for n in 0..6 {
        let mark = scene.bridge.log.cursor();
        let mention = scene.mention(&format!("room-{n}"), &format!("flaky {n}")).await;
        // The daemon has it (and is working on it) when the line drops.
        scene.bridge.log.wait(mark, Line::accepted(&mention.id)).await;
        sent.push(mention);
        if n % 2 == 1 {
            scene.cut_proxy().await;
            scene.proxy().restore().await;
        }
    }
    assert_exactly_once(
        scene
            .tally("relay drops the connection every few seconds", &sent)
            .await,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_killed_with_sigkill_mid_turn_and_restarted() {
    let mut scene = Scene::builder()
        .agent(&["--rounds", "20", "--round-delay-ms", "100"])
        .start()
        .await;
    let quick = scene.mention("room-quick", "quick [rounds=1]").await;
    scene.reply_to(&quick).await;
    let mark = scene.bridge.log.cursor();
    let mut sent = mentions(&scene, 4, "in flight").await;
    // All four turns are running.
    scene
        .bridge
        .log
        .wait_nth(mark, 4, Line::new("agent run started"))
        .await;
    let agents = scene.bridge.agent_pids();
    scene.bridge.kill_hard();
    for pid in agents {
        kill(pid); // the daemon's process group dies with it under systemd
    }
    let restarted = scene.spec().agent(&["--rounds", "1", "--round-delay-ms", "10"]);
    scene.restart(restarted).await;
    sent.push(quick);
    assert_exactly_once(scene.tally("daemon SIGKILL mid-turn, restarted", &sent).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_link_that_falls_behind_fetches_again_and_loses_nothing() {
    let scene = Scene::builder()
        .flags(&["--relay-buffer", "8"])
        .agent(&["--rounds", "1", "--round-delay-ms", "5"])
        .start()
        .await;
    let log = &scene.bridge.log;
    // The intake stalls on a locked journal, so the link's buffers fill
    // and the relay tap drops what does not fit: the link is behind.
    let journal_lock = scene.bridge.lock_journal();
    let mark = log.cursor();
    let events: Vec<Event> = (0..60)
        .map(|n| {
            group_message(&scene.bot, &format!("room-{}", n % 6), &format!("flood {n}"), &[])
                .sign_with_keys(&scene.owner.keys)
                .expect("sign")
        })
        .collect();
    let sends = events.iter().map(|event| scene.owner.client.send_event(event));
    for result in futures_util::future::join_all(sends).await {
        result.expect("publish");
    }
    log.wait(
        mark,
        Line::new("fell behind the relay's events; re-subscribing from the watermark"),
    )
    .await;
    journal_lock.release();

    let result = scene
        .tally("relay link behind (60 mentions, journal stalled)", &events)
        .await;
    assert_exactly_once(result);
}
