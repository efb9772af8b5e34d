//! The metrics endpoint: every counter on it from the start (at 0, so an
//! alert sees 0 and not "no data"); and under a stranger's connections: a
//! cap on how many are served, idle ones closed by the server, the
//! daemon's descriptors bounded, and a failed accept (out of descriptors)
//! that waits instead of spinning. Through the real binary, with real
//! sockets.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::support::*;

/// The endpoint's bounds, as the daemon's `metrics_endpoint` sets them.
const MAX_CONNECTIONS: usize = 32;
const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle sockets a stranger opens: as many as exhausted a daemon's
/// descriptors under systemd's default limit of 1,024.
const IDLE_SOCKETS: usize = 1000;
/// Descriptors the daemon may open for other work while the test runs.
const OTHER_DESCRIPTORS: usize = 16;

/// The daemon's open file descriptors.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|entries| entries.count())
        .unwrap_or(0)
}

/// Reads until the server closes the socket (EOF or reset); returns when,
/// or `None` after `patience`.
async fn closed_by_server(mut stream: TcpStream, patience: Duration) -> Option<Instant> {
    let mut buffer = [0u8; 4096];
    let deadline = Instant::now() + patience;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(Instant::now()),
            Ok(Ok(_)) => {}
        }
    }
}

/// Where the daemon names its metrics: the counters are read from it, so
/// a new one is covered without listing it here.
const METRICS_SOURCE: &str = include_str!("../../crates/acp-bridge/src/telemetry/metrics.rs");

/// The counters `metrics.rs` declares (`const NAME: &str = "…_total";`).
fn declared_counters() -> BTreeSet<&'static str> {
    METRICS_SOURCE
        .lines()
        .filter(|line| line.starts_with("const ") && line.contains(": &str = \"acp_bridge_"))
        .filter_map(|line| line.split('"').nth(1))
        .filter(|name| name.ends_with("_total"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_counter_is_on_metrics_at_zero_right_after_ready() {
    let scene = Scene::builder().metrics().start().await;
    let body = http_get(scene.metrics_port(), "/metrics").await;
    let counters = declared_counters();
    assert!(
        counters.len() >= 19,
        "the parser above is out of date: {counters:?}"
    );
    let missing: Vec<&&str> = counters
        .iter()
        .filter(|name| {
            !body.lines().any(|line| {
                line.strip_prefix(**name)
                    .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "counters absent from /metrics: {missing:?}\n{body}"
    );
    // Labelled ones carry every label value known up front, at 0.
    for series in [
        "acp_bridge_turns_total{outcome=\"failed\"} 0",
        "acp_bridge_turns_total{outcome=\"cancelled_by_owner\"} 0",
        "acp_bridge_events_dropped_total{reason=\"rate_limited\"} 0",
        "acp_bridge_replies_failed_total{reason=\"blocked\"} 0",
        "acp_bridge_agent_respawns_total{profile=\"default\"} 0",
        "acp_bridge_steers_total{path=\"fallback\"} 0",
        "acp_bridge_group_requests_total{request=\"join\",outcome=\"refused\"} 0",
        "acp_bridge_queue_depth 0",
        "acp_bridge_parked_events 0",
    ] {
        assert!(
            body.lines().any(|line| line == series),
            "{series} absent:\n{body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_past_the_cap_are_shed_and_the_endpoint_still_answers() {
    room_for_the_strangers_sockets();
    let scene = Scene::builder().metrics().start().await;
    let (pid, port) = (scene.bridge.pid(), scene.metrics_port());
    let fds_before = open_fds(pid);

    // A scraper's kept-alive connection: one request, then silence.
    let mut kept_alive = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    kept_alive
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("write");
    let mut head = [0u8; 12];
    kept_alive.read_exact(&mut head).await.expect("an answer");
    assert!(head.starts_with(b"HTTP/1.1 "), "{head:?}");
    let answered_at = Instant::now();
    let kept_alive = tokio::spawn(closed_by_server(kept_alive, PATIENCE));

    // A stranger's idle sockets, all at once.
    let opened_at = Instant::now();
    let mut idle = JoinSet::new();
    for _ in 0..IDLE_SOCKETS {
        let stream = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        idle.spawn(closed_by_server(stream, PATIENCE));
    }
    // The daemon's own work goes on meanwhile.
    let mention = scene.mention("room", "still there?").await;
    let mut closed = Vec::with_capacity(IDLE_SOCKETS);
    let mut fds_max = open_fds(pid);
    let mut sample = tokio::time::interval(Duration::from_millis(20));
    while !idle.is_empty() {
        tokio::select! {
            joined = idle.join_next() => {
                let at = joined.expect("a socket").expect("join");
                closed.push(at.expect("every idle socket is closed by the server in time"));
            }
            _ = sample.tick() => fds_max = fds_max.max(open_fds(pid)),
        }
    }
    let kept_alive_closed = kept_alive
        .await
        .expect("join")
        .expect("the idle kept-alive connection is closed by the server");

    closed.sort();
    let shed_at_once = closed
        .iter()
        .filter(|at| at.duration_since(opened_at) < REQUEST_HEAD_TIMEOUT)
        .count();
    let last_closed = closed.last().expect("sockets").duration_since(opened_at);
    let health = http_get(port, "/healthz").await;
    let refused = metric(port, "acp_bridge_metrics_connections_refused_total").await;
    println!(
        "{IDLE_SOCKETS} idle sockets: {shed_at_once} closed before the head timeout, the last after {last_closed:?}; \
         refused (counted) {refused}; daemon fds {fds_before} before, at most {fds_max} during; \
         kept-alive connection closed {:?} after its answer; /healthz afterwards: {}",
        kept_alive_closed.duration_since(answered_at),
        health.lines().next().unwrap_or_default()
    );
    assert!(
        fds_max <= fds_before + MAX_CONNECTIONS + OTHER_DESCRIPTORS,
        "the daemon's descriptors stay bounded: {fds_before} → {fds_max}"
    );
    assert!(
        refused >= (IDLE_SOCKETS - MAX_CONNECTIONS) as f64,
        "every connection over the cap is counted: {refused}"
    );
    assert!(
        kept_alive_closed.duration_since(answered_at) >= REQUEST_HEAD_TIMEOUT / 2,
        "a kept-alive connection is not cut right after its answer"
    );
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    scene.reply_to(&mention).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_the_accept_loop_waits_instead_of_spinning() {
    let mut scene = Scene::builder().metrics().log_filter("info").start().await;
    let (pid, port) = (scene.bridge.pid(), scene.metrics_port());
    let log = &scene.bridge.log;
    let mark = log.cursor();
    // Leave the daemon a few descriptors only, fewer than the cap.
    let limit = open_fds(pid) + 4;
    let usual = set_fd_limit(pid, limit);

    let mut held = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        held.push(TcpStream::connect(("127.0.0.1", port)).await.expect("connect"));
    }
    let first_failure = log
        .wait(
            mark,
            Line::new("metrics endpoint: accept failed, waiting before the next"),
        )
        .await;
    let (failing_since, failing_at) = (log.cursor(), Instant::now());
    let cpu_before = cpu_ticks(pid);
    // The accepted ones are shed after the head timeout: a slot and a
    // descriptor free up, and a connection left waiting is accepted.
    let first_shed = {
        let mut waiting = JoinSet::new();
        for stream in held {
            waiting.spawn(closed_by_server(stream, PATIENCE));
        }
        waiting
            .join_next()
            .await
            .expect("a socket")
            .expect("join")
            .expect("an accepted idle socket is shed")
            .duration_since(failing_at)
    };
    let cpu_during = cpu_ticks(pid) - cpu_before;
    let failures = log
        .matching(
            failing_since,
            Line::new("metrics endpoint: accept failed, waiting before the next"),
        )
        .len()
        + 1;
    set_fd_limit(pid, usual);
    let health = http_get(port, "/healthz").await;
    println!(
        "descriptor limit {limit}: first failed accept {}; {failures} failed accepts logged until the first shed {first_shed:?} later, \
         daemon CPU {cpu_during} ticks meanwhile; /healthz after the limit was raised: {}",
        first_failure["error"],
        health.lines().next().unwrap_or_default()
    );
    // Backing off from 10 ms doubling to 1 s: some 17 tries in 10 s. A
    // loop that tries again at once makes millions.
    assert!(failures <= 40, "{failures} failed accepts in a row");
    assert!(health.starts_with("HTTP/1.1 "), "{health}");
    assert!(scene.bridge.alive());
}

/// Runs `prlimit` on process `pid` with `args`; returns what it printed.
fn prlimit(pid: u32, args: &[&str]) -> String {
    let output = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string()])
        .args(args)
        .output()
        .expect("prlimit (util-linux)");
    assert!(output.status.success(), "prlimit failed: {output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A process's descriptor limit, `SOFT` or `HARD`.
fn fd_limit(pid: u32, which: &str) -> usize {
    let limit = prlimit(pid, &["--nofile", &format!("--output={which}"), "--noheadings"]);
    limit.parse().unwrap_or(usize::MAX)
}

/// Sets a process's (soft) descriptor limit; returns the one it had.
fn set_fd_limit(pid: u32, limit: usize) -> usize {
    let before = fd_limit(pid, "SOFT");
    prlimit(pid, &[&format!("--nofile={limit}:")]);
    before
}

/// This test process holds the stranger's sockets (and, through the
/// daemon it spawns after, so may the daemon): a soft limit of 1,024, the
/// usual default, would not hold them all. Raised as far as the hard limit
/// allows.
fn room_for_the_strangers_sockets() {
    let me = std::process::id();
    let wanted = IDLE_SOCKETS * 2 + 1024;
    if fd_limit(me, "SOFT") < wanted {
        set_fd_limit(me, wanted.min(fd_limit(me, "HARD")));
    }
}

/// The daemon's CPU time so far (user + system), in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is the
    // first, utime the 12th, stime the 13th.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let tick = |index: usize| {
        fields
            .get(index)
            .and_then(|field| field.parse::<u64>().ok())
            .unwrap_or(0)
    };
    tick(11) + tick(12)
}

/// Every event the intake's subscriptions deliver counts once as received,
/// and once as accepted or dropped, wherever it is dropped: the bot's own
/// answer coming back on the thread it follows is dropped off the wire by
/// the relay tap, before the intake sees it, and counted there.
#[tokio::test]
async fn every_event_received_counts_once_as_accepted_or_dropped() {
    let scene = Scene::builder().metrics().start().await;
    let (log, port) = (&scene.bridge.log, scene.metrics_port());
    let mention = scene.mention("room", "count me").await;
    let answer = scene.reply_to(&mention).await;
    log.wait(log.start(), Line::dropped(&answer.id, "own_event"))
        .await;
    let body = http_get(port, "/metrics").await;
    let sum = |prefix: &str| -> f64 {
        body.lines()
            .filter(|line| line.starts_with(prefix))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let received = sum("acp_bridge_events_received_total ");
    let accepted = sum("acp_bridge_events_accepted_total ");
    let dropped = sum("acp_bridge_events_dropped_total{");
    assert!(
        sum("acp_bridge_events_dropped_total{reason=\"own_event\"}") >= 1.0,
        "{body}"
    );
    assert_eq!(accepted, 1.0, "the mention");
    assert_eq!(received, accepted + dropped, "each event counted once: {body}");
}
