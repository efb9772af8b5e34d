//! The memory of a process and of everything it started (its agents, the
//! CLIs they spawn, their node runtimes), read from `/proc`.
//!
//! Each process is counted by its PSS (`Pss:` of `/proc/PID/smaps_rollup`):
//! a page shared by N processes counts 1/N in each, so the sum over the
//! tree is what the tree holds, counting the pages several `claude` CLIs
//! share (the runtime's code, the CLI's bundle) once. The summed RSS
//! (`Rss:`, the same as `VmRSS` in `/proc/PID/status`) is read beside it:
//! it counts a shared page in every process that maps it, so it overstates a
//! tree of like processes, and it is what `ps` and `top` show.
//!
//! Parsing is pure (and unit-tested); [`sample`] is the only part that
//! reads `/proc`. A process that exits between the listing and the read
//! counts as zero.

use std::collections::{BTreeMap, HashMap};

/// Memory of one process, or a sum, in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    pub rss_kib: u64,
    pub pss_kib: u64,
}

impl std::ops::AddAssign for Memory {
    fn add_assign(&mut self, other: Memory) {
        self.rss_kib += other.rss_kib;
        self.pss_kib += other.pss_kib;
    }
}

/// A process tree's memory at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeMemory {
    /// Processes in the tree, the root included.
    pub processes: usize,
    pub total: Memory,
    /// The root's own (the daemon's).
    pub root: Memory,
    /// Below the root, by command name (`comm`): how many processes, and
    /// their memory.
    pub by_command: BTreeMap<String, (usize, Memory)>,
}

impl TreeMemory {
    /// Processes below the root whose command name is `command`.
    pub fn count_of(&self, command: &str) -> usize {
        self.by_command.get(command).map_or(0, |(count, _)| *count)
    }

    /// Adds one process below the root.
    fn add(&mut self, command: &str, memory: Memory) {
        self.processes += 1;
        self.total += memory;
        let entry = self.by_command.entry(command.to_owned()).or_default();
        entry.0 += 1;
        entry.1 += memory;
    }
}

/// A process as the tree walk needs it: its parent and command name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessStat {
    pub parent: u32,
    pub command: String,
}

/// The parent and command name from a `/proc/PID/stat` line. The command
/// is between the first `(` and the last `)` (it may hold spaces and
/// parentheses); the parent is the second field after it.
pub fn parse_stat(stat: &str) -> Option<ProcessStat> {
    let (head, rest) = stat.rsplit_once(')')?;
    let (_, command) = head.split_once('(')?;
    let parent = rest.split_whitespace().nth(1)?.parse().ok()?;
    Some(ProcessStat {
        parent,
        command: command.to_owned(),
    })
}

/// `Rss:` and `Pss:` of a `/proc/PID/smaps_rollup` (missing lines count 0).
pub fn parse_smaps_rollup(text: &str) -> Memory {
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .unwrap_or(0)
    };
    Memory {
        rss_kib: field("Rss:"),
        pss_kib: field("Pss:"),
    }
}

/// `root` and every process below it, root first, from each process's
/// parent.
pub fn tree_of(root: u32, processes: &HashMap<u32, ProcessStat>) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (pid, stat) in processes {
        children.entry(stat.parent).or_default().push(*pid);
    }
    let mut tree = vec![root];
    let mut next = 0;
    while let Some(pid) = tree.get(next).copied() {
        let mut below = children.remove(&pid).unwrap_or_default();
        below.sort_unstable();
        tree.extend(below);
        next += 1;
    }
    tree
}

/// Sums the memory of the processes `tree` (from [`tree_of`]: the root
/// first), given every process's stat and a way to read one process's
/// memory.
pub fn sum_tree(
    tree: &[u32],
    processes: &HashMap<u32, ProcessStat>,
    memory_of: impl Fn(u32) -> Memory,
) -> TreeMemory {
    let mut sum = TreeMemory::default();
    let Some((root, below)) = tree.split_first() else {
        return sum;
    };
    sum.root = memory_of(*root);
    sum.processes = 1;
    sum.total = sum.root;
    for pid in below {
        let command = processes.get(pid).map_or("?", |stat| stat.command.as_str());
        sum.add(command, memory_of(*pid));
    }
    sum
}

/// The memory of `root` and every process below it, now, with their pids.
pub fn sample(root: u32) -> (TreeMemory, Vec<u32>) {
    let mut processes = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if let Some(stat) = parse_stat(&stat) {
            processes.insert(pid, stat);
        }
    }
    let tree = tree_of(root, &processes);
    let memory = sum_tree(&tree, &processes, |pid| {
        parse_smaps_rollup(&std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default())
    });
    (memory, tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(parent: u32, command: &str) -> ProcessStat {
        ProcessStat {
            parent,
            command: command.to_owned(),
        }
    }

    #[test]
    fn a_stat_line_gives_the_parent_and_a_command_with_spaces_and_parentheses() {
        let line = "4242 (claude (v2) x) S 4100 4242 4242 0 -1 4194560 1 0 0 0 3 1 0 0 20 0 11 0";
        assert_eq!(parse_stat(line), Some(stat(4100, "claude (v2) x")));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn smaps_rollup_gives_rss_and_pss_in_kib() {
        let text = "55d0c0000000-7ffc00000000 ---p 00000000 00:00 0   [rollup]\n\
                    Rss:              204800 kB\n\
                    Pss:              150123 kB\n\
                    Pss_Anon:         120000 kB\n\
                    Shared_Clean:      60000 kB\n";
        assert_eq!(
            parse_smaps_rollup(text),
            Memory {
                rss_kib: 204_800,
                pss_kib: 150_123
            }
        );
        assert_eq!(parse_smaps_rollup(""), Memory::default());
    }

    #[test]
    fn the_tree_holds_children_and_grandchildren_and_no_one_else() {
        let processes = HashMap::from([
            (1, stat(0, "init")),
            (10, stat(1, "acp-bridge")),
            (20, stat(10, "node")),
            (30, stat(20, "claude")),
            (31, stat(20, "claude")),
            (40, stat(30, "rg")),
            (50, stat(1, "another-daemon")),
            (51, stat(50, "claude")),
        ]);
        assert_eq!(tree_of(10, &processes), vec![10, 20, 30, 31, 40]);
        assert_eq!(tree_of(99, &processes), vec![99], "a gone root is counted alone");
    }

    #[test]
    fn the_sum_adds_every_process_of_the_tree_the_root_apart() {
        let processes = HashMap::from([
            (10, stat(1, "acp-bridge")),
            (15, stat(10, "acp-bridge")),
            (20, stat(10, "node")),
            (30, stat(20, "claude")),
            (31, stat(20, "claude")),
            (51, stat(1, "claude")),
        ]);
        let memory_of = |pid: u32| Memory {
            rss_kib: u64::from(pid) * 10,
            pss_kib: u64::from(pid),
        };
        let tree = sum_tree(&tree_of(10, &processes), &processes, memory_of);
        assert_eq!(tree.processes, 5);
        assert_eq!(
            tree.total,
            Memory {
                rss_kib: 1060,
                pss_kib: 106
            }
        );
        assert_eq!(
            tree.root,
            Memory {
                rss_kib: 100,
                pss_kib: 10
            }
        );
        assert_eq!(tree.count_of("acp-bridge"), 1, "the agent, not the daemon");
        assert_eq!(tree.count_of("claude"), 2);
        assert_eq!(
            tree.by_command["claude"].1,
            Memory {
                rss_kib: 610,
                pss_kib: 61
            }
        );
        assert_eq!(tree.count_of("rg"), 0);
    }
}
