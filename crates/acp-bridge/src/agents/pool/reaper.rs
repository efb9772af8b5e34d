//! Agent process groups across the daemon's lifetimes.
//!
//! Every agent runs in a process group of its own, and its parent-death
//! signal ends the group's leader the moment the daemon dies, even by
//! SIGKILL (`acp_client`'s process module); where the daemon may create
//! PID namespaces, everything the agent started ends with that leader.
//! Where it may not, the helpers the agent started (shells, MCP servers)
//! are not covered by that signal: under systemd or as a container's main
//! process they go with the daemon's cgroup or namespace, but otherwise
//! they live on. So each agent's group is recorded in the store while the
//! agent runs ([`track`]), and at start-up, before any agent starts, the
//! groups a previous run left are ended ([`sweep`]): SIGTERM, then SIGKILL
//! after a grace.
//!
//! A recorded group is ended only while it is provably still ours: the boot
//! must be the same, and its leader must still run with the recorded start
//! time (a pid reused by a stranger has another). A group whose leader is
//! gone is never signalled, even with members left. Those members may be
//! the agent's helpers, but they may as well be a stranger's: once every
//! process of our group ended, the kernel hands the id out again, and a
//! stranger that got it as its pid may have made it the id of a group of
//! its own and exited, leaving its children behind. Nothing recorded tells
//! the two apart (a helper's start time only bounds it from below), and a
//! daemon running as root must not kill an unrelated group on a guess. The
//! members are logged instead. With the agents in PID namespaces of their
//! own (`acp_client`'s process module) nothing of a group outlives its
//! leader, so nothing is lost; without them, the helpers of a SIGKILLed
//! daemon are the service manager's (systemd's cgroup) or the container's
//! to end.

use std::time::Duration;

use acp_client::AgentClient;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::state::store::{AgentGroup, AgentGroups};

/// How long the sweep lets a leftover group end on SIGTERM before SIGKILL.
const SWEEP_TERM_GRACE: Duration = Duration::from_secs(2);
/// How long the sweep waits for a group to be gone after SIGKILL.
const SWEEP_KILL_GRACE: Duration = Duration::from_secs(1);
/// How often the sweep looks whether a group is gone.
const SWEEP_POLL: Duration = Duration::from_millis(20);
/// Identifies the current boot (`proc(5)`).
const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// Records the process group of a spawned agent, and forgets it once the
/// agent's connection closed (the agent's last handle kills its group).
pub(super) fn track(groups: &AgentGroups, client: &AgentClient) {
    let Some(pgid) = client.pid().and_then(|pid| i32::try_from(pid).ok()) else {
        return;
    };
    let (Some(boot_id), Some(leader)) = (boot_id(), ProcStat::read(pgid)) else {
        tracing::warn!(
            agent = client.name(),
            pgid,
            "cannot identify the agent's process group; it is not recorded"
        );
        return;
    };
    let group = AgentGroup {
        pgid,
        boot_id,
        start_ticks: leader.start_ticks,
    };
    if let Err(error) = groups.record(&group) {
        tracing::warn!(agent = client.name(), pgid, %error, "cannot record the agent's process group");
        return;
    }
    let (groups, exit) = (groups.clone(), client.exit_watch());
    tokio::spawn(async move {
        exit.wait().await;
        if let Err(error) = groups.forget(pgid) {
            tracing::warn!(pgid, %error, "cannot forget an ended agent's process group");
        }
    });
}

/// Ends the agent process groups a previous run left, and forgets every
/// recorded group. Call at start-up, before any agent starts.
pub(crate) async fn sweep(recorded: &AgentGroups) {
    let groups = match recorded.all() {
        Ok(groups) => groups,
        Err(error) => {
            tracing::warn!(%error, "cannot read the agent process groups of the previous run");
            return;
        }
    };
    let boot = boot_id();
    for group in groups {
        match standing(&group, boot.as_deref()) {
            Standing::Ours => end_group(group.pgid).await,
            Standing::LeaderGone => note_leaderless(group.pgid),
            Standing::NotOurs => {}
        }
        if let Err(error) = recorded.forget(group.pgid) {
            tracing::warn!(pgid = group.pgid, %error, "cannot forget a swept agent process group");
        }
    }
}

/// What the sweep knows of a recorded group now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// Its leader is there with the recorded start time: the agent we
    /// started. A leader that died but is not yet reaped (a zombie) still
    /// holds its pid, and so still proves the group.
    Ours,
    /// This boot, but no leader: whatever has the id now is not provably ours.
    LeaderGone,
    /// Another boot, or a stranger that got the leader's pid.
    NotOurs,
}

fn standing(group: &AgentGroup, boot: Option<&str>) -> Standing {
    if boot != Some(group.boot_id.as_str()) {
        return Standing::NotOurs; // a reboot ended that run's processes
    }
    match ProcStat::read(group.pgid) {
        Some(leader) if leader.start_ticks == group.start_ticks => Standing::Ours,
        Some(_) => Standing::NotOurs,
        None => Standing::LeaderGone,
    }
}

/// Logs what is left of a group whose leader is gone; it is not signalled
/// (see the module's doc).
fn note_leaderless(pgid: i32) {
    let left = live_members(pgid);
    if left > 0 {
        tracing::warn!(
            pgid,
            processes = left,
            "a recorded agent process group has processes left but not its leader; they cannot be proven ours and are not signalled"
        );
    }
}

/// SIGTERM to the group, SIGKILL if it outlives the grace; logged when
/// anything was left.
async fn end_group(pgid: i32) {
    let left = live_members(pgid);
    if left == 0 {
        return;
    }
    signal_group(pgid, Signal::SIGTERM);
    let ended_on_term = gone_within(pgid, SWEEP_TERM_GRACE).await;
    if !ended_on_term {
        signal_group(pgid, Signal::SIGKILL);
    }
    let gone = ended_on_term || gone_within(pgid, SWEEP_KILL_GRACE).await;
    if gone {
        tracing::warn!(
            pgid,
            processes = left,
            killed = !ended_on_term,
            "ended an agent process group left by the previous run"
        );
    } else {
        tracing::error!(
            pgid,
            processes = live_members(pgid),
            "an agent process group left by the previous run survived SIGKILL"
        );
    }
}

fn signal_group(pgid: i32, signal: Signal) {
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
        Err(error) => tracing::warn!(pgid, %error, %signal, "cannot signal a leftover agent process group"),
    }
}

async fn gone_within(pgid: i32, grace: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        if live_members(pgid) == 0 {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(SWEEP_POLL).await;
    }
}

/// Processes of group `pgid` that still run (zombies do not: they wait for
/// their new parent to reap them).
fn live_members(pgid: i32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(ProcStat::read)
        .filter(|stat| stat.pgrp == pgid && !matches!(stat.state, 'Z' | 'X'))
        .count()
}

fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string(BOOT_ID_PATH).ok()?;
    Some(id.trim().to_owned()).filter(|id| !id.is_empty())
}

/// What the sweep reads of `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProcStat {
    state: char,
    pgrp: i32,
    start_ticks: u64,
}

impl ProcStat {
    fn read(pid: i32) -> Option<ProcStat> {
        Self::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Fields after the command name, which is in parentheses and may hold
    /// spaces and parentheses itself: state is field 3, the process group
    /// field 5, the start time field 22 (`proc_pid_stat(5)`).
    fn parse(stat: &str) -> Option<ProcStat> {
        let (_, rest) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        Some(ProcStat {
            state: fields.first()?.chars().next()?,
            pgrp: fields.get(2)?.parse().ok()?,
            start_ticks: fields.get(19)?.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_a_command_name_with_spaces_and_parentheses() {
        let stat =
            "4242 (we (ird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(
            ProcStat::parse(stat),
            Some(ProcStat {
                state: 'S',
                pgrp: 4242,
                start_ticks: 987654,
            })
        );
        assert_eq!(ProcStat::parse("4242 (cut"), None);
    }

    #[test]
    fn a_group_is_ours_only_in_the_same_boot_and_with_the_same_leader() {
        let own = ProcStat::read(std::process::id() as i32).expect("own stat");
        let group = |start_ticks| AgentGroup {
            pgid: std::process::id() as i32,
            boot_id: "this boot".to_owned(),
            start_ticks,
        };
        assert_eq!(
            standing(&group(own.start_ticks), Some("this boot")),
            Standing::Ours
        );
        assert_eq!(
            standing(&group(own.start_ticks + 1), Some("this boot")),
            Standing::NotOurs,
            "a reused pid"
        );
        assert_eq!(
            standing(&group(own.start_ticks), Some("another boot")),
            Standing::NotOurs
        );
    }

    /// A real process group: a shell that leads it, waiting for a line on
    /// stdin before it exits, and a `sleep` it started in the background,
    /// which stays in the group after the shell is gone.
    struct Group {
        leader: std::process::Child,
        pgid: i32,
        recorded: AgentGroup,
    }

    impl Group {
        fn start() -> Group {
            use std::os::unix::process::CommandExt;
            let leader = std::process::Command::new("sh")
                .args(["-c", "sleep 600 & read line"])
                .stdin(std::process::Stdio::piped())
                .process_group(0)
                .spawn()
                .expect("sh");
            let pgid = i32::try_from(leader.id()).expect("pid");
            let stat = ProcStat::read(pgid).expect("the leader runs");
            let recorded = AgentGroup {
                pgid,
                boot_id: boot_id().expect("boot id"),
                start_ticks: stat.start_ticks,
            };
            let group = Group {
                leader,
                pgid,
                recorded,
            };
            group.wait_for_members(2);
            group
        }

        /// Waits (on /proc, bounded) until the group has `count` processes.
        fn wait_for_members(&self, count: usize) {
            let deadline = std::time::Instant::now() + MEMBERS_PATIENCE;
            while live_members(self.pgid) != count {
                assert!(
                    std::time::Instant::now() < deadline,
                    "group {} has {} processes, not {count}",
                    self.pgid,
                    live_members(self.pgid)
                );
                std::thread::sleep(SWEEP_POLL);
            }
        }

        /// Ends the leader (it reads its line and exits) and reaps it.
        fn lose_leader(&mut self) {
            use std::io::Write;
            let mut stdin = self.leader.stdin.take().expect("stdin");
            stdin.write_all(b"go\n").expect("write to the leader");
            drop(stdin);
            self.leader.wait().expect("the leader exits");
        }
    }

    impl Drop for Group {
        fn drop(&mut self) {
            let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
            let _ = self.leader.wait();
        }
    }

    /// How long a test waits for processes to appear in or leave a group.
    const MEMBERS_PATIENCE: Duration = Duration::from_secs(10);

    fn store_with(group: &AgentGroup) -> (AgentGroups, crate::state::store::scratch::ScratchDir) {
        let dir = crate::state::store::scratch::ScratchDir::new("sweep");
        let store = crate::state::store::Store::open(dir.path()).expect("store");
        let groups = AgentGroups::new(std::sync::Arc::new(store));
        groups.record(group).expect("record");
        (groups, dir)
    }

    #[tokio::test]
    async fn the_sweep_ends_a_recorded_group_whose_leader_still_runs() {
        let group = Group::start();
        let (store, _dir) = store_with(&group.recorded);
        sweep(&store).await;
        assert_eq!(live_members(group.pgid), 0, "leader and helper ended");
        assert!(store.all().expect("groups").is_empty());
    }

    #[tokio::test]
    async fn the_sweep_never_signals_a_group_whose_leader_is_gone() {
        let mut group = Group::start();
        let (store, _dir) = store_with(&group.recorded);
        group.lose_leader();
        group.wait_for_members(1);
        sweep(&store).await;
        let left = live_members(group.pgid);
        println!("sweep of a recorded group whose leader is gone: {left} of 1 member left running");
        assert_eq!(left, 1, "the member the sweep cannot prove ours is left alone");
        assert!(store.all().expect("groups").is_empty(), "and forgotten");
    }
}
