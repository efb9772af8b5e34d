//! The faults a test can order: bytes on stdout that are not frames, updates
//! for sessions nobody opened, and an abrupt exit. Kept apart so the
//! protocol code reads as a well-behaved agent.

use crate::acp::{self, update};
use crate::wire::{ClientGone, Outbox};

/// Printed before every round under `--garbage-stdout`.
pub(crate) const GARBAGE_LINE: &str = "this is not json {{{";

/// Exit code of a `[crash-after=N]` crash.
const CRASH_EXIT_CODE: i32 = 3;

const HUGE_LINE_HEAD: &str = r#"{"jsonrpc":"2.0","method":"x","params":""#;
const HUGE_LINE_TAIL: &str = r#""}"#;

/// One line of exactly `bytes` bytes (newline not counted): a JSON-RPC
/// notification padded with `A`s, or only `A`s when `bytes` is too small
/// for the envelope. Built in place in one allocation, so a huge line is
/// held once.
pub(crate) fn huge_line(bytes: usize) -> String {
    let envelope = HUGE_LINE_HEAD.len() + HUGE_LINE_TAIL.len();
    let mut line = String::with_capacity(bytes);
    if bytes < envelope {
        line.extend(std::iter::repeat_n('A', bytes));
        return line;
    }
    line.push_str(HUGE_LINE_HEAD);
    line.extend(std::iter::repeat_n('A', bytes - envelope));
    line.push_str(HUGE_LINE_TAIL);
    line
}

/// The text of an update for a session the client never opened.
pub(crate) const FOREIGN_TEXT: &str = "not yours\n";

/// Streams `count` updates, each for a session id of its own that no
/// `session/new` answered (`foreign-0`, `foreign-1`, …).
pub(crate) async fn foreign_updates(outbox: &Outbox, count: u32) -> Result<(), ClientGone> {
    for n in 0..count {
        let session_id = format!("foreign-{n}");
        acp::send_update(outbox, &session_id, update::agent_text(FOREIGN_TEXT)).await?;
    }
    Ok(())
}

/// Ends the process at once: no answer, no run cleared, no flush beyond the
/// frames already written. This is the point: the client must cope.
pub(crate) fn crash(session_id: &str, rounds: u32) -> ! {
    log!("session {session_id}: crashing after {rounds} round(s) as scripted");
    std::process::exit(CRASH_EXIT_CODE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_line_has_the_exact_length_and_stays_json() {
        let line = huge_line(1000);
        assert_eq!(line.len(), 1000);
        let frame: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(frame["method"], "x");
        assert_eq!(huge_line(5), "AAAAA");
    }
}
