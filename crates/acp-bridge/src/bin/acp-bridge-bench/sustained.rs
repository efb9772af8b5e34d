//! Latency at a sustained rate, the way users load the bridge: N
//! conversations, each mentioning the bot as a Poisson process (one
//! mention per conversation every [`HUMAN_MEAN_SECS`] on average, and ten
//! times that), the bridge's round trip beside a bare ACP client's turn
//! on the same agent under the same arrivals. A burst of N mentions at
//! once (the `e2e` section) measures queueing behind N signatures, which
//! no user sees; this measures what one mention adds while others keep
//! arriving at their own pace.
//!
//! Then the rate is raised step by step at 1,000 conversations until the
//! added p99 passes [`SATURATION_P99`]: the rate the bridge sustains, per
//! core, beside the rate its floor (one verification and one signature
//! per mention) would allow on one core.

use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_client::{AgentClient, AgentCommand, ClientConfig, ContentBlock, SessionId, TurnOptions};
use nostr_sdk::prelude::*;

use crate::harness::{Owner, PATIENCE, ZeroThinkStage, cpu_time, percentiles};
use crate::instructions::context_switches;
use crate::paths::bridge_binary;

/// Mean seconds between two mentions of one conversation at a human pace
/// (the middle of "every 30 to 60 seconds").
pub const HUMAN_MEAN_SECS: f64 = 45.0;
/// Added p99 past which the rate counts as more than the bridge sustains.
pub const SATURATION_P99: Duration = Duration::from_millis(100);
/// Mentions in flight while every conversation is opened before a run (its
/// first mention creates its session, which is not what a run measures).
const OPENING_CONCURRENCY: usize = 64;

/// One run: mentions arriving at `rate` per second in all, until `samples`
/// were answered.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub rate: f64,
    pub samples: usize,
}

/// What one run measured.
pub struct Measured {
    pub load: Load,
    pub latencies: Vec<Duration>,
    /// The daemon's CPU time per mention over the run (none for the bare client).
    pub daemon_cpu: Option<Duration>,
    /// The daemon's voluntary context switches per mention (its wake-ups).
    pub wakeups: Option<f64>,
    /// The rate the arrivals had (the schedule's, unless the publisher
    /// fell behind it).
    pub achieved_rate: f64,
}

/// The arrival times of a Poisson process of `load.rate` per second, each
/// with the one of `conversations` it falls in (uniform: N equal Poisson
/// processes merged are one of N times the rate, each arrival in any of
/// them alike).
fn arrivals(conversations: usize, load: Load) -> Vec<(Duration, usize)> {
    let mut rng = rand::thread_rng();
    let mut at = 0.0_f64;
    (0..load.samples)
        .map(|_| {
            // Exponential gaps: -ln(U)/rate, U in (0, 1].
            let uniform: f64 = 1.0 - rand::Rng::r#gen::<f64>(&mut rng);
            at += -uniform.ln() / load.rate;
            (
                Duration::from_secs_f64(at),
                rand::Rng::gen_range(&mut rng, 0..conversations),
            )
        })
        .collect()
}

/// The bridge under each of `loads` in turn (up to the first whose p99
/// passes [`SATURATION_P99`]): one daemon with the scripted
/// agent at zero think time, every conversation opened first, then each
/// load's arrivals published on schedule and each reply timed from its
/// mention's publication.
pub async fn through_bridge(conversations: usize, loads: &[Load]) -> Vec<Measured> {
    let ZeroThinkStage {
        relay,
        daemon,
        owner,
        bot,
    } = ZeroThinkStage::start(conversations).await;
    open_conversations(&owner, &bot, conversations).await;
    let pid = daemon.child.id();
    let mut runs = Vec::with_capacity(loads.len());
    for load in loads {
        let (switches_before, cpu_before) = (context_switches(pid).0, cpu_time(pid));
        let (latencies, achieved_rate) = drive(conversations, *load, |turn, conversation| {
            let owner = Arc::clone(&owner);
            tokio::spawn(async move {
                let (id, sent, reply) = owner
                    .mention(&bot, &channel(conversation), &format!("turn {turn}"))
                    .await;
                let Ok(Ok(received)) = tokio::time::timeout(PATIENCE, reply).await else {
                    panic!("no reply to {id} in conversation {}", channel(conversation));
                };
                received - sent
            })
        })
        .await;
        let mentions = latencies.len() as f64;
        let wakeups = context_switches(pid).0.saturating_sub(switches_before) as f64 / mentions;
        let mut sorted = latencies.clone();
        let saturated = percentiles(&mut sorted).1 > SATURATION_P99;
        runs.push(Measured {
            load: *load,
            latencies,
            daemon_cpu: Some(cpu_time(pid).saturating_sub(cpu_before).div_f64(mentions)),
            wakeups: Some(wakeups),
            achieved_rate,
        });
        // Past saturation the queues only grow: the next rate says nothing more.
        if saturated {
            break;
        }
    }
    drop(daemon);
    relay.shutdown();
    runs
}

/// The same arrivals on a bare ACP client (no relay, no bridge): each
/// conversation one session of one agent, each turn timed from its prompt
/// to its end.
pub async fn bare_client(conversations: usize, loads: &[Load]) -> Vec<Measured> {
    let command = AgentCommand::new("bare", bridge_binary())
        .args(std::iter::once("scripted-agent").chain(crate::harness::ZERO_THINK_TIME.split(' ')))
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let client = AgentClient::spawn(&command, ClientConfig::default()).expect("spawn the agent");
    client.initialize().await.expect("initialize");
    // A session takes one prompt at a time: a mention arriving mid-turn
    // waits for the turn to end, as the bridge's queue makes it wait.
    let mut sessions: Vec<(SessionId, Arc<tokio::sync::Mutex<()>>)> = Vec::with_capacity(conversations);
    for _ in 0..conversations {
        let session = client
            .new_session(&std::env::temp_dir(), Vec::new())
            .await
            .expect("session");
        sessions.push((session, Arc::default()));
    }
    let mut runs = Vec::with_capacity(loads.len());
    for load in loads {
        let (latencies, achieved_rate) = drive(conversations, *load, |turn, conversation| {
            let (client, (session, one_at_a_time)) = (client.clone(), sessions[conversation].clone());
            let sent = Instant::now();
            tokio::spawn(async move {
                let _turn = one_at_a_time.lock().await;
                client
                    .prompt(
                        &session,
                        vec![ContentBlock::text(format!("turn {turn}"))],
                        TurnOptions::default(),
                    )
                    .await
                    .expect("prompt")
                    .finish_quietly()
                    .await
                    .expect("outcome");
                sent.elapsed()
            })
        })
        .await;
        runs.push(Measured {
            load: *load,
            latencies,
            daemon_cpu: None,
            wakeups: None,
            achieved_rate,
        });
    }
    client.kill();
    runs
}

/// Starts each of `load`'s arrivals on schedule with `start(turn,
/// conversation)`, which spawns the task timing it; every latency, and
/// the rate the arrivals had (the schedule's, unless starting them fell
/// behind it).
async fn drive<Start>(conversations: usize, load: Load, mut start: Start) -> (Vec<Duration>, f64)
where
    Start: FnMut(usize, usize) -> tokio::task::JoinHandle<Duration>,
{
    let schedule = arrivals(conversations, load);
    let started = Instant::now();
    let mut waiting = Vec::with_capacity(schedule.len());
    for (turn, (at, conversation)) in schedule.iter().enumerate() {
        tokio::time::sleep_until((started + *at).into()).await;
        waiting.push(start(turn, *conversation));
    }
    let achieved_rate = schedule.len() as f64 / started.elapsed().as_secs_f64();
    let mut latencies = Vec::with_capacity(waiting.len());
    for wait in waiting {
        latencies.push(wait.await.expect("a timed round trip"));
    }
    (latencies, achieved_rate)
}

/// Each conversation's first mention, answered, a few dozen at a time.
async fn open_conversations(owner: &Arc<Owner>, bot: &PublicKey, conversations: usize) {
    let mut pending = Vec::new();
    for conversation in 0..conversations {
        let (owner, bot) = (Arc::clone(owner), *bot);
        pending.push(tokio::spawn(async move {
            owner.round_trip(&bot, &channel(conversation), "open").await;
        }));
        if pending.len() == OPENING_CONCURRENCY {
            for task in pending.drain(..) {
                task.await.expect("an opening");
            }
        }
    }
    for task in pending {
        task.await.expect("an opening");
    }
}

fn channel(conversation: usize) -> String {
    format!("s{conversation}")
}

/// p50 and p99 of the bridge's latencies minus the bare client's: what the
/// bridge and the relay add at the same arrivals.
pub fn added(bridge: &mut [Duration], bare: &mut [Duration]) -> (Duration, Duration) {
    let (bridge_p50, bridge_p99) = percentiles(bridge);
    let (bare_p50, bare_p99) = percentiles(bare);
    (
        bridge_p50.saturating_sub(bare_p50),
        bridge_p99.saturating_sub(bare_p99),
    )
}

/// Mentions per second one core could take if the daemon did nothing but
/// its floor: one signature verification (the mention) and one signature
/// (the reply), timed here on this machine.
pub fn floor_rate_per_core() -> f64 {
    const ROUNDS: usize = 2_000;
    let keys = Keys::generate();
    let events: Vec<Event> = (0..ROUNDS)
        .map(|n| {
            EventBuilder::text_note(format!("floor {n}"))
                .sign_with_keys(&keys)
                .expect("sign")
        })
        .collect();
    let started = Instant::now();
    for event in &events {
        event.verify().expect("valid");
        EventBuilder::text_note(event.content.as_str())
            .sign_with_keys(&keys)
            .expect("sign");
    }
    ROUNDS as f64 / started.elapsed().as_secs_f64()
}
