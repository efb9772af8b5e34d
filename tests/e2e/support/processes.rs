//! Processes as this test sees them in the host's `/proc`.
//!
//! A daemon run as root (CI) starts each agent through a keeper and an init
//! of a PID namespace of its own, both forks of the daemon: its children
//! are keepers, not agents, and pids an agent reports about itself are
//! those of its namespace. The agent's own process is found here instead:
//! below the daemon, running the scripted agent.

/// Every process below `ancestor`, by the parent links of `/proc`.
pub fn descendants(ancestor: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (_, rest) = stat.rsplit_once(") ")?;
            Some((pid, rest.split_whitespace().nth(1)?.parse().ok()?))
        })
        .collect();
    let mut found = vec![ancestor];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(
            parents
                .iter()
                .filter(|(_, ppid)| *ppid == parent)
                .map(|(pid, _)| *pid),
        );
        next += 1;
    }
    found.remove(0);
    found
}

/// The processes below `daemon` that run the scripted agent
/// (`acp-bridge scripted-agent …`), in pid order.
pub fn scripted_agents_below(daemon: u32) -> Vec<u32> {
    let mut agents: Vec<u32> = descendants(daemon)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                cmdline.split(|byte| *byte == 0).nth(1) == Some(b"scripted-agent".as_slice())
            })
        })
        .collect();
    agents.sort_unstable();
    agents
}
