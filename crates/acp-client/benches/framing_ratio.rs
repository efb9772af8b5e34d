//! The client's framing and routing against a bare parse, as one table (no
//! criterion).
//!
//! Times N `session/update` message chunks (default 100 000, in turns of
//! 1 000 plus each turn's answer) through a real `AgentClient` (see
//! `common`) and the same bytes through a bare line split and
//! `serde_json::from_slice::<Value>` per line, on a single-threaded runtime,
//! best of 5 runs, and prints frames per second and their ratio.
//!
//! ```sh
//! cargo bench -p acp-client --bench framing_ratio
//! ACP_CLIENT_BENCH_N=10000 target/release/deps/framing_ratio-<hash>   # e.g. under callgrind
//! ```

#[allow(dead_code)] // the benches share this set-up, each uses its own part
mod common;

use std::time::Duration;

use common::ClientRig;

/// Update frames per run unless `ACP_CLIENT_BENCH_N` says otherwise.
const DEFAULT_FRAMES: usize = 100_000;
/// Update frames of one turn.
const FRAMES_PER_TURN: usize = 1_000;
/// Runs per path; the fastest counts (the others met more noise).
const RUNS: usize = 5;

fn main() {
    let frames = std::env::var("ACP_CLIENT_BENCH_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_FRAMES);
    let turns = frames.div_ceil(FRAMES_PER_TURN).max(1);
    let per_turn = frames.min(FRAMES_PER_TURN);
    let frames = turns * per_turn;
    let runtime = common::one_core_runtime();
    let updates = common::message_chunks(per_turn);
    let yardstick = common::yardstick_bytes(&updates);
    let mut rig = runtime.block_on(async { ClientRig::new() });

    let mut best_client = Duration::MAX;
    let mut best_yardstick = Duration::MAX;
    // Runs interleave the paths so that drift of the machine hits them alike.
    for _ in 0..RUNS {
        let client = runtime.block_on(async {
            let mut total = Duration::ZERO;
            for _ in 0..turns {
                total += rig.turn(&updates).await;
            }
            total
        });
        best_client = best_client.min(client);
        let mut total = Duration::ZERO;
        for _ in 0..turns {
            let (elapsed, lines) = common::split_and_parse(&yardstick);
            assert_eq!(lines, per_turn + 1);
            total += elapsed;
        }
        best_yardstick = best_yardstick.min(total);
    }
    runtime.block_on(async move { drop(rig) });

    let rate = |elapsed: Duration| frames as f64 / elapsed.as_secs_f64();
    let micros = |elapsed: Duration| elapsed.as_secs_f64() * 1e6 / frames as f64;
    let line_bytes = updates.bytes.len() / per_turn;
    println!(
        "ACP framing on one core: {frames} session/update frames (~{line_bytes} bytes each) per run, \
         in turns of {per_turn}, best of {RUNS} runs"
    );
    println!(
        "{:<34} {:>12} {:>10} {:>12}",
        "path", "frames/s", "µs/frame", "x yardstick"
    );
    let yardstick_rate = rate(best_yardstick);
    for (name, elapsed) in [
        ("split + serde_json (yardstick)", best_yardstick),
        ("client decode + route + turn", best_client),
    ] {
        println!(
            "{name:<34} {:>12.0} {:>10.3} {:>12.2}",
            rate(elapsed),
            micros(elapsed),
            rate(elapsed) / yardstick_rate
        );
    }
}
