//! The intake's cost against its floor, as one table (no criterion).
//!
//! Times N signed kind-9 owner mentions (default 20 000) through
//! `Event::verify` alone and through the whole intake path of a real
//! `Intake` (see `common`), on a single-threaded runtime, best of 5 runs,
//! and prints events per second and their ratio; the issue's target is an
//! intake at least 0.8 times the verification-only rate. The intake takes
//! the mentions in as the daemon drains a flood (`INTAKE_BATCH` at a time,
//! one journal commit per batch). More rows help to read it: the same one
//! at a time (a trickle), the store's share of an accepted mention (the
//! dedup lookup and the journal transactions alone) and a stranger's
//! refusal.
//!
//! ```sh
//! cargo bench -p acp-bridge --bench intake_ratio
//! ACP_BRIDGE_BENCH_N=2000 target/release/deps/intake_ratio-<hash>   # e.g. under callgrind
//! ```
//!
//! `ACP_BRIDGE_BENCH_DIR` puts the scratch stores elsewhere than the
//! system temp dir (bench on the file system of the real `--state-dir`);
//! `ACP_BRIDGE_BENCH_ONLY=intake_accept` (or `verify_only`,
//! `intake_accept_one_at_a_time`, `journal`, `intake_reject_stranger`,
//! comma-separated) runs only those rows, e.g.
//! under a profiler.

#[allow(dead_code)] // the benches share this set-up, each uses its own part
mod common;

use std::time::Duration;

use acp_bridge::INTAKE_BATCH;
use common::{Cast, IntakeRig};

/// Events per run unless `ACP_BRIDGE_BENCH_N` says otherwise.
const DEFAULT_EVENTS: usize = 20_000;
/// Runs per path; the fastest counts (the others met more noise).
const RUNS: usize = 5;
/// The issue's target for intake / verification-only.
const TARGET_RATIO: f64 = 0.8;
/// Keys the strangers' mentions come from.
const STRANGER_KEYS: usize = 64;
/// The paths, as named in `ACP_BRIDGE_BENCH_ONLY` (comma-separated; all
/// when unset), e.g. to profile one of them alone.
const VERIFY: &str = "verify_only";
const ACCEPT: &str = "intake_accept";
const ACCEPT_ONE: &str = "intake_accept_one_at_a_time";
const JOURNAL: &str = "journal";
const STRANGER: &str = "intake_reject_stranger";

fn main() {
    let events_per_run = std::env::var("ACP_BRIDGE_BENCH_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_EVENTS);
    let only = std::env::var("ACP_BRIDGE_BENCH_ONLY").ok();
    let runs = |path: &str| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|name| name.trim() == path))
    };
    let runtime = common::one_core_runtime();
    let cast = Cast::generate();
    let owner_events = common::signed_mentions(&cast, &cast.owner, events_per_run);
    let stranger_events = common::strangers_mentions(&cast, STRANGER_KEYS, events_per_run.min(4096));
    // The size of a journaled mention, for the journal-only row.
    let payload_bytes = runtime.block_on(async {
        let mut rig = IntakeRig::new(&cast);
        rig.accept_all(&common::signed_mentions(&cast, &cast.owner, 1), 1)
            .await;
        rig.journaled_payload_bytes()
    });
    let mut stranger_rig = runtime.block_on(async {
        let mut rig = IntakeRig::new(&cast);
        rig.refuse(&stranger_events, common::STRANGER_WARM_UP_EVENTS)
            .await;
        rig
    });

    let mut best = Best::default();
    // Runs interleave the paths so that drift of the machine hits them alike.
    for _ in 0..RUNS {
        if runs(VERIFY) {
            best.verify = best.verify.min(common::verify_all(&owner_events));
        }
        if runs(ACCEPT) {
            let accept = runtime.block_on(async {
                IntakeRig::new(&cast)
                    .accept_all(&owner_events, INTAKE_BATCH)
                    .await
            });
            best.accept = best.accept.min(accept);
        }
        if runs(ACCEPT_ONE) {
            let accept = runtime.block_on(async { IntakeRig::new(&cast).accept_all(&owner_events, 1).await });
            best.accept_one = best.accept_one.min(accept);
        }
        if runs(JOURNAL) {
            let journal =
                runtime.block_on(async { IntakeRig::new(&cast).journal_only(&owner_events, payload_bytes) });
            best.journal = best.journal.min(journal);
        }
        if runs(STRANGER) {
            let refuse = runtime.block_on(stranger_rig.refuse(&stranger_events, events_per_run as u64));
            best.refuse = best.refuse.min(refuse);
        }
    }
    runtime.block_on(async move { drop(stranger_rig) });

    let rate = |elapsed: Duration| events_per_run as f64 / elapsed.as_secs_f64();
    let micros = |elapsed: Duration| elapsed.as_secs_f64() * 1e6 / events_per_run as f64;
    let measured = |elapsed: Duration| (elapsed != Duration::MAX).then_some(elapsed);
    let verify_rate = measured(best.verify).map(rate);
    let row = |name: &str, elapsed: Duration, note: &str| {
        let Some(elapsed) = measured(elapsed) else {
            return println!("{name:<34} {:>12}", "skipped");
        };
        let versus =
            verify_rate.map_or_else(|| "-".to_owned(), |floor| format!("{:.2}", rate(elapsed) / floor));
        println!(
            "{name:<34} {:>12.0} {:>10.2} {versus:>10}  {note}",
            rate(elapsed),
            micros(elapsed),
        );
    };
    println!(
        "intake on one core: {events_per_run} kind-9 mentions per run, best of {RUNS} runs, stores under {}",
        std::env::var_os("ACP_BRIDGE_BENCH_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(std::env::temp_dir)
            .display()
    );
    println!(
        "{:<34} {:>12} {:>10} {:>10}",
        "path", "events/s", "µs/event", "x verify"
    );
    row("verify_only (floor)", best.verify, "");
    let verdict = match (verify_rate, measured(best.accept)) {
        (Some(floor), Some(accept)) if rate(accept) / floor >= TARGET_RATIO => {
            format!("meets the target of {TARGET_RATIO:.2}")
        }
        (Some(_), Some(_)) => format!("MISSES the target of {TARGET_RATIO:.2}"),
        _ => String::new(),
    };
    row("intake_accept", best.accept, &verdict);
    row(
        "  one at a time",
        best.accept_one,
        "(a trickle: one commit per mention)",
    );
    row(
        "  of which: seen lookup + journal",
        best.journal,
        &format!("(store alone, same ids, {payload_bytes}-byte payloads)"),
    );
    row("intake_reject_stranger", best.refuse, "(no signature checked)");
}

/// The fastest run of each path.
#[derive(Debug)]
struct Best {
    verify: Duration,
    accept: Duration,
    accept_one: Duration,
    journal: Duration,
    refuse: Duration,
}

impl Default for Best {
    fn default() -> Self {
        Best {
            verify: Duration::MAX,
            accept: Duration::MAX,
            accept_one: Duration::MAX,
            journal: Duration::MAX,
            refuse: Duration::MAX,
        }
    }
}
