//! The last lines an agent wrote to its stderr, kept to say why it failed.
//!
//! An agent that dies before it answers (a bad argument, a missing API
//! key, a crash at start) says why on its stderr, not in the protocol: the
//! client only sees its stdout close. The stderr forwarder
//! ([`crate::process`]) logs every line and also keeps the last
//! [`STDERR_TAIL_LINES`] here, each cut at [`STDERR_TAIL_LINE_BYTES`], so a
//! caller can show the agent's own words. Bounded whatever the agent
//! writes; nothing else is kept.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

/// Lines of an agent's stderr kept, the newest.
pub const STDERR_TAIL_LINES: usize = 20;
/// Bytes kept of one stderr line; the rest is cut (marked with `…`).
pub const STDERR_TAIL_LINE_BYTES: usize = 512;

/// The newest lines of one agent's stderr. Cheap to clone: the forwarder
/// writes, the client reads.
#[derive(Debug, Clone)]
pub(crate) struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    /// True once the agent's stderr reached its end.
    ended: watch::Sender<bool>,
}

impl Default for StderrTail {
    fn default() -> Self {
        StderrTail {
            lines: Arc::default(),
            ended: watch::Sender::new(false),
        }
    }
}

impl StderrTail {
    /// Keeps `line`, dropping the oldest past [`STDERR_TAIL_LINES`].
    pub(crate) fn push(&self, line: &str) {
        let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(cut(line));
    }

    /// The agent's stderr reached its end: nothing more will come.
    pub(crate) fn end(&self) {
        self.ended.send_replace(true);
    }

    /// The kept lines, oldest first, once the stderr ended or `grace` has
    /// passed (an agent that exits has written its last words by then;
    /// one that lives on is not waited for).
    pub(crate) async fn lines(&self, grace: Duration) -> Vec<String> {
        let mut ended = self.ended.subscribe();
        let _ = tokio::time::timeout(grace, ended.wait_for(|ended| *ended)).await;
        let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        lines.iter().cloned().collect()
    }
}

/// `line` within [`STDERR_TAIL_LINE_BYTES`], cut at a character boundary.
fn cut(line: &str) -> String {
    if line.len() <= STDERR_TAIL_LINE_BYTES {
        return line.to_owned();
    }
    let mut end = STDERR_TAIL_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_the_newest_lines_each_cut_to_its_bound() {
        let tail = StderrTail::default();
        for n in 0..STDERR_TAIL_LINES + 5 {
            tail.push(&format!("line {n}"));
        }
        tail.push(&"é".repeat(STDERR_TAIL_LINE_BYTES));
        tail.end();
        let lines = tail.lines(Duration::ZERO).await;
        assert_eq!(lines.len(), STDERR_TAIL_LINES);
        assert_eq!(lines[0], "line 6");
        let long = lines.last().expect("the long line");
        assert!(long.len() <= STDERR_TAIL_LINE_BYTES + '…'.len_utf8() && long.ends_with('…'));
    }
}
