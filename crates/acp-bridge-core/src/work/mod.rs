//! One turn's work as the agent reports it: its plan, its tool calls, the
//! files their diffs change and the commands they run. Pure: the driver
//! feeds it the turn's `plan` and tool call updates (and `now`), and reads
//! back what to log, what an interim progress message says, what `!status`
//! shows and the short account appended to the answer.
//!
//! It owns no clock, no log and no message: it keeps a bounded record
//! ([`plan::MAX_PLAN_ENTRIES`] entries, [`calls::MAX_TOOL_CALLS`] calls,
//! each text clipped) however long the turn runs.

mod calls;
mod diff_lines;
mod plan;
mod text;

use std::time::{Duration, Instant};

use acp_protocol::ToolCall;

pub use calls::{ToolStatus, ToolStep, ToolView};
pub use diff_lines::LineCounts;
pub use plan::{PlanEntry, PlanStatus};
pub use text::WorkSummary;

/// What a turn's agent has planned and done so far.
#[derive(Debug, Clone, Default)]
pub struct WorkLog {
    plan: Vec<PlanEntry>,
    calls: calls::Calls,
    milestone: u64,
}

impl WorkLog {
    /// Takes in a `plan` update's `entries` (the whole plan, replacing the
    /// last); not an array: ignored.
    pub fn observe_plan(&mut self, entries: &serde_json::Value) {
        let Some(entries) = plan::parse(entries) else {
            return;
        };
        if plan::advances(&self.plan, &entries) {
            self.milestone += 1;
        }
        self.plan = entries;
    }

    /// Takes in a `tool_call` or a `tool_call_update` (merged into the
    /// call of the same id); says when the call is first seen or first
    /// reaches completed or failed.
    pub fn observe_tool(&mut self, call: &ToolCall, now: Instant) -> Option<ToolStep> {
        self.calls.observe(call, now)
    }

    pub fn plan(&self) -> &[PlanEntry] {
        &self.plan
    }

    /// The newest call not yet over.
    pub fn running(&self) -> Option<&ToolView> {
        self.calls
            .kept
            .iter()
            .rev()
            .find(|call| !call.ended())
            .map(|call| &call.view)
    }

    /// A count that grows only when the plan materially advances (an entry
    /// starts or completes, entries are added, removed or reworded), never
    /// on tool calls: progress is worth a new message only when it moves.
    pub fn milestone(&self) -> u64 {
        self.milestone
    }

    /// What an interim progress message says after `elapsed`: how long,
    /// the plan as a checklist, the call now running. Never empty, at most
    /// [`text::MAX_TEXT_BYTES`].
    pub fn progress_text(&self, elapsed: Duration) -> String {
        text::progress(self, elapsed)
    }

    /// Tool calls over (completed or failed) so far, for the live
    /// activity view.
    pub fn tools_done(&self) -> u64 {
        let kept = self.calls.kept.iter().filter(|call| call.ended()).count();
        self.calls.folded.calls + kept as u64
    }

    /// The short account of the work appended to the answer; `None` when
    /// no tool was called (or `detail` is `None`).
    pub fn summary(&self, detail: WorkSummary) -> Option<String> {
        text::summary(&self.calls.totals(), detail)
    }

    /// The plan and the call now running, for `!status`; `None` before the
    /// agent has said anything of either.
    pub fn status_text(&self) -> Option<String> {
        text::status(self)
    }
}

/// `text` cut to at most `max` bytes (on a character boundary), with `…`
/// where it was cut.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let end = text.floor_char_boundary(max.saturating_sub('…'.len_utf8()));
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests;
