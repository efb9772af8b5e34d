//! What every measurement needs: a relay in this process, the daemon (as
//! the real binary, or in process), owners who mention the bot and time the
//! replies, and percentiles.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acp_bridge::EmbeddedRelay;
use nostr_sdk::prelude::*;
use tokio::sync::oneshot;

use crate::agent_launch::AgentLaunch;
use crate::paths::{bridge_binary, temp_dir};

/// The scripted agent answering at once: what the bench measures is the
/// bridge, not the agent.
pub const ZERO_THINK_TIME: &str = "--rounds 1 --round-delay-ms 0";

/// How long any single wait of the bench may take.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// More daemon flags for every benched daemon, to compare configurations:
/// `ACP_BRIDGE_BENCH_FLAGS="--follow-threads off"`.
pub fn daemon_flags() -> String {
    std::env::var("ACP_BRIDGE_BENCH_FLAGS").unwrap_or_default()
}

/// With `ACP_BRIDGE_BENCH_FOLLOWED=N`, a daemon starts as one that has
/// answered in N threads already (synthetic roots), so that a run measures
/// what following that many threads costs; the daemon follows 500 at most.
fn seed_followed_threads(state: &Path) {
    let Some(threads) = std::env::var("ACP_BRIDGE_BENCH_FOLLOWED")
        .ok()
        .and_then(|n| n.parse::<u64>().ok())
    else {
        return;
    };
    let store = acp_bridge::Store::open(state).expect("the bench's state dir");
    let answered = acp_bridge::AnsweredThreads::new(std::sync::Arc::new(store));
    let answered_at = Timestamp::from_secs(Timestamp::now().as_secs() - 60);
    for root in 1..=threads {
        let root = EventId::from_hex(&format!("{root:064x}")).expect("a synthetic root");
        answered
            .answered(root, answered_at)
            .expect("seed a followed thread");
    }
}

/// Nanoseconds since the Unix epoch (comparable across processes).
pub fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos())
}

/// The daemon as a child process.
pub struct DaemonProcess {
    pub child: Child,
    pub bot: Keys,
    pub log: PathBuf,
}

impl DaemonProcess {
    /// The daemon running the scripted agent with `agent_args`.
    pub fn spawn(relay: &EmbeddedRelay, owner: &Keys, agent_args: &str, flags: &[&str]) -> Self {
        Self::spawn_agent(relay, owner, &AgentLaunch::scripted(agent_args), flags)
    }

    /// The daemon running `agent`.
    pub fn spawn_agent(relay: &EmbeddedRelay, owner: &Keys, agent: &AgentLaunch, flags: &[&str]) -> Self {
        Self::spawn_under(Keys::generate(), &[], relay, owner, agent, flags)
    }

    /// Another daemon of the bot `bot` (a shard: `flags` say which), with a
    /// state dir of its own.
    pub fn spawn_replica(
        bot: &Keys,
        relay: &EmbeddedRelay,
        owner: &Keys,
        agent_args: &str,
        flags: &[&str],
    ) -> Self {
        Self::spawn_under(
            bot.clone(),
            &[],
            relay,
            owner,
            &AgentLaunch::scripted(agent_args),
            flags,
        )
    }

    /// The daemon of `bot`, run under `wrapper` (e.g. valgrind and its
    /// options; the agents it starts are not), with a state dir of its own,
    /// running `agent`.
    pub fn spawn_under(
        bot: Keys,
        wrapper: &[&str],
        relay: &EmbeddedRelay,
        owner: &Keys,
        agent: &AgentLaunch,
        flags: &[&str],
    ) -> Self {
        static LAUNCHES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let launch = LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let state = temp_dir(&format!("state-{}-{launch}", &bot.public_key().to_hex()[..8]));
        let log = state.with_extension("log");
        seed_followed_threads(&state);
        let binary = bridge_binary();
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(&binary);
                command
            }
            None => Command::new(&binary),
        };
        let child = command
            .arg("--relay")
            .arg(relay.url().to_string())
            .arg("--owner")
            .arg(owner.public_key().to_hex())
            .arg("--state-dir")
            .arg(&state)
            .arg("--agent-command")
            .arg(&agent.command)
            .args(agent.daemon_flags())
            .arg("--no-reactions")
            // A queued flood would otherwise add a waiting notice per batch.
            .args(["--wait-notice-after", "0"])
            .arg("--log-format")
            .arg("json")
            .args(flags)
            .args(daemon_flags().split_whitespace())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            // Unless a bunker holds the key (the `bunker` mode's --signer-file).
            .envs(
                (!flags.contains(&"--signer-file"))
                    .then(|| ("ACP_BRIDGE_SECRET_KEY", bot.secret_key().to_secret_hex())),
            )
            .env("ACP_BRIDGE_AGENT_ARGS", &agent.args)
            .envs(agent.env.iter().map(|(name, value)| (name, value)))
            .envs(agent.home.iter().map(|home| ("HOME", home)))
            // Override to profile: ACP_BRIDGE_BENCH_RUST_LOG=debug.
            .env(
                "RUST_LOG",
                std::env::var("ACP_BRIDGE_BENCH_RUST_LOG")
                    .unwrap_or_else(|_| "warn,acp_bridge=info".to_owned()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("spawn acp-bridge");
        DaemonProcess { child, bot, log }
    }

    pub async fn ready(&self) {
        let deadline = Instant::now() + PATIENCE;
        while !std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .contains("ready: subscribed")
        {
            assert!(Instant::now() < deadline, "the daemon did not get ready");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Resident memory of the daemon process (not its agents), in KiB.
    pub fn rss_kib(&self) -> u64 {
        rss_kib(self.child.id())
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time (user + system) a process has used so far. Linux reports it in
/// clock ticks, 100 per second on every kernel this runs on.
pub fn cpu_time(pid: u32) -> Duration {
    const TICKS_PER_SECOND: u64 = 100;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at `)`.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|field| field.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after `)`.
    Duration::from_millis((ticks(11) + ticks(12)) * 1000 / TICKS_PER_SECOND)
}

pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}

/// A relay, a daemon running the scripted agent at zero think time with
/// room for `conversations` turns at once, ready, and its owner connected:
/// where every latency run starts.
pub struct ZeroThinkStage {
    pub relay: EmbeddedRelay,
    pub daemon: DaemonProcess,
    pub owner: Arc<Owner>,
    pub bot: PublicKey,
}

impl ZeroThinkStage {
    pub async fn start(conversations: usize) -> Self {
        let relay = EmbeddedRelay::start(None).await.expect("relay");
        let owner_keys = Keys::generate();
        let capacity = conversations.to_string();
        let daemon = DaemonProcess::spawn(
            &relay,
            &owner_keys,
            ZERO_THINK_TIME,
            &["--turns-per-agent", &capacity],
        );
        daemon.ready().await;
        let bot = daemon.bot.public_key();
        let owner = Arc::new(Owner::connect(&relay, owner_keys, bot).await);
        ZeroThinkStage {
            relay,
            daemon,
            owner,
            bot,
        }
    }
}

/// An owner who mentions the bot and waits for replies, routed by the
/// mention each reply answers.
pub struct Owner {
    pub keys: Keys,
    client: Client,
    waiting: Arc<Mutex<HashMap<EventId, oneshot::Sender<Instant>>>>,
}

impl Owner {
    pub async fn connect(relay: &EmbeddedRelay, keys: Keys, bot: PublicKey) -> Self {
        // The bridge's own transport, so the client adds no Nagle delays of its own.
        let client = Client::builder()
            .signer(keys.clone())
            .websocket_transport(acp_bridge::NoDelayTransport::default())
            .build();
        client.add_relay(relay.url().clone()).await.expect("relay");
        client.connect().await;
        client.wait_for_connection(Duration::from_secs(5)).await;
        let waiting: Arc<Mutex<HashMap<EventId, oneshot::Sender<Instant>>>> = Arc::default();
        let replies = Filter::new()
            .author(bot)
            .kind(Kind::Custom(9))
            .since(Timestamp::now());
        client.subscribe(replies, None).await.expect("subscribe");
        let mut notifications = client.notifications();
        let routes = Arc::clone(&waiting);
        tokio::spawn(async move {
            loop {
                let notification = match notifications.recv().await {
                    Ok(notification) => notification,
                    // Behind (a flood): the lost ones time out; keep routing.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(lost)) => {
                        eprintln!("the owner's client fell behind: {lost} notifications lost");
                        continue;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                };
                let RelayPoolNotification::Event { event, .. } = notification else {
                    continue;
                };
                let received = Instant::now();
                // A reply answers the mention it replies to and, when
                // mentions were merged into one turn, those it quotes.
                for tag in event.tags.iter() {
                    let fields = tag.as_slice();
                    let answers = match fields.first().map(String::as_str) {
                        Some("e") => fields.get(3).map(String::as_str) == Some("reply"),
                        Some("q") => true,
                        _ => false,
                    };
                    if answers
                        && let Some(id) = fields.get(1).and_then(|id| EventId::from_hex(id).ok())
                        && let Some(waiter) = routes.lock().expect("routes").remove(&id)
                    {
                        let _ = waiter.send(received);
                    }
                }
            }
        });
        Owner {
            keys,
            client,
            waiting,
        }
    }

    /// Mentions the bot in `channel`; the receiver yields when the reply lands.
    pub async fn mention(
        &self,
        bot: &PublicKey,
        channel: &str,
        text: &str,
    ) -> (EventId, Instant, oneshot::Receiver<Instant>) {
        let event = EventBuilder::new(Kind::Custom(9), text)
            .tag(Tag::custom(TagKind::h(), [channel.to_owned()]))
            .tag(Tag::public_key(*bot))
            .sign_with_keys(&self.keys)
            .expect("sign");
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().expect("routes").insert(event.id, tx);
        let sent = Instant::now();
        self.client.send_event(&event).await.expect("publish");
        (event.id, sent, rx)
    }

    /// Mentions the bot and waits for the reply; the round-trip time.
    pub async fn round_trip(&self, bot: &PublicKey, channel: &str, text: &str) -> Duration {
        let (_, sent, reply) = self.mention(bot, channel, text).await;
        let received = tokio::time::timeout(PATIENCE, reply)
            .await
            .expect("a reply in time")
            .expect("routed");
        received - sent
    }
}

/// p50 and p99 (nearest rank) of `samples`.
pub fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    assert!(!samples.is_empty(), "no samples");
    samples.sort();
    let rank = |p: f64| samples[((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1];
    (rank(0.50), rank(0.99))
}

pub fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}

/// Frames an agent received, from its `--frame-log-dir` files.
pub fn frames(dir: &Path) -> Vec<serde_json::Value> {
    let mut frames = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for line in std::fs::read_to_string(entry.path()).unwrap_or_default().lines() {
            if let Ok(frame) = serde_json::from_str(line) {
                frames.push(frame);
            }
        }
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms_each(values: &[u64]) -> Vec<Duration> {
        values.iter().map(|ms| Duration::from_millis(*ms)).collect()
    }

    #[test]
    fn percentiles_are_nearest_rank_of_the_sorted_samples() {
        let mut samples = ms_each(&[90, 10, 50, 30, 70, 20, 60, 40, 80, 100]);
        assert_eq!(
            percentiles(&mut samples),
            (Duration::from_millis(50), Duration::from_millis(100))
        );
    }

    #[test]
    fn p99_of_a_hundred_samples_is_the_99th_and_of_one_sample_that_sample() {
        let mut hundred = ms_each(&(1..=100).rev().collect::<Vec<_>>());
        assert_eq!(
            percentiles(&mut hundred),
            (Duration::from_millis(50), Duration::from_millis(99))
        );
        let mut one = ms_each(&[7]);
        assert_eq!(
            percentiles(&mut one),
            (Duration::from_millis(7), Duration::from_millis(7))
        );
    }
}
