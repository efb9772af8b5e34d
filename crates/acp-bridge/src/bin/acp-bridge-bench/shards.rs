//! Throughput of one bot run as 1, 2 and 3 shards (`--shard i/N`, every
//! daemon with the same key on one relay) beside the single unsharded
//! daemon: mentions answered per second of wall time, with a zero-think-time
//! agent and many conversations at once.
//!
//! On a machine with few cores this measures what sharding costs (every
//! replica receives, verifies and journals every mention; the daemons and
//! their agents share the same cores), not what it gains: the gain comes
//! from replicas on machines of their own, where agents are the heavy part.

use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_bridge::EmbeddedRelay;
use nostr_sdk::prelude::*;

use crate::harness::{DaemonProcess, Owner, cpu_time};

/// One run's result.
pub struct Throughput {
    pub mentions: usize,
    pub wall: Duration,
    /// CPU time of all the daemons (agents excluded), per mention.
    pub cpu_per_mention: Duration,
}

impl Throughput {
    pub fn per_second(&self) -> f64 {
        self.mentions as f64 / self.wall.as_secs_f64()
    }
}

/// `conversations` at once, `turns` sequential mentions each (after a
/// warm-up turn each, not counted), answered by `shards` daemons of one bot
/// (`None`: one daemon without `--shard`).
pub async fn run(shards: Option<usize>, conversations: usize, turns: usize) -> Throughput {
    let relay = EmbeddedRelay::start(None).await.expect("relay");
    let owner_keys = Keys::generate();
    let bot = Keys::generate();
    let capacity = conversations.to_string();
    let common = ["--turns-per-agent", capacity.as_str()];
    let daemons: Vec<DaemonProcess> = match shards {
        None => vec![DaemonProcess::spawn_replica(
            &bot,
            &relay,
            &owner_keys,
            crate::harness::ZERO_THINK_TIME,
            &common,
        )],
        Some(count) => (0..count)
            .map(|index| {
                let shard = format!("{index}/{count}");
                let mut flags = common.to_vec();
                flags.extend(["--shard", shard.as_str()]);
                DaemonProcess::spawn_replica(
                    &bot,
                    &relay,
                    &owner_keys,
                    crate::harness::ZERO_THINK_TIME,
                    &flags,
                )
            })
            .collect(),
    };
    for daemon in &daemons {
        daemon.ready().await;
    }
    let bot = bot.public_key();
    let owner = Arc::new(Owner::connect(&relay, owner_keys, bot).await);
    // `phase` keeps the texts apart: the same text in the same second is
    // the same event id, which the bridge rightly takes as a duplicate.
    let conversations_of = |phase: &'static str, turns: usize| {
        let tasks: Vec<_> = (0..conversations)
            .map(|n| {
                let owner = Arc::clone(&owner);
                tokio::spawn(async move {
                    let channel = format!("c{n}");
                    for turn in 0..turns {
                        owner.round_trip(&bot, &channel, &format!("{phase} {turn}")).await;
                    }
                })
            })
            .collect();
        futures_util::future::join_all(tasks)
    };
    conversations_of("warm up", 1).await;
    let cpu_before: Duration = daemons.iter().map(|daemon| cpu_time(daemon.child.id())).sum();
    let started = Instant::now();
    conversations_of("turn", turns).await;
    let wall = started.elapsed();
    let cpu: Duration = daemons.iter().map(|daemon| cpu_time(daemon.child.id())).sum();
    let mentions = conversations * turns;
    drop(daemons);
    relay.shutdown();
    Throughput {
        mentions,
        wall,
        cpu_per_mention: cpu.saturating_sub(cpu_before) / mentions.max(1) as u32,
    }
}
