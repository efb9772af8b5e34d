//! Resident memory of the daemon process (its agents not included): idle,
//! with many conversations holding sessions, and with many queued events.

use std::time::Duration;

use acp_bridge::EmbeddedRelay;
use nostr_sdk::prelude::*;

use crate::harness::{DaemonProcess, Owner, PATIENCE};

/// RSS in KiB: (idle, after `conversations` conversations were answered).
pub async fn sessions(conversations: usize) -> (u64, u64) {
    let relay = EmbeddedRelay::start(None).await.expect("relay");
    let owner_keys = Keys::generate();
    let daemon = DaemonProcess::spawn(
        &relay,
        &owner_keys,
        crate::harness::ZERO_THINK_TIME,
        &["--turns-per-agent", "64"],
    );
    daemon.ready().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = daemon.rss_kib();
    println!("{}", idle_breakdown(daemon.child.id()));
    let bot = daemon.bot.public_key();
    let owner = Owner::connect(&relay, owner_keys, bot).await;
    let mut replies = Vec::with_capacity(conversations);
    for conversation in 0..conversations {
        let (_, _, reply) = owner
            .mention(&bot, &format!("conversation-{conversation}"), "hello")
            .await;
        replies.push(reply);
    }
    for reply in replies {
        tokio::time::timeout(PATIENCE, reply)
            .await
            .expect("replied in time")
            .expect("routed");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let loaded = daemon.rss_kib();
    drop(daemon);
    relay.shutdown();
    (idle, loaded)
}

/// RSS in KiB with `events` mentions waiting behind a turn that never ends.
pub async fn queued(events: usize, conversations: usize) -> u64 {
    let relay = EmbeddedRelay::start(None).await.expect("relay");
    let owner_keys = Keys::generate();
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a port");
    let metrics_addr = format!("127.0.0.1:{metrics_port}");
    let daemon = DaemonProcess::spawn(
        &relay,
        &owner_keys,
        "--hang",
        &[
            "--turns-per-agent",
            "1",
            "--multiple-event-handling",
            "queue",
            "--metrics-addr",
            &metrics_addr,
        ],
    );
    daemon.ready().await;
    let bot = daemon.bot.public_key();
    let owner = Owner::connect(&relay, owner_keys, bot).await;
    // In chunks the daemon catches up with: the embedded relay drops events
    // for a subscriber that falls more than 1024 behind.
    let mut sent = 0;
    while sent < events {
        for event in sent..(sent + RELAY_BACKLOG_SAFE).min(events) {
            let _ = owner
                .mention(
                    &bot,
                    &format!("q{}", event % conversations),
                    &format!("wait your turn ({event})"),
                )
                .await;
        }
        sent = (sent + RELAY_BACKLOG_SAFE).min(events);
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while metric(metrics_port, "acp_bridge_events_received_total").await < sent as f64 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the daemon stopped receiving"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Until the heart holds them all (one batch of the first conversation is in flight).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let floor = events.saturating_sub(acp_bridge::BATCH_CAP) as f64;
    while metric(metrics_port, "acp_bridge_queue_depth").await < floor {
        assert!(tokio::time::Instant::now() < deadline, "the queue never filled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss = daemon.rss_kib();
    drop(daemon);
    relay.shutdown();
    rss
}

/// Events published before waiting for the daemon to catch up.
const RELAY_BACKLOG_SAFE: usize = 500;

async fn metric(port: u16, name: &str) -> f64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return 0.0;
    };
    let _ = stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await;
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body).await;
    let prefix = format!("{name} ");
    body.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Where the idle daemon's resident memory is: anonymous (heap, stacks,
/// caches) against file-backed (the binary's and libraries' pages it
/// touched), and its threads.
fn idle_breakdown(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .map_or_else(String::new, |value| value.trim().to_owned())
    };
    format!(
        "| idle, of which | anonymous {}, file-backed {}, shared memory {}; {} threads |",
        field("RssAnon:"),
        field("RssFile:"),
        field("RssShmem:"),
        field("Threads:")
    )
}
