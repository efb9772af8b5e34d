//! What a live conversation costs with a real agent behind the daemon:
//! the memory of the daemon's whole process tree per live session, the
//! same over many conversations spread in time, and the latency a
//! returning conversation pays when its session was closed.
//!
//! The agent is claude-agent-acp against the loopback fake provider by
//! default (`--agent scripted` runs anywhere). Daemon flags, such as
//! `--session-idle`, come from `ACP_BRIDGE_BENCH_FLAGS` (the harness's).
//!
//! Memory safety: a `claude` session costs ~200 MB and the machine is
//! shared, so every run stops (and says so) once the tree holds more than
//! [`MAX_LIVE_CLAUDE_CLIS`] `claude` CLIs; the unbounded figure for many
//! conversations is computed from the per-session one, never run.

use std::path::Path;
use std::time::{Duration, Instant};

use acp_bridge::EmbeddedRelay;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use nostr_sdk::prelude::*;

use crate::agent_launch::AgentLaunch;
use crate::harness::{DaemonProcess, Owner, PATIENCE, daemon_flags};
use crate::process_tree::{self, TreeMemory};

/// Live conversations at which the tree is measured.
pub const STAGES: [usize; 4] = [1, 2, 5, 10];
/// After the last reply of a stage, before its sample: the CLIs finish
/// their side requests (a session summary) and settle.
const SETTLE_AFTER_REPLY: Duration = Duration::from_secs(3);
/// How often the tree is sampled during a spread run.
const SAMPLE_EVERY: Duration = Duration::from_millis(500);
/// The most `claude` CLIs a run may hold at once (~200 MB each).
pub const MAX_LIVE_CLAUDE_CLIS: usize = 12;
/// The command name of claude-agent-acp's per-session CLI process.
pub const CLAUDE_CLI_COMMAND: &str = "claude";
/// How long a stopped daemon may take to stop its agents before the rest of
/// its tree is killed by pid.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How the daemon's log message starts when it closes a conversation's
/// session (`session closed (idle)`, `… (evicted)`, …).
pub const SESSION_CLOSED_MESSAGE: &str = "session closed";
/// The daemon's log message when a conversation's earlier session is
/// resumed or loaded.
const SESSION_REOPENED_MESSAGE: &str = "session reopened";

/// Which agent runs behind the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchAgent {
    Claude,
    Scripted,
}

impl BenchAgent {
    pub fn launch(self) -> AgentLaunch {
        match self {
            BenchAgent::Claude => AgentLaunch::claude(),
            BenchAgent::Scripted => AgentLaunch::scripted(crate::harness::ZERO_THINK_TIME),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BenchAgent::Claude => "claude-agent-acp behind a loopback fake provider",
            BenchAgent::Scripted => "the scripted agent",
        }
    }
}

/// A running daemon with its agent, its relay and one owner.
struct Rig {
    relay: EmbeddedRelay,
    daemon: DaemonProcess,
    owner: Owner,
    bot: PublicKey,
    /// Every pid seen in the daemon's tree, so that none outlives the run.
    seen: std::collections::HashSet<u32>,
    _agent: AgentLaunch,
}

impl Rig {
    async fn start(agent: BenchAgent) -> Rig {
        let relay = EmbeddedRelay::start(None).await.expect("relay");
        let owner_keys = Keys::generate();
        let agent = agent.launch();
        let daemon = DaemonProcess::spawn_agent(&relay, &owner_keys, &agent, &[]);
        daemon.ready().await;
        let bot = daemon.bot.public_key();
        let owner = Owner::connect(&relay, owner_keys, bot).await;
        Rig {
            relay,
            daemon,
            owner,
            bot,
            seen: Default::default(),
            _agent: agent,
        }
    }

    /// The tree's memory now; an error once it holds too many CLIs.
    fn sample(&mut self) -> Result<TreeMemory, String> {
        let (tree, pids) = process_tree::sample(self.daemon.child.id());
        self.seen.extend(pids);
        let clis = tree.count_of(CLAUDE_CLI_COMMAND);
        if clis > MAX_LIVE_CLAUDE_CLIS {
            return Err(format!(
                "stopped: {clis} live `{CLAUDE_CLI_COMMAND}` CLIs, more than the bench's bound of {MAX_LIVE_CLAUDE_CLIS}"
            ));
        }
        Ok(tree)
    }

    /// Mentions the bot in `channel` and waits for the reply: the latency.
    async fn answered(&self, channel: &str, text: &str) -> Duration {
        self.owner.round_trip(&self.bot, channel, text).await
    }

    /// Stops the daemon (SIGTERM: it stops its agents), then kills by pid
    /// whatever of its tree is left after [`STOP_GRACE`].
    async fn stop(mut self) {
        let _ = kill(Pid::from_raw(self.daemon.child.id() as i32), Signal::SIGTERM);
        let deadline = Instant::now() + STOP_GRACE;
        while matches!(self.daemon.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for pid in self.seen.iter().filter(|pid| **pid != self.daemon.child.id()) {
            if Path::new(&format!("/proc/{pid}")).exists() {
                let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGKILL);
            }
        }
        drop(self.daemon);
        self.relay.shutdown();
    }
}

/// The tree after the daemon got ready (`0`) and after each of [`STAGES`]
/// conversations were answered once, one after the other; stops early
/// (with the reason) at the CLI bound.
pub async fn per_session(agent: BenchAgent) -> (Vec<(usize, TreeMemory)>, Option<String>) {
    let mut rig = Rig::start(agent).await;
    let mut stages = Vec::new();
    let mut stopped = None;
    tokio::time::sleep(SETTLE_AFTER_REPLY).await;
    match rig.sample() {
        Ok(tree) => stages.push((0, tree)),
        Err(reason) => stopped = Some(reason),
    }
    let mut answered = 0;
    for stage in STAGES {
        if stopped.is_some() {
            break;
        }
        while answered < stage {
            rig.answered(&format!("live-{answered}"), "hello").await;
            answered += 1;
        }
        tokio::time::sleep(SETTLE_AFTER_REPLY).await;
        match rig.sample() {
            Ok(tree) => stages.push((stage, tree)),
            Err(reason) => stopped = Some(reason),
        }
    }
    rig.stop().await;
    (stages, stopped)
}

/// A run of conversations spread over time.
pub struct SpreadRun {
    /// (since the first mention, the tree then).
    pub samples: Vec<(Duration, TreeMemory)>,
    pub answered: usize,
    pub wall: Duration,
    /// Why the run stopped early, if it did.
    pub stopped: Option<String>,
}

/// `conversations` conversations, a new one every `every`, each answered
/// once, with the tree sampled every [`SAMPLE_EVERY`] until the last reply.
pub async fn spread(agent: BenchAgent, conversations: usize, every: Duration) -> SpreadRun {
    let mut rig = Rig::start(agent).await;
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut waiting = Vec::new();
    let mut mentioned = 0;
    let mut answered = 0;
    let mut stopped = None;
    let mut last_mention = started;
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    while answered < conversations {
        tick.tick().await;
        while mentioned < conversations && started.elapsed() >= every * mentioned as u32 {
            // Each waiting mention may start one more CLI.
            let clis = samples.last().map_or(0, |(_, tree): &(Duration, TreeMemory)| {
                tree.count_of(CLAUDE_CLI_COMMAND)
            });
            if clis + waiting.len() >= MAX_LIVE_CLAUDE_CLIS {
                stopped = Some(format!(
                    "stopped before conversation {}: {clis} live `{CLAUDE_CLI_COMMAND}` CLIs and {} replies pending would pass the bench's bound of {MAX_LIVE_CLAUDE_CLIS}",
                    mentioned + 1,
                    waiting.len()
                ));
                break;
            }
            let (_, _, reply) = rig
                .owner
                .mention(&rig.bot, &format!("spread-{mentioned}"), "hello")
                .await;
            waiting.push(reply);
            mentioned += 1;
            last_mention = Instant::now();
        }
        waiting.retain_mut(|reply| match reply.try_recv() {
            Ok(_) => {
                answered += 1;
                false
            }
            Err(tokio::sync::oneshot::error::TryRecvError::Empty) => true,
            Err(tokio::sync::oneshot::error::TryRecvError::Closed) => false,
        });
        if stopped.is_some() {
            break;
        }
        match rig.sample() {
            Ok(tree) => samples.push((started.elapsed(), tree)),
            Err(reason) => {
                stopped = Some(reason);
                break;
            }
        }
        if last_mention.elapsed() > PATIENCE {
            stopped = Some(format!(
                "stopped: {} replies missing {} s after the last mention",
                conversations - answered,
                PATIENCE.as_secs()
            ));
            break;
        }
    }
    let wall = started.elapsed();
    rig.stop().await;
    SpreadRun {
        samples,
        answered,
        wall,
        stopped,
    }
}

impl SpreadRun {
    /// The sample with the most PSS.
    pub fn peak(&self) -> Option<&TreeMemory> {
        self.samples
            .iter()
            .map(|(_, tree)| tree)
            .max_by_key(|tree| tree.total.pss_kib)
    }

    /// The median PSS (KiB) of the second half of the run: the steady
    /// state once conversations come and go.
    pub fn steady_pss_kib(&self) -> Option<u64> {
        let mut second_half: Vec<u64> = self.samples[self.samples.len() / 2..]
            .iter()
            .map(|(_, tree)| tree.total.pss_kib)
            .collect();
        second_half.sort_unstable();
        second_half.get(second_half.len() / 2).copied()
    }
}

/// Mention → reply latencies of conversations that come back.
pub struct ResumeRun {
    /// A second mention right after the first reply: the session is live.
    pub live: Vec<Duration>,
    /// A mention after the session was closed for idleness (none without
    /// `--session-idle` among the daemon flags).
    pub resumed: Vec<Duration>,
    /// How many of the resumed turns the daemon logged as reopening the
    /// earlier session (the rest opened a new one).
    pub reopened: usize,
    pub stopped: Option<String>,
}

/// `samples` conversations each answered once and then again at once (a
/// live session); then, when the daemon runs with `--session-idle`, once
/// all their sessions are closed, each mentioned a third time (resumed).
pub async fn resume_latency(agent: BenchAgent, samples: usize) -> ResumeRun {
    let mut rig = Rig::start(agent).await;
    let mut run = ResumeRun {
        live: Vec::new(),
        resumed: Vec::new(),
        reopened: 0,
        stopped: None,
    };
    let mark = log_len(&rig.daemon.log);
    for sample in 0..samples {
        let channel = format!("returning-{sample}");
        rig.answered(&channel, "remember the number 7").await;
        run.live.push(rig.answered(&channel, "and now?").await);
        if let Err(reason) = rig.sample() {
            run.stopped = Some(reason);
            rig.stop().await;
            return run;
        }
    }
    // The default idle time (minutes) is longer than a run.
    if daemon_flags().contains("--session-idle") {
        let deadline = Instant::now() + PATIENCE;
        while count_messages(&rig.daemon.log, mark, SESSION_CLOSED_MESSAGE) < samples {
            if Instant::now() > deadline {
                run.stopped = Some(format!(
                    "stopped: fewer than {samples} `{SESSION_CLOSED_MESSAGE}` in {} s",
                    PATIENCE.as_secs()
                ));
                rig.stop().await;
                return run;
            }
            tokio::time::sleep(SAMPLE_EVERY).await;
        }
        let reopened_before = count_messages(&rig.daemon.log, mark, SESSION_REOPENED_MESSAGE);
        for sample in 0..samples {
            let channel = format!("returning-{sample}");
            run.resumed
                .push(rig.answered(&channel, "what was the number?").await);
        }
        run.reopened = count_messages(&rig.daemon.log, mark, SESSION_REOPENED_MESSAGE) - reopened_before;
    }
    rig.stop().await;
    run
}

/// The log's length in bytes: a mark to count lines from.
fn log_len(log: &Path) -> usize {
    std::fs::metadata(log).map_or(0, |meta| meta.len() as usize)
}

/// Lines of the daemon's JSON log after byte `mark` whose message starts
/// with `message`.
fn count_messages(log: &Path, mark: usize, message: &str) -> usize {
    let text = std::fs::read(log).unwrap_or_default();
    String::from_utf8_lossy(text.get(mark..).unwrap_or_default())
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| {
            line["message"]
                .as_str()
                .is_some_and(|logged| logged.starts_with(message))
        })
        .count()
}
