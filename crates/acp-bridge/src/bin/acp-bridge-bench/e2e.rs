//! End to end: a mention published to the relay → the reply received by
//! the mentioning client, with a zero-think-time agent, at several numbers of
//! concurrent conversations; and as the yardstick the same turns driven by a
//! bare ACP client (no relay, no bridge).

use std::time::{Duration, Instant};

use acp_client::{AgentClient, AgentCommand, ClientConfig, ContentBlock, TurnOptions};

use crate::harness::ZeroThinkStage;
use crate::paths::bridge_binary;

/// What the bridge's round trips took.
pub struct ThroughBridge {
    pub samples: Vec<Duration>,
    /// The daemon's CPU time per mention, from the first mention on.
    pub daemon_cpu: Duration,
    /// This process's CPU time per mention over the same span: the
    /// embedded relay and the mentioning client, the work a round trip
    /// through a relay adds beside the daemon's (the bare client has none
    /// of it). At saturation the added latency is the two summed, times
    /// the conversations at once, over the cores (BENCHMARKS §4).
    pub relay_and_client_cpu: Duration,
}

/// Round trips through relay + bridge: `conversations` owners' threads at
/// once, `turns` sequential mentions each (after one warm-up turn).
pub async fn through_bridge(conversations: usize, turns: usize) -> ThroughBridge {
    let ZeroThinkStage {
        relay,
        daemon,
        owner,
        bot,
    } = ZeroThinkStage::start(conversations).await;
    // From here: the start-up is not a mention's cost.
    let cpu_before = crate::harness::cpu_time(daemon.child.id());
    let own_cpu_before = crate::harness::cpu_time(std::process::id());
    let mut tasks = Vec::new();
    for conversation in 0..conversations {
        let owner = std::sync::Arc::clone(&owner);
        tasks.push(tokio::spawn(async move {
            let channel = format!("c{conversation}");
            owner.round_trip(&bot, &channel, "warm up").await;
            let mut samples = Vec::with_capacity(turns);
            for turn in 0..turns {
                samples.push(owner.round_trip(&bot, &channel, &format!("turn {turn}")).await);
            }
            samples
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("a conversation task"));
    }
    let mentions = (conversations * (turns + 1)) as u32;
    let cpu = crate::harness::cpu_time(daemon.child.id()).saturating_sub(cpu_before);
    let own_cpu = crate::harness::cpu_time(std::process::id()).saturating_sub(own_cpu_before);
    drop(daemon);
    relay.shutdown();
    ThroughBridge {
        samples: all,
        daemon_cpu: cpu / mentions.max(1),
        relay_and_client_cpu: own_cpu / mentions.max(1),
    }
}

/// The same turns through a bare ACP client on the same agent.
pub async fn bare_client(conversations: usize, turns: usize) -> Vec<Duration> {
    let command = AgentCommand::new("bare", bridge_binary())
        .args(std::iter::once("scripted-agent").chain(crate::harness::ZERO_THINK_TIME.split(' ')))
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let client = AgentClient::spawn(&command, ClientConfig::default()).expect("spawn the agent");
    client.initialize().await.expect("initialize");
    let mut tasks = Vec::new();
    for _ in 0..conversations {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let session = client
                .new_session(&std::env::temp_dir(), Vec::new())
                .await
                .expect("session");
            let prompt = |text: &str| {
                let (client, session) = (client.clone(), session.clone());
                let text = text.to_owned();
                async move {
                    let started = Instant::now();
                    client
                        .prompt(&session, vec![ContentBlock::text(text)], TurnOptions::default())
                        .await
                        .expect("prompt")
                        .finish_quietly()
                        .await
                        .expect("outcome");
                    started.elapsed()
                }
            };
            prompt("warm up").await;
            let mut samples = Vec::with_capacity(turns);
            for turn in 0..turns {
                samples.push(prompt(&format!("turn {turn}")).await);
            }
            samples
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("a session task"));
    }
    client.kill();
    all
}
