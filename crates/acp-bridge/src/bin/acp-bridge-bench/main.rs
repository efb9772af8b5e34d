//! `acp-bridge-bench`: the end-to-end and memory measurements, printed as
//! one table (the in-process parts are criterion benches: `cargo bench`).
//!
//! ```sh
//! cargo run --release -p acp-bridge --bin acp-bridge-bench
//! ```
//!
//! Everything runs on loopback with the built-in scripted agent; nothing is
//! asserted (targets are for the report, the machines are shared and noisy).

mod e2e;
mod harness;
mod memory;
mod steer;

use std::time::Duration;

use harness::{ms, percentiles};

/// Mid-turn mentions per steer measurement.
const STEER_SAMPLES: usize = 200;
const FALLBACK_SAMPLES: usize = 20;
/// Sequential turns per conversation, by concurrency.
const E2E_RUNS: [(usize, usize); 3] = [(1, 200), (10, 40), (100, 8)];
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
    let arrivals = steer::Arrivals::install();
    println!(
        "acp-bridge-bench on {} CPU(s)\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    println!("## Steer latency (mention arrives at the bridge → the agent reads it)");
    let mut native = steer::measure(
        &arrivals,
        steer::SteerPath::Native,
        STEER_SAMPLES,
        Duration::from_millis(25),
    )
    .await;
    println!(
        "| native steer (`_goose/unstable/session/steer`) | {} |",
        steer::summary(&mut native)
    );
    let mut fallback = steer::measure(
        &arrivals,
        steer::SteerPath::Fallback,
        FALLBACK_SAMPLES,
        Duration::from_millis(700),
    )
    .await;
    println!(
        "| cancel + merge (re-prompt written) | {} |",
        steer::summary(&mut fallback)
    );

    println!("\n## Mention → reply (zero think time), through the bridge vs a bare ACP client");
    println!("| conversations | bridge p50 | bridge p99 | bare p50 | bare p99 | added p50 | added p99 |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (conversations, turns) in E2E_RUNS {
        let mut bridge = e2e::through_bridge(conversations, turns).await;
        let mut bare = e2e::bare_client(conversations, turns).await;
        let (bridge_p50, bridge_p99) = percentiles(&mut bridge);
        let (bare_p50, bare_p99) = percentiles(&mut bare);
        println!(
            "| {conversations} | {} | {} | {} | {} | {} | {} |",
            ms(bridge_p50),
            ms(bridge_p99),
            ms(bare_p50),
            ms(bare_p99),
            ms(bridge_p50.saturating_sub(bare_p50)),
            ms(bridge_p99.saturating_sub(bare_p99)),
        );
    }

    println!("\n## Resident memory of the daemon (agents excluded)");
    let (idle, loaded) = memory::sessions(SESSION_CONVERSATIONS).await;
    let queued = memory::queued(QUEUED_EVENTS, QUEUED_CONVERSATIONS).await;
    let per_conversation = (loaded.saturating_sub(idle) as f64) * 1024.0 / SESSION_CONVERSATIONS as f64;
    println!("| idle | {:.1} MB |", idle as f64 / 1024.0);
    println!(
        "| {SESSION_CONVERSATIONS} conversations holding sessions | {:.1} MB |",
        loaded as f64 / 1024.0
    );
    println!(
        "| {QUEUED_EVENTS} queued events | {:.1} MB |",
        queued as f64 / 1024.0
    );
    println!(
        "| growth per conversation | {:.1} KB |",
        per_conversation / 1000.0
    );
}
