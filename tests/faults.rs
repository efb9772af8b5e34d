//! Fault injection against the real binary, a real relay and the scripted
//! agent. Each test prints how its mentions ended (accepted / answered /
//! answered twice / lost); lost and answered-twice must be 0.

mod support;

use std::time::Duration;

use nostr_sdk::prelude::*;
use support::*;

async fn mentions(owner: &Person, bot: &PublicKey, count: usize, text: &str) -> Vec<EventId> {
    let mut ids = Vec::new();
    for n in 0..count {
        ids.push(
            owner
                .mention_in_group(bot, &format!("room-{n}"), &format!("{text} {n}"))
                .await
                .id,
        );
    }
    ids
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
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key()).agent(&[
        "--rounds",
        "10",
        "--round-delay-ms",
        "100",
    ]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let ids = mentions(&owner, &bot, 3, "survive").await;
    bridge.wait_for_log("agent run started").await;
    for pid in bridge.wait_for_agents().await {
        kill(pid);
    }
    assert_exactly_once(tally("agent SIGKILL mid-turn", &owner, &bot, &ids).await);
    bridge.wait_for_log("agent exited unexpectedly").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_that_hangs_ends_in_a_notice() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key())
        .agent(&["--hang"])
        .flags(&["--idle-timeout", "500ms", "--cancel-timeout", "500ms"]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let ids = mentions(&owner, &bot, 1, "anyone there?").await;
    let result = tally("agent hangs", &owner, &bot, &ids).await;
    assert_exactly_once(result);
    let notice = owner.events_referencing(&bot, &ids[0]).await.remove(0);
    assert!(notice.content.contains("went silent"), "{}", notice.content);
    assert_eq!(bridge.log_events("turn failed; will retry").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_that_ignores_cancel_is_replaced_and_nothing_is_lost() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key())
        .agent(&[
            "--no-steer",
            "--ignore-cancel",
            "--rounds",
            "30",
            "--round-delay-ms",
            "100",
        ])
        .flags(&["--cancel-timeout", "500ms"]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let first = owner.mention_in_group(&bot, "room", "long one").await;
    bridge.wait_for_log("agent run started").await;
    // Mid-turn: the fallback cancels, the agent ignores it, the bridge kills it.
    let second = owner.mention_in_group(&bot, "room", "and this [rounds=1]").await;
    bridge.wait_for_log("discarding an unresponsive agent").await;
    assert_exactly_once(tally("agent ignores cancel", &owner, &bot, &[first.id, second.id]).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_flooding_stdout_with_garbage_and_a_50_mb_line() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key()).agent(&[
        "--garbage-stdout",
        "--huge-line-bytes",
        "52428800",
        "--rounds",
        "2",
        "--round-delay-ms",
        "10",
    ]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let ids = mentions(&owner, &bot, 2, "noisy").await;
    assert_exactly_once(tally("agent floods stdout", &owner, &bot, &ids).await);
    assert!(bridge.log().contains("skipped an oversized line from the agent"));
    assert!(
        bridge
            .log()
            .contains("skipped a line from the agent that is not JSON")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_binary_missing_opens_the_breaker_and_the_daemon_stays_up() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let spec = BridgeSpec::new(&relay.url(), owner.public_key())
        .agent_command("/nonexistent/agent")
        .flags(&["--metrics-addr", &addr]);
    let bot = spec.bot.public_key();
    let mut bridge = Bridge::start(&spec).ready().await;
    let ids = mentions(&owner, &bot, 2, "is anyone home").await;
    assert_exactly_once(tally("agent binary missing", &owner, &bot, &ids).await);
    let notice = owner.events_referencing(&bot, &ids[0]).await.remove(0);
    assert!(
        notice.content.contains("not found"),
        "says why: {}",
        notice.content
    );
    bridge.wait_for_log("circuit breaker open").await;
    assert!(bridge.child_alive(), "the daemon stays up");
    let health = http_get(port, "/healthz").await;
    assert!(
        health.starts_with("HTTP/1.1 503") && health.contains("circuit breaker"),
        "{health}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_exiting_at_once_is_reported_and_nothing_is_lost() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key()).agent(&["--exit-immediately"]);
    let bot = spec.bot.public_key();
    let mut bridge = Bridge::start(&spec).ready().await;
    let ids = mentions(&owner, &bot, 1, "hello?").await;
    assert_exactly_once(tally("agent exits at once", &owner, &bot, &ids).await);
    let notice = owner.events_referencing(&bot, &ids[0]).await.remove(0);
    assert!(
        notice.content.contains("failed to start up"),
        "{}",
        notice.content
    );
    assert!(bridge.child_alive());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_restarted_mid_turn_and_while_idle() {
    let mut relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key()).agent(&[
        "--rounds",
        "10",
        "--round-delay-ms",
        "150",
    ]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let mid_turn = owner.mention_in_group(&bot, "room", "keep going").await;
    bridge.wait_for_log("agent run started").await;
    relay.restart().await;
    owner.client.wait_for_connection(Duration::from_secs(10)).await;
    assert_exactly_once(tally("relay restarted mid-turn", &owner, &bot, &[mid_turn.id]).await);

    relay.restart().await;
    bridge.wait_for_log("reconnecting to relay").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    owner.client.wait_for_connection(Duration::from_secs(10)).await;
    let idle = owner
        .mention_in_group(&bot, "room", "after the idle restart")
        .await;
    assert_exactly_once(tally("relay restarted while idle", &owner, &bot, &[idle.id]).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_unreachable_at_start_up_is_waited_for() {
    let port = free_port();
    let url = format!("ws://127.0.0.1:{port}");
    let owner_keys = Keys::generate();
    let spec = BridgeSpec::new(&url, owner_keys.public_key());
    let bot = spec.bot.public_key();
    let mut bridge = Bridge::start(&spec);
    bridge.wait_for_log("relay unreachable").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(bridge.child_alive(), "the daemon waits instead of exiting");
    let relay = TestRelay::start_on(port).await;
    let bridge = bridge.ready().await;
    let owner = Person::join_as(owner_keys, &relay.url()).await;
    let ids = mentions(&owner, &bot, 2, "finally").await;
    assert_exactly_once(tally("relay unreachable at start-up", &owner, &bot, &ids).await);
    drop(bridge);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_dropping_the_connection_every_few_seconds() {
    let relay = TestRelay::start().await;
    let mut proxy = Proxy::start(relay.port).await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&proxy.url(), owner.public_key()).agent(&[
        "--rounds",
        "3",
        "--round-delay-ms",
        "100",
    ]);
    let bot = spec.bot.public_key();
    let _bridge = Bridge::start(&spec).ready().await;
    let mut ids = Vec::new();
    for n in 0..6 {
        ids.push(
            owner
                .mention_in_group(&bot, &format!("room-{n}"), &format!("flaky {n}"))
                .await
                .id,
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        if n % 2 == 1 {
            proxy.cut();
            tokio::time::sleep(Duration::from_millis(300)).await;
            proxy.restore().await;
        }
    }
    assert_exactly_once(tally("relay drops the connection every few seconds", &owner, &bot, &ids).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_killed_with_sigkill_mid_turn_and_restarted() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key()).agent(&[
        "--rounds",
        "20",
        "--round-delay-ms",
        "100",
    ]);
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;
    let quick = owner
        .mention_in_group(&bot, "room-quick", "quick [rounds=1]")
        .await;
    owner.replies_from(&bot, &quick.id, 1).await;
    let ids = mentions(&owner, &bot, 4, "in flight").await;
    bridge.wait_for_log("agent run started").await;
    let agents = bridge.agent_pids();
    bridge.kill_hard();
    for pid in agents {
        kill(pid); // the daemon's process group dies with it under systemd
    }
    let restarted = Bridge::start(&spec.clone().agent(&["--rounds", "1", "--round-delay-ms", "10"]))
        .ready()
        .await;
    let mut all = ids.clone();
    all.push(quick.id);
    assert_exactly_once(tally("daemon SIGKILL mid-turn, restarted", &owner, &bot, &all).await);
    drop(restarted);
}
