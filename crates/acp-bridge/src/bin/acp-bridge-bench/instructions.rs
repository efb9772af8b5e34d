//! Instructions the daemon executes per answered mention, counted by
//! valgrind's callgrind: a figure that does not swing with the machine's
//! load, as wall-clock time on a shared two-core machine does. Beside it,
//! from a run without valgrind (which serializes the daemon's threads and
//! so changes how often they sleep), the context switches per mention: how
//! often the daemon's threads go to sleep and are woken again.
//!
//! One conversation, sequential mentions, the agent at zero think time, in
//! a [`Room`]: a NIP-29 group chat, or a Marmot encrypted group. The
//! daemon runs under callgrind (its agents and the relay do not); after the
//! warm-up its counters are zeroed (`callgrind_control -z`) and after
//! [`MENTIONS`] answered mentions dumped (`callgrind_control -d`), so the
//! dump holds exactly their path: start-up, warm-up and shutdown are not in
//! it.

use std::path::{Path, PathBuf};
use std::process::Command;

use acp_bridge::EmbeddedRelay;
use nostr_sdk::prelude::*;

use crate::harness::{DaemonProcess, Owner, cpu_time};
use crate::marmot::Member;
use crate::paths::temp_dir;

const WARM_UP: usize = 5;
/// Answered mentions counted (under callgrind, about a second each).
pub const MENTIONS: usize = 50;
/// Answered mentions timed without valgrind (dense; at a pace, as many as
/// under callgrind).
const NATIVE_MENTIONS: usize = 300;

/// With `ACP_BRIDGE_BENCH_PACE_MS=N`, N ms between a reply and the next
/// mention. Back to back, one conversation is a chat of ten turns a
/// second, and each turn's thread context read (relays filter by whole
/// seconds) returns that second's earlier turns, which the daemon reads
/// and leaves out; past a second apart it returns what a chat at a human
/// pace holds: the bot's last answer and the mention.
fn pace() -> Option<std::time::Duration> {
    std::env::var("ACP_BRIDGE_BENCH_PACE_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(std::time::Duration::from_millis)
}

/// Where the bench's one conversation is held.
#[derive(Clone, Copy)]
pub enum Room {
    /// A NIP-29 group chat: kind 9 mentions with an `h` tag, in the clear.
    Nip29,
    /// A Marmot encrypted group of the owner and the bot (kind 445s).
    Marmot,
}

impl Room {
    /// The room's name in the bench's file names.
    fn name(self) -> &'static str {
        match self {
            Room::Nip29 => "nip29",
            Room::Marmot => "marmot",
        }
    }

    /// The daemon's flags this room needs.
    fn flags(self) -> &'static [&'static str] {
        match self {
            Room::Nip29 => &[],
            Room::Marmot => &["--marmot"],
        }
    }

    /// The owner (`owner_keys`, whom the bot hears) in this room with the
    /// running `daemon`'s bot, ready to mention it. A Marmot group's member
    /// keeps its MLS state in `dir`.
    async fn enter(
        self,
        relay: &EmbeddedRelay,
        owner_keys: Keys,
        daemon: &DaemonProcess,
        dir: &Path,
    ) -> Result<Asker, String> {
        let bot = daemon.bot.public_key();
        Ok(match self {
            Room::Nip29 => Asker::Nip29(Box::new(Owner::connect(relay, owner_keys, bot).await), bot),
            Room::Marmot => Asker::Marmot(Box::new(Member::invite_bot(relay, owner_keys, bot, dir).await?)),
        })
    }
}

/// Who mentions the bot, in its room.
/// (Boxed: an owner and a member differ much in size.)
enum Asker {
    Nip29(Box<Owner>, PublicKey),
    Marmot(Box<Member>),
}

impl Asker {
    /// Mentions the bot with `text` and waits for its answer.
    async fn round_trip(&mut self, text: &str) {
        match self {
            Asker::Nip29(owner, bot) => {
                owner.round_trip(bot, "bench", text).await;
            }
            Asker::Marmot(member) => member.round_trip(text).await,
        }
    }

    /// `count` mentions in the bench's one conversation, each once the
    /// last was answered (and the pace, if any, passed).
    async fn converse(&mut self, label: &str, count: usize) {
        for turn in 0..count {
            if let Some(pace) = pace() {
                tokio::time::sleep(pace).await;
            }
            self.round_trip(&format!("{label} {turn}")).await;
        }
    }
}

/// A relay, the daemon (under `wrapper`, if any) in `room` at zero think
/// time, and its owner in the room, warmed up: where both counts start.
struct Stage {
    relay: EmbeddedRelay,
    daemon: DaemonProcess,
    asker: Asker,
}

impl Stage {
    async fn start(room: Room, wrapper: &[&str], dir: &Path) -> Result<Stage, String> {
        let relay = EmbeddedRelay::start(None)
            .await
            .map_err(|error| error.to_string())?;
        let owner_keys = Keys::generate();
        let daemon = DaemonProcess::spawn_under(
            Keys::generate(),
            wrapper,
            &relay,
            &owner_keys,
            &crate::agent_launch::AgentLaunch::scripted(crate::harness::ZERO_THINK_TIME),
            room.flags(),
        );
        daemon.ready().await;
        let mut asker = room.enter(&relay, owner_keys, &daemon, dir).await?;
        // In a Marmot group the first answer is also the bot's join.
        asker.converse("warm up", WARM_UP).await;
        Ok(Stage { relay, daemon, asker })
    }

    fn stop(self) {
        drop(self.daemon);
        self.relay.shutdown();
    }
}

/// Functions listed from the profile, by inclusive cost.
const PROFILE_LINES: usize = 30;

/// What one answered mention costs the daemon.
pub struct PerMention {
    pub instructions: u64,
    /// The top functions by inclusive instructions (callgrind_annotate).
    pub profile: String,
    /// The callgrind dump, for `callgrind_annotate` by hand.
    pub dump: PathBuf,
}

/// Instructions per answered mention in `room` and where they go, or why
/// they could not be counted.
pub async fn per_mention(room: Room) -> Result<PerMention, String> {
    let dir = temp_dir(&format!("callgrind-{}", room.name()));
    let out = dir.join("callgrind.out");
    let out_flag = format!("--callgrind-out-file={}", out.display());
    let wrapper = [
        "valgrind",
        "--tool=callgrind",
        "--trace-children=no",
        out_flag.as_str(),
    ];
    let mut stage = Stage::start(room, &wrapper, &dir).await?;
    let pid = stage.daemon.child.id().to_string();
    callgrind_control("-z", &pid)?;
    stage.asker.converse("turn", MENTIONS).await;
    callgrind_control("-d", &pid)?;
    stage.stop();
    let dump = first_dump(&dir, &out)?;
    let total = total_instructions(&dump)?;
    Ok(PerMention {
        instructions: total / MENTIONS as u64,
        profile: profile(&dump)?,
        dump,
    })
}

/// Context switches of all threads, voluntary (a thread went to sleep and
/// was woken: the wake-ups) and involuntary (preempted, which the machine's
/// other load decides), and CPU time, per answered mention in `room` of a
/// daemon run natively, after the same warm-up.
pub async fn wakeups_per_mention(room: Room) -> (f64, f64, std::time::Duration) {
    let dir = temp_dir(&format!("natively-{}", room.name()));
    let mut stage = Stage::start(room, &[], &dir).await.expect("the native stage");
    let pid = stage.daemon.child.id();
    let mentions = if pace().is_some() {
        MENTIONS
    } else {
        NATIVE_MENTIONS
    };
    let (switches_before, cpu_before) = (context_switches(pid), cpu_time(pid));
    stage.asker.converse("turn", mentions).await;
    let (switches_after, cpu_after) = (context_switches(pid), cpu_time(pid));
    stage.stop();
    let per_mention = |after: u64, before: u64| after.saturating_sub(before) as f64 / mentions as f64;
    (
        per_mention(switches_after.0, switches_before.0),
        per_mention(switches_after.1, switches_before.1),
        cpu_after.saturating_sub(cpu_before) / mentions as u32,
    )
}

/// Voluntary and involuntary context switches of every thread of `pid` so
/// far (a thread that ended takes its count with it: the daemon's threads
/// live as long as it does).
pub fn context_switches(pid: u32) -> (u64, u64) {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten();
    let count = |status: &str, key: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|count| count.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    tasks.fold((0, 0), |(voluntary, involuntary), task| {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        (
            voluntary + count(&status, "voluntary_ctxt_switches:"),
            involuntary + count(&status, "nonvoluntary_ctxt_switches:"),
        )
    })
}

fn callgrind_control(option: &str, pid: &str) -> Result<(), String> {
    let done = Command::new("callgrind_control")
        .args([option, pid])
        .output()
        .map_err(|error| format!("callgrind_control: {error}"))?;
    if done.status.success() {
        Ok(())
    } else {
        Err(format!(
            "callgrind_control {option}: {}",
            String::from_utf8_lossy(&done.stderr)
        ))
    }
}

/// The file of the first `callgrind_control -d` dump (`<out>.1`).
fn first_dump(dir: &Path, out: &Path) -> Result<PathBuf, String> {
    let name = format!(
        "{}.1",
        out.file_name().and_then(|name| name.to_str()).unwrap_or_default()
    );
    let dump = dir.join(name);
    dump.exists()
        .then_some(dump)
        .ok_or_else(|| format!("no callgrind dump in {}", dir.display()))
}

/// The `summary:` (or `totals:`) line of a callgrind output file.
fn total_instructions(path: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
    text.lines()
        .find_map(|line| {
            line.strip_prefix("summary:")
                .or_else(|| line.strip_prefix("totals:"))
        })
        .and_then(|counts| counts.split_whitespace().next())
        .and_then(|ir| ir.parse().ok())
        .ok_or_else(|| format!("no instruction total in {}", path.display()))
}

/// The functions with the highest inclusive cost in the dump.
fn profile(dump: &Path) -> Result<String, String> {
    let annotated = Command::new("callgrind_annotate")
        .arg("--inclusive=yes")
        .arg(dump)
        .output()
        .map_err(|error| format!("callgrind_annotate: {error}"))?;
    let text = String::from_utf8_lossy(&annotated.stdout);
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|line| !line.contains("file:function"))
        .skip(2)
        .take(PROFILE_LINES)
        .collect();
    Ok(lines.join("\n"))
}
