//! The cost of storing a reply (criterion): `Store::outbox_put` of a signed
//! reply of about 1 KB that finishes the one mention it answers, the
//! transaction every answered mention pays before its reply is published.
//!
//! It commits with `synchronous=FULL` (an fsync of the WAL) so that a
//! relay's OK is never followed by a power loss that rolls the row back;
//! BENCHMARKS.md has the figure beside the `NORMAL` one it replaced.
//!
//! ```sh
//! ACP_BRIDGE_BENCH_DIR=/var/lib/acp-bridge cargo bench -p acp-bridge --bench outbox
//! ```

#[allow(dead_code)] // the benches share this set-up, each uses its own part
mod common;

use std::time::{Duration, Instant};

use acp_bridge::{Finish, NewMention, OutgoingEvent, Store};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// A reply's JSON as the outbox keeps it: about the size of a short answer.
const REPLY_JSON_BYTES: usize = 1024;

fn outbox(c: &mut Criterion) {
    let dir = common::ScratchDir::new();
    let store = Store::open(dir.path()).expect("opening the store");
    let json = "x".repeat(REPLY_JSON_BYTES);
    let mut seq: u64 = 0;
    let mut group = c.benchmark_group("outbox");
    group.throughput(Throughput::Elements(1));
    group.bench_function("put_reply", |b| {
        b.iter_custom(|iterations| {
            let mut spent = Duration::ZERO;
            for _ in 0..iterations {
                seq += 1;
                let (mention, reply) = (format!("{seq:064x}"), format!("{:064x}", u64::MAX - seq));
                let accepted = NewMention {
                    event_id: &mention,
                    conversation: "bench",
                    payload: "{}",
                    accepted_at: 1,
                };
                store.journal_accept_all(&[accepted]).expect("journal");
                let outgoing = OutgoingEvent {
                    event_id: &reply,
                    relay_hint: Some("wss://relay.example"),
                    json: &json,
                };
                let started = Instant::now();
                store
                    .outbox_put(&outgoing, &[mention.as_str()], Finish::Answered, 2)
                    .expect("outbox");
                spent += started.elapsed();
            }
            spent
        });
    });
    group.finish();
}

criterion_group!(benches, outbox);
criterion_main!(benches);
