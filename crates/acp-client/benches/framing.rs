//! ACP framing and routing through the client, on one core (criterion).
//!
//! - `framing/client_route`: turns of 1 000 `session/update` message chunks
//!   (~200 bytes of text each) and the prompt's answer, written by the bench
//!   as the agent into a real `AgentClient` over in-memory pipes and read by
//!   the caller to the turn's end: line framing, JSON-RPC parse, update
//!   classification, routing to the turn, the turn's own bookkeeping;
//! - `framing/split_parse_yardstick`: the same bytes through a bare line
//!   split and `serde_json::from_slice::<Value>` per line.
//!
//! Both report update frames per second; their ratio is the client's cost
//! over the bare parse (`--bench framing_ratio` prints it as one table).
//!
//! ```sh
//! cargo bench -p acp-client --bench framing -- --warm-up-time 1 --measurement-time 3
//! ```

#[allow(dead_code)] // the benches share this set-up, each uses its own part
mod common;

use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};

use common::ClientRig;

/// Update frames of one turn (one bench iteration).
const FRAMES_PER_TURN: usize = 1_000;

fn framing(c: &mut Criterion) {
    let runtime = common::one_core_runtime();
    let updates = common::message_chunks(FRAMES_PER_TURN);
    let yardstick = common::yardstick_bytes(&updates);
    let mut group = c.benchmark_group("framing");
    group.throughput(Throughput::Elements(FRAMES_PER_TURN as u64));
    // An iteration is a whole turn (milliseconds): same count per sample.
    group.sampling_mode(SamplingMode::Flat);

    let mut rig = runtime.block_on(async { ClientRig::new() });
    group.bench_function("client_route", |b| {
        b.iter_custom(|turns| {
            runtime.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..turns {
                    total += rig.turn(&updates).await;
                }
                total
            })
        })
    });

    group.bench_function("split_parse_yardstick", |b| {
        b.iter(|| common::split_and_parse(&yardstick).1)
    });
    group.finish();
    runtime.block_on(async move { drop(rig) });
}

criterion_group!(benches, framing);
criterion_main!(benches);
