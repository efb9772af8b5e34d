//! `acp-bridge-bench`: the end-to-end and memory measurements, printed as
//! one table (the in-process parts are criterion benches: `cargo bench`).
//!
//! ```sh
//! cargo build --release -p acp-bridge --bins && target/release/acp-bridge-bench [steer] [e2e] [memory] [shards] [instructions]
//! ```
//!
//! Everything runs on loopback with the built-in scripted agent; nothing is
//! asserted (targets are for the report, the machines are shared and noisy).

mod e2e;
mod harness;
mod instructions;
mod memory;
mod shards;
mod steer_latency;

use std::time::Duration;

use harness::{ms, percentiles};

/// Mid-turn mentions per steer measurement.
const STEER_SAMPLES: usize = 200;
const FALLBACK_SAMPLES: usize = 20;
/// Sequential turns per conversation, by concurrency.
const E2E_RUNS: [(usize, usize); 4] = [(1, 200), (10, 40), (100, 8), (1_000, 2)];
/// Override the e2e runs: `ACP_BRIDGE_BENCH_E2E=1x5` (conversations x turns).
fn e2e_runs() -> Vec<(usize, usize)> {
    run_override("ACP_BRIDGE_BENCH_E2E").map_or_else(|| E2E_RUNS.to_vec(), |run| vec![run])
}
/// Conversations at once, and sequential mentions in each, per shards run.
const SHARD_RUN: (usize, usize) = (30, 20);
/// Override the shards runs: `ACP_BRIDGE_BENCH_SHARDS=2x5` (conversations x turns).
fn shard_run() -> (usize, usize) {
    run_override("ACP_BRIDGE_BENCH_SHARDS").unwrap_or(SHARD_RUN)
}
/// `CxT` (conversations x turns) from the variable `name`, when set.
fn run_override(name: &str) -> Option<(usize, usize)> {
    let spec = std::env::var(name).ok()?;
    let (conversations, turns) = spec.split_once('x')?;
    Some((conversations.parse().ok()?, turns.parse().ok()?))
}
const SESSION_CONVERSATIONS: usize = 1_000;
const QUEUED_EVENTS: usize = 10_000;
const QUEUED_CONVERSATIONS: usize = 100;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run());
}

async fn run() {
    let arrivals = steer_latency::Arrivals::install();
    let sections: Vec<String> = std::env::args().skip(1).collect();
    let wanted = |section: &str| sections.is_empty() || sections.iter().any(|wanted| wanted == section);
    println!(
        "acp-bridge-bench on {} CPU(s)\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    if wanted("steer") {
        steer_section(&arrivals).await;
    }
    if wanted("e2e") {
        e2e_section().await;
    }
    if wanted("memory") {
        memory_section().await;
    }
    if wanted("shards") {
        shards_section().await;
    }
    // Slow (the daemon runs under valgrind): only when asked for.
    if sections.iter().any(|wanted| wanted == "instructions") {
        instructions_section().await;
    }
}

async fn instructions_section() {
    println!("## Instructions per answered mention (callgrind; one conversation, sequential)");
    match instructions::per_mention().await {
        Ok(counted) => {
            println!("| daemon | {} instructions |", counted.instructions);
            println!(
                "\nTop functions, inclusive, per {} mentions ({}):\n```\n{}\n```",
                instructions::MENTIONS,
                counted.dump.display(),
                counted.profile
            );
        }
        Err(error) => println!("| daemon | not counted: {error} |"),
    }
    let (voluntary, involuntary, cpu) = instructions::wakeups_per_mention().await;
    println!(
        "| daemon, natively | {voluntary:.1} wake-ups (voluntary context switches) + {involuntary:.1} preemptions, {} CPU per mention |\n",
        ms(cpu)
    );
}

async fn steer_section(arrivals: &steer_latency::Arrivals) {
    println!("## Steer latency (mention arrives at the bridge → the agent reads it)");
    let spacing = Duration::from_millis(25);
    let mut native =
        steer_latency::measure(arrivals, steer_latency::SteerPath::Native, STEER_SAMPLES, spacing).await;
    println!(
        "| native steer (`_goose/unstable/session/steer`) | {} |",
        steer_latency::summary(&mut native)
    );
    let mut session = steer_latency::measure(
        arrivals,
        steer_latency::SteerPath::SessionSteering,
        STEER_SAMPLES,
        spacing,
    )
    .await;
    println!(
        "| native steer (`_session/steering`) | {} |",
        steer_latency::summary(&mut session)
    );
    let spacing = Duration::from_millis(700);
    let mut fallback = steer_latency::measure(
        arrivals,
        steer_latency::SteerPath::Fallback,
        FALLBACK_SAMPLES,
        spacing,
    )
    .await;
    println!(
        "| cancel + merge (re-prompt written) | {} |\n",
        steer_latency::summary(&mut fallback)
    );
}

async fn e2e_section() {
    println!("## Mention → reply (zero think time), through the bridge vs a bare ACP client");
    println!(
        "| conversations | bridge p50 | bridge p99 | bare p50 | bare p99 | added p50 | added p99 | daemon CPU per mention |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (conversations, turns) in e2e_runs() {
        let (mut bridge, cpu_per_mention) = e2e::through_bridge(conversations, turns).await;
        let mut bare = e2e::bare_client(conversations, turns).await;
        let (bridge_p50, bridge_p99) = percentiles(&mut bridge);
        let (bare_p50, bare_p99) = percentiles(&mut bare);
        println!(
            "| {conversations} | {} | {} | {} | {} | {} | {} | {} |",
            ms(bridge_p50),
            ms(bridge_p99),
            ms(bare_p50),
            ms(bare_p99),
            ms(bridge_p50.saturating_sub(bare_p50)),
            ms(bridge_p99.saturating_sub(bare_p99)),
            ms(cpu_per_mention),
        );
    }
    println!();
}

async fn memory_section() {
    println!("## Resident memory of the daemon (agents excluded)");
    let (idle, loaded) = memory::sessions(SESSION_CONVERSATIONS).await;
    println!("| idle | {:.1} MB |", idle as f64 / 1024.0);
    println!(
        "| {SESSION_CONVERSATIONS} conversations holding sessions | {:.1} MB |",
        loaded as f64 / 1024.0
    );
    let per_conversation_kb = loaded.saturating_sub(idle) as f64 * 1.024 / SESSION_CONVERSATIONS as f64;
    println!("| growth per conversation | {per_conversation_kb:.1} KB |");
    let queued = memory::queued(QUEUED_EVENTS, QUEUED_CONVERSATIONS).await;
    println!(
        "| {QUEUED_EVENTS} queued events | {:.1} MB |",
        queued as f64 / 1024.0
    );
}

async fn shards_section() {
    let (conversations, turns) = shard_run();
    println!(
        "## One bot as shards: mentions per second ({conversations} conversations at once, {turns} mentions each, zero think time)"
    );
    println!("| daemons | mentions | wall | mentions per second | daemons' CPU per mention |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for shards in [None, Some(1), Some(2), Some(3)] {
        let result = shards::run(shards, conversations, turns).await;
        let label = shards.map_or_else(
            || "1, unsharded".to_owned(),
            |count| format!("{count} × `--shard i/{count}`"),
        );
        println!(
            "| {label} | {} | {:.2} s | {:.1} | {} |",
            result.mentions,
            result.wall.as_secs_f64(),
            result.per_second(),
            ms(result.cpu_per_mention),
        );
    }
    println!();
}
