//! The intake's own cost, on one core (criterion).
//!
//! Three paths of a real `Intake` (SQLite journal in a scratch dir, owner-only
//! gate, no reactions), each reported in events per second:
//! - `intake/verify_only`: `Event::verify` (id hash + Schnorr) alone, the
//!   floor every heard mention pays;
//! - `intake/intake_accept`: owners' kind-9 mentions through every check,
//!   the signature, the journal transaction and the hand-off to the heart,
//!   taken in as the daemon drains a flood (`INTAKE_BATCH` at a time);
//! - `intake/intake_reject_stranger`: a stranger's mention, refused by the
//!   gate on the claimed author before any signature work (steady state of
//!   a flood: the gate's profile-lookup budget already spent).
//!
//! The issue's ratio is `intake_accept` over `verify_only` throughput (target
//! at least 0.8); `--bench intake_ratio` prints it as one table.
//!
//! ```sh
//! cargo bench -p acp-bridge --bench intake -- --warm-up-time 1 --measurement-time 3
//! ```

#[allow(dead_code)] // the benches share this set-up, each uses its own part
mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use acp_bridge::INTAKE_BATCH;
use common::{Cast, IntakeRig};

/// Distinct events `verify_only` cycles through.
const VERIFY_POOL: usize = 4096;
/// Distinct stranger events (from this many keys) the refusal path cycles through.
const STRANGER_POOL: usize = 4096;
const STRANGER_KEYS: usize = 64;

fn intake(c: &mut Criterion) {
    let runtime = common::one_core_runtime();
    let cast = Cast::generate();
    let mut group = c.benchmark_group("intake");
    group.throughput(Throughput::Elements(1));

    let owner_pool = common::signed_mentions(&cast, &cast.owner, VERIFY_POOL);
    group.bench_function("verify_only", |b| {
        let mut events = owner_pool.iter().cycle();
        b.iter(|| events.next().map(|event| event.verify()))
    });

    // Every accepted id is journaled, so each sample signs fresh events
    // (untimed). One store takes them all, as the daemon's does: it grows
    // and checkpoints its WAL along the way.
    let mut accept_rig = runtime.block_on(async { IntakeRig::new(&cast) });
    group.bench_function("intake_accept", |b| {
        b.iter_custom(|iters| {
            let events = common::signed_mentions(&cast, &cast.owner, iters as usize);
            runtime.block_on(accept_rig.accept_all(&events, INTAKE_BATCH))
        })
    });

    let stranger_pool = common::strangers_mentions(&cast, STRANGER_KEYS, STRANGER_POOL);
    let mut stranger_rig = runtime.block_on(async {
        let mut rig = IntakeRig::new(&cast);
        rig.refuse(&stranger_pool, common::STRANGER_WARM_UP_EVENTS).await;
        rig
    });
    group.bench_function("intake_reject_stranger", |b| {
        b.iter_custom(|iters| runtime.block_on(stranger_rig.refuse(&stranger_pool, iters)))
    });
    group.finish();
    // The rigs' nostr clients go down inside the runtime they were made in.
    runtime.block_on(async move { drop((accept_rig, stranger_rig)) });
}

criterion_group!(benches, intake);
criterion_main!(benches);
