//! How many lines a diff adds and removes, as `git diff --stat` counts them.
//!
//! The agent sends whole texts (`oldText`, `newText`), not hunks, so the
//! lines are compared here: Myers over the two texts' lines, given a
//! deadline so a pathological pair (megabytes of changed lines) costs a
//! bounded time and yields an approximate count rather than a stall.

use std::time::{Duration, Instant};

use similar::{Algorithm, DiffOp, capture_diff_slices_deadline};

/// Longest a diff's comparison may take before it settles for an
/// approximate (still consistent) count.
const DIFF_DEADLINE: Duration = Duration::from_millis(50);

/// Lines added and removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LineCounts {
    pub added: u64,
    pub removed: u64,
}

impl LineCounts {
    /// What turning `old` (`None`: a new file) into `new` adds and removes.
    pub fn of_diff(old: Option<&str>, new: &str) -> Self {
        let old: Vec<&str> = old.map(|text| text.lines().collect()).unwrap_or_default();
        let new: Vec<&str> = new.lines().collect();
        let deadline = Instant::now() + DIFF_DEADLINE;
        let mut counts = LineCounts::default();
        for op in capture_diff_slices_deadline(Algorithm::Myers, &old, &new, Some(deadline)) {
            match op {
                DiffOp::Equal { .. } => {}
                DiffOp::Delete { old_len, .. } => counts.removed += old_len as u64,
                DiffOp::Insert { new_len, .. } => counts.added += new_len as u64,
                DiffOp::Replace { old_len, new_len, .. } => {
                    counts.removed += old_len as u64;
                    counts.added += new_len as u64;
                }
            }
        }
        counts
    }

    pub(super) fn add(&mut self, other: LineCounts) {
        self.added += other.added;
        self.removed += other.removed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_as_git_counts_them() {
        let table: [(Option<&str>, &str, (u64, u64)); 7] = [
            (None, "a\nb\nc\n", (3, 0)),
            (Some("a\nb\nc\n"), "a\nb\nc\n", (0, 0)),
            (Some("a\nb\nc\n"), "a\nB\nc\n", (1, 1)),
            (Some("a\nb\nc\n"), "a\nc\n", (0, 1)),
            (Some("a\nc\n"), "a\nb\nb2\nc\n", (2, 0)),
            (Some("a\nb\n"), "", (0, 2)),
            // No newline at the end is still a line.
            (Some("one"), "one\ntwo", (1, 0)),
        ];
        for (old, new, (added, removed)) in table {
            assert_eq!(
                LineCounts::of_diff(old, new),
                LineCounts { added, removed },
                "{old:?} -> {new:?}"
            );
        }
    }
}
