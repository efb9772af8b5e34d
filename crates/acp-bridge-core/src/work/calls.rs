//! The turn's tool calls: one record per call id, an update merged into
//! its call, each call's facts (files changed, command run) kept small.
//! Past [`MAX_TOOL_CALLS`] the oldest (ended first) are folded into
//! [`Totals`], so the summary still counts them and memory stays bounded.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use acp_protocol::{ToolCall, ToolContent, ToolKind};

use super::clip;
use super::diff_lines::LineCounts;

/// Most tool calls kept one by one.
pub(super) const MAX_TOOL_CALLS: usize = 500;
/// Longest title, command or path kept, in bytes.
const MAX_NAME_BYTES: usize = 200;
/// Most files one call's content may name.
const MAX_DIFFS_PER_CALL: usize = 20;
/// Most distinct files and commands the folded totals keep by name.
const MAX_FOLDED_NAMES: usize = 200;

/// Where a call is (ACP `ToolCallStatus`); unknown reads as pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

impl ToolStatus {
    fn parse(status: &str) -> Self {
        match status {
            "in_progress" => ToolStatus::InProgress,
            "completed" => ToolStatus::Completed,
            "failed" => ToolStatus::Failed,
            _ => ToolStatus::Pending,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Pending => "pending",
            ToolStatus::InProgress => "in_progress",
            ToolStatus::Completed => "completed",
            ToolStatus::Failed => "failed",
        }
    }

    fn ended(self) -> bool {
        matches!(self, ToolStatus::Completed | ToolStatus::Failed)
    }
}

/// What is shown of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolView {
    pub id: String,
    /// The agent's title, or the kind's name when it sent none.
    pub title: String,
    pub kind: ToolKind,
    pub status: ToolStatus,
}

/// A call's first start or its end, for the operator's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolStep {
    /// First seen, not yet over (pending included: it may wait for a
    /// permission, but the agent has begun it).
    Started(ToolView),
    /// Reached completed or failed, `duration` after it was first seen
    /// (zero when it was first seen already over).
    Ended { call: ToolView, duration: Duration },
}

#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) view: ToolView,
    title_given: bool,
    first_seen: Instant,
    /// Files the call's diffs change, in its content's order.
    changes: Vec<(String, LineCounts)>,
    command: Option<String>,
}

impl Call {
    fn new(call: &ToolCall, now: Instant) -> Self {
        Call {
            view: ToolView {
                id: clip(&call.id, MAX_NAME_BYTES),
                title: String::new(),
                kind: ToolKind::Other,
                status: ToolStatus::Pending,
            },
            title_given: false,
            first_seen: now,
            changes: Vec::new(),
            command: None,
        }
    }

    /// Takes in what `update` names; what it leaves out stays.
    fn merge(&mut self, update: &ToolCall) {
        if let Some(kind) = update.kind {
            self.view.kind = kind;
        }
        if let Some(title) = &update.title {
            self.view.title = clip(title, MAX_NAME_BYTES);
            self.title_given = true;
        } else if !self.title_given {
            self.view.title = self.view.kind.as_str().to_owned();
        }
        if let Some(status) = &update.status {
            self.view.status = ToolStatus::parse(status);
        }
        if let Some(content) = &update.content {
            self.changes = content
                .iter()
                .filter_map(|item| match item {
                    ToolContent::Diff {
                        path,
                        old_text,
                        new_text,
                    } => Some((
                        clip(path, MAX_NAME_BYTES),
                        LineCounts::of_diff(old_text.as_deref(), new_text),
                    )),
                    _ => None,
                })
                .take(MAX_DIFFS_PER_CALL)
                .collect();
        }
        if let Some(command) = update.command() {
            self.command = Some(clip(&command, MAX_NAME_BYTES));
        }
    }

    pub(super) fn ended(&self) -> bool {
        self.view.status.ended()
    }
}

/// A command the agent ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Command {
    pub(super) text: String,
    pub(super) failed: bool,
}

/// What the turn's calls did, added up.
#[derive(Debug, Clone, Default)]
pub(super) struct Totals {
    /// Lines changed per file (a failed call changed nothing).
    pub(super) files: BTreeMap<String, LineCounts>,
    /// Edits folded away past the name bound: their lines counted, their
    /// files not (so not told apart either).
    pub(super) unnamed_lines: LineCounts,
    pub(super) unnamed_edits: u64,
    pub(super) commands: Vec<Command>,
    pub(super) unnamed_commands: u64,
    pub(super) tools: BTreeMap<&'static str, u64>,
    pub(super) calls: u64,
}

impl Totals {
    /// Adds `call`; `bounded`: past [`MAX_FOLDED_NAMES`] files or commands,
    /// count without naming (the folded totals live as long as the turn; a
    /// summary's, built from them and the calls kept, is dropped at once).
    pub(super) fn add(&mut self, call: &Call, bounded: bool) {
        let room = |len: usize| !bounded || len < MAX_FOLDED_NAMES;
        self.calls += 1;
        *self.tools.entry(call.view.kind.as_str()).or_default() += 1;
        let failed = call.view.status == ToolStatus::Failed;
        if !failed {
            for (path, counts) in &call.changes {
                if let Some(file) = self.files.get_mut(path) {
                    file.add(*counts);
                } else if room(self.files.len()) {
                    self.files.insert(path.clone(), *counts);
                } else {
                    self.unnamed_lines.add(*counts);
                    self.unnamed_edits += 1;
                }
            }
        }
        if let Some(text) = &call.command {
            if room(self.commands.len()) {
                self.commands.push(Command {
                    text: text.clone(),
                    failed,
                });
            } else {
                self.unnamed_commands += 1;
            }
        }
    }

    /// Lines changed over every file.
    pub(super) fn lines(&self) -> LineCounts {
        let mut all = self.unnamed_lines;
        for counts in self.files.values() {
            all.add(*counts);
        }
        all
    }

    pub(super) fn command_count(&self) -> u64 {
        self.commands.len() as u64 + self.unnamed_commands
    }
}

/// The calls kept one by one, oldest first, and the totals of those
/// folded away.
#[derive(Debug, Clone, Default)]
pub(super) struct Calls {
    pub(super) kept: Vec<Call>,
    pub(super) folded: Totals,
}

impl Calls {
    pub(super) fn observe(&mut self, update: &ToolCall, now: Instant) -> Option<ToolStep> {
        let (index, fresh) = match self.kept.iter().position(|call| call.view.id == update.id) {
            Some(index) => (index, false),
            None => {
                if self.kept.len() >= MAX_TOOL_CALLS {
                    self.fold_oldest();
                }
                self.kept.push(Call::new(update, now));
                (self.kept.len() - 1, true)
            }
        };
        let call = &mut self.kept[index];
        let was_ended = call.ended();
        call.merge(update);
        if was_ended {
            None
        } else if call.ended() {
            Some(ToolStep::Ended {
                call: call.view.clone(),
                duration: now.saturating_duration_since(call.first_seen),
            })
        } else {
            fresh.then(|| ToolStep::Started(call.view.clone()))
        }
    }

    /// Folds the oldest ended call (else the oldest) into the totals.
    fn fold_oldest(&mut self) {
        let index = self.kept.iter().position(Call::ended).unwrap_or(0);
        let call = self.kept.remove(index);
        self.folded.add(&call, true);
    }

    /// Everything done, folded and kept.
    pub(super) fn totals(&self) -> Totals {
        let mut totals = self.folded.clone();
        for call in &self.kept {
            totals.add(call, false);
        }
        totals
    }
}
