//! `acp-bridge-bench`: the end-to-end and memory measurements, printed as
//! one table (the in-process parts are criterion benches: `cargo bench`).
//!
//! ```sh
//! cargo build --release -p acp-bridge --bins && target/release/acp-bridge-bench [steer] [e2e] [memory] [shards] [bunker] [instructions] [marmot] [sustained]
//! target/release/acp-bridge-bench sessions [--agent claude|scripted]   # or one part: live-memory, spread, resume
//! ```
//!
//! Everything runs on loopback with the built-in scripted agent, except
//! `sessions`, which by default runs claude-agent-acp against a loopback
//! fake model provider; nothing is asserted (targets are for the report, the
//! machines are shared and noisy).

mod agent_launch;
mod bunker;
mod e2e;
mod harness;
mod instructions;
mod live_sessions;
mod marmot;
mod memory;
mod paths;
mod process_tree;
mod shards;
mod steer_latency;
mod sustained;

use std::time::Duration;

use harness::{daemon_flags, ms, percentiles};
use instructions::Room;
use live_sessions::BenchAgent;
use process_tree::TreeMemory;

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
/// Conversations of a `spread` run, and seconds between two new ones.
const SPREAD_RUN: (usize, usize) = (100, 3);
/// Override the spread run: `ACP_BRIDGE_BENCH_SPREAD=20x2` (conversations x seconds).
fn spread_run() -> (usize, usize) {
    run_override("ACP_BRIDGE_BENCH_SPREAD").unwrap_or(SPREAD_RUN)
}
/// Returning conversations measured by `resume` (p99 of 10 is their maximum).
const RESUME_SAMPLES: usize = 10;
/// Override the samples of `resume`: `ACP_BRIDGE_BENCH_RESUME_SAMPLES=5`.
fn resume_samples() -> usize {
    std::env::var("ACP_BRIDGE_BENCH_RESUME_SAMPLES")
        .ok()
        .and_then(|samples| samples.parse().ok())
        .unwrap_or(RESUME_SAMPLES)
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
    let mut sections: Vec<String> = std::env::args().skip(1).collect();
    let agent = take_agent(&mut sections);
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
    if wanted("bunker") {
        bunker::section().await;
    }
    // Slow (the daemon runs under valgrind): only when asked for.
    if sections.iter().any(|wanted| wanted == "instructions") {
        instructions_section().await;
    }
    if sections.iter().any(|wanted| wanted == "marmot") {
        marmot_section().await;
    }
    // Minutes at a human pace: only when asked for.
    if sections.iter().any(|wanted| wanted == "sustained") {
        sustained_section().await;
    }
    // Slow, and a real agent by default: only when asked for.
    let asked = |part: &str| {
        sections
            .iter()
            .any(|wanted| wanted == part || wanted == "sessions")
    };
    if ["live-memory", "spread", "resume"].iter().any(|part| asked(part)) {
        println!(
            "## What a live conversation costs ({}; daemon flags: `{}`; load average before: {})\n",
            agent.name(),
            daemon_flags(),
            load_average()
        );
    }
    if asked("live-memory") {
        live_memory_section(agent).await;
    }
    if asked("spread") {
        spread_section(agent).await;
    }
    if asked("resume") {
        resume_section(agent).await;
    }
}

/// `--agent claude|scripted` out of the arguments (default: claude).
fn take_agent(arguments: &mut Vec<String>) -> BenchAgent {
    let Some(at) = arguments.iter().position(|argument| argument == "--agent") else {
        return BenchAgent::Claude;
    };
    let name = arguments.get(at + 1).cloned().unwrap_or_default();
    arguments.drain(at..(at + 2).min(arguments.len()));
    match name.as_str() {
        "claude" => BenchAgent::Claude,
        "scripted" => BenchAgent::Scripted,
        other => panic!("--agent {other}: expected claude or scripted"),
    }
}

/// The 1, 5 and 15 minute load averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// `count × command PSS` for every command below the daemon.
fn agents_of(tree: &TreeMemory) -> String {
    tree.by_command
        .iter()
        .map(|(command, (count, memory))| format!("{count} × `{command}` {}", mib(memory.pss_kib)))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn live_memory_section(agent: BenchAgent) {
    println!(
        "### Memory of the daemon's whole process tree by live conversations (each answered once; PSS from /proc/PID/smaps_rollup, RSS summed beside it)"
    );
    println!(
        "| live conversations | processes | PSS, summed | RSS, summed | the daemon (PSS) | below it (PSS) |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | --- |");
    let (stages, stopped) = live_sessions::per_session(agent).await;
    for (conversations, tree) in &stages {
        println!(
            "| {conversations} | {} | {} | {} | {} | {} |",
            tree.processes,
            mib(tree.total.pss_kib),
            mib(tree.total.rss_kib),
            mib(tree.root.pss_kib),
            agents_of(tree)
        );
    }
    if let Some(reason) = stopped {
        println!("\n{reason}");
    }
    let first = stages.iter().find(|(conversations, _)| *conversations == 1);
    let last = stages.iter().rfind(|(conversations, _)| *conversations > 1);
    if let (Some((_, one)), Some((many, at_many))) = (first, last) {
        let added = *many as u64 - 1;
        let per_session_kib = at_many.total.pss_kib.saturating_sub(one.total.pss_kib) / added;
        let per_session_rss_kib = at_many.total.rss_kib.saturating_sub(one.total.rss_kib) / added;
        println!(
            "\nPer added live conversation (1 → {many}): {} PSS ({} RSS summed).",
            mib(per_session_kib),
            mib(per_session_rss_kib)
        );
        // Unbounded, the tree grows by one session per conversation; under
        // --max-live-sessions the slope above is not a session's cost.
        if !daemon_flags().contains("--max-live-sessions") {
            let (conversations, _) = spread_run();
            let unbounded_kib = one.total.pss_kib + per_session_kib * (conversations as u64 - 1);
            println!(
                "{conversations} live conversations without a bound, computed (not run) as the tree at 1 plus {} more: {} PSS.",
                conversations - 1,
                mib(unbounded_kib)
            );
        }
    }
    println!();
}

async fn spread_section(agent: BenchAgent) {
    let (conversations, seconds) = spread_run();
    println!(
        "### {conversations} conversations, a new one every {seconds} s, each answered once (the tree sampled every 0.5 s)"
    );
    let run = live_sessions::spread(agent, conversations, Duration::from_secs(seconds as u64)).await;
    println!(
        "| answered | wall | peak PSS | peak processes | at the peak (PSS) | steady PSS (median of the second half) |"
    );
    println!("| ---: | ---: | ---: | ---: | --- | ---: |");
    if let Some(peak) = run.peak() {
        println!(
            "| {} of {conversations} | {:.0} s | {} | {} | {} | {} |",
            run.answered,
            run.wall.as_secs_f64(),
            mib(peak.total.pss_kib),
            run.samples
                .iter()
                .map(|(_, tree)| tree.processes)
                .max()
                .unwrap_or(0),
            agents_of(peak),
            run.steady_pss_kib().map_or_else(|| "-".to_owned(), mib),
        );
    }
    if let Some(reason) = run.stopped {
        println!("\n{reason}");
    }
    println!();
}

async fn resume_section(agent: BenchAgent) {
    println!("### Mention → reply of a returning conversation: session live vs closed (idle) and resumed");
    let mut run = live_sessions::resume_latency(agent, resume_samples()).await;
    println!("| session | p50 | p99 | samples |");
    println!("| --- | ---: | ---: | ---: |");
    for (label, samples) in [("live", &mut run.live), ("closed, resumed", &mut run.resumed)] {
        if samples.is_empty() {
            println!("| {label} | - | - | 0 |");
            continue;
        }
        let (p50, p99) = percentiles(samples);
        println!("| {label} | {} | {} | {} |", ms(p50), ms(p99), samples.len());
    }
    if !run.resumed.is_empty() {
        println!(
            "\n{} of {} returning turns reopened the earlier session (`session reopened` in the daemon's log).",
            run.reopened,
            run.resumed.len()
        );
    } else if run.stopped.is_none() {
        println!("\nNo `--session-idle` in ACP_BRIDGE_BENCH_FLAGS: no session is closed during the run.");
    }
    if let Some(reason) = run.stopped {
        println!("\n{reason}");
    }
    println!();
}

async fn instructions_section() {
    println!("## Instructions per answered mention (callgrind; one conversation, sequential)");
    match instructions::per_mention(Room::Nip29).await {
        Ok(counted) => {
            println!("| daemon | {} instructions |", counted.instructions);
            print_profile(&counted);
        }
        Err(error) => println!("| daemon | not counted: {error} |"),
    }
    println!(
        "| daemon, natively | {} |\n",
        wakeups(instructions::wakeups_per_mention(Room::Nip29).await)
    );
}

/// Issue 39's encrypted groups: the same two figures for a mention in a
/// Marmot group, and a NIP-29 group's from the same run beside them.
async fn marmot_section() {
    println!(
        "## Instructions per answered mention: a Marmot encrypted group beside a NIP-29 group (callgrind; one conversation each, sequential)"
    );
    println!("| room | instructions per mention | natively, per mention |");
    println!("| --- | ---: | --- |");
    let mut profiles = Vec::new();
    for (label, room) in [("NIP-29 group", Room::Nip29), ("Marmot group", Room::Marmot)] {
        let counted = match instructions::per_mention(room).await {
            Ok(counted) => {
                let figure = counted.instructions.to_string();
                profiles.push((label, counted));
                figure
            }
            Err(error) => format!("not counted: {error}"),
        };
        let natively = wakeups(instructions::wakeups_per_mention(room).await);
        println!("| {label} | {counted} | {natively} |");
    }
    for (label, counted) in &profiles {
        println!("\n{label}:");
        print_profile(counted);
    }
    println!();
}

/// The top functions of a callgrind count, and where its dump is.
fn print_profile(counted: &instructions::PerMention) {
    println!(
        "\nTop functions, inclusive, per {} mentions ({}):\n```\n{}\n```",
        instructions::MENTIONS,
        counted.dump.display(),
        counted.profile
    );
}

/// Context switches and CPU time per mention, as a table cell.
fn wakeups((voluntary, involuntary, cpu): (f64, f64, Duration)) -> String {
    format!(
        "{voluntary:.1} wake-ups (voluntary context switches) + {involuntary:.1} preemptions, {} CPU per mention",
        ms(cpu)
    )
}

/// Answered mentions timed per sustained run, by conversations.
const SUSTAINED_SAMPLES: [(usize, usize); 2] = [(100, 200), (1_000, 400)];
/// Override the sustained runs: `ACP_BRIDGE_BENCH_SUSTAINED=100x50`
/// (conversations x samples per run).
fn sustained_runs() -> Vec<(usize, usize)> {
    run_override("ACP_BRIDGE_BENCH_SUSTAINED").map_or_else(|| SUSTAINED_SAMPLES.to_vec(), |run| vec![run])
}
/// Rates (mentions per second in all) tried at the largest run until the
/// added p99 passes `sustained::SATURATION_P99`.
const SATURATION_RATES: [f64; 6] = [50.0, 100.0, 200.0, 300.0, 400.0, 600.0];

async fn sustained_section() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "## Sustained rate (Poisson arrivals; one mention per conversation every {} s on average = human pace, and 10×; daemon flags: `{}`; load average before: {})\n",
        sustained::HUMAN_MEAN_SECS,
        daemon_flags(),
        load_average()
    );
    println!(
        "| conversations | pace | rate (/s) | samples | bridge p50 / p99 | bare client p50 / p99 | added p50 / p99 | daemon CPU per mention | wake-ups per mention |"
    );
    println!("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut saturation = None;
    let runs = sustained_runs();
    for (index, (conversations, samples)) in runs.iter().copied().enumerate() {
        let human = conversations as f64 / sustained::HUMAN_MEAN_SECS;
        let mut loads = vec![
            sustained::Load { rate: human, samples },
            sustained::Load {
                rate: human * 10.0,
                samples,
            },
        ];
        let sweep = index + 1 == runs.len();
        if sweep {
            loads.extend(
                SATURATION_RATES
                    .iter()
                    .map(|&rate| sustained::Load { rate, samples }),
            );
        }
        let bridge = sustained::through_bridge(conversations, &loads).await;
        let bare = sustained::bare_client(conversations, &loads).await;
        for (at, (mut bridge, mut bare)) in bridge.into_iter().zip(bare).enumerate() {
            let pace = match at {
                0 => "human".to_owned(),
                1 => "10×".to_owned(),
                _ => "sweep".to_owned(),
            };
            let (added_p50, added_p99) = sustained::added(&mut bridge.latencies, &mut bare.latencies);
            let (bridge_p50, bridge_p99) = percentiles(&mut bridge.latencies);
            let (bare_p50, bare_p99) = percentiles(&mut bare.latencies);
            println!(
                "| {conversations} | {pace} | {:.1} ({:.1} achieved) | {} | {} / {} | {} / {} | {} / {} | {} | {:.1} |",
                bridge.load.rate,
                bridge.achieved_rate,
                bridge.latencies.len(),
                ms(bridge_p50),
                ms(bridge_p99),
                ms(bare_p50),
                ms(bare_p99),
                ms(added_p50),
                ms(added_p99),
                bridge.daemon_cpu.map_or_else(String::new, ms),
                bridge.wakeups.unwrap_or_default()
            );
            if at >= 2 && saturation.is_none() && added_p99 > sustained::SATURATION_P99 {
                saturation = Some(bridge.achieved_rate);
            }
        }
    }
    let floor = sustained::floor_rate_per_core();
    match saturation {
        Some(rate) => println!(
            "\nAdded p99 passes {} at {rate:.0} mentions/s ({:.0} per core of {cores}; the bench's relay and client share them);",
            ms(sustained::SATURATION_P99),
            rate / cores as f64
        ),
        None => println!(
            "\nAdded p99 stayed under {} up to {:.0} mentions/s;",
            ms(sustained::SATURATION_P99),
            SATURATION_RATES.last().copied().unwrap_or_default()
        ),
    }
    println!(
        "the daemon's floor alone (one verification and one signature per mention) allows {floor:.0} per core.\n"
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
        "| conversations | bridge p50 | bridge p99 | bare p50 | bare p99 | added p50 | added p99 | daemon CPU per mention | relay + client CPU per mention |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (conversations, turns) in e2e_runs() {
        let through = e2e::through_bridge(conversations, turns).await;
        let mut bridge = through.samples;
        let mut bare = e2e::bare_client(conversations, turns).await;
        let (bridge_p50, bridge_p99) = percentiles(&mut bridge);
        let (bare_p50, bare_p99) = percentiles(&mut bare);
        println!(
            "| {conversations} | {} | {} | {} | {} | {} | {} | {} | {} |",
            ms(bridge_p50),
            ms(bridge_p99),
            ms(bare_p50),
            ms(bare_p99),
            ms(bridge_p50.saturating_sub(bare_p50)),
            ms(bridge_p99.saturating_sub(bare_p99)),
            ms(through.daemon_cpu),
            ms(through.relay_and_client_cpu),
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
