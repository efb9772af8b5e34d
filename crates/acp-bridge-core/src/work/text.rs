//! The work put in words: the interim progress text, the `!status` lines
//! and the account appended to the answer. Every text is built line by
//! line within [`MAX_TEXT_BYTES`]; lines that do not fit are counted in a
//! closing `… N more` line rather than cut mid-word.

use std::fmt::Write as _;
use std::str::FromStr;
use std::time::Duration;

use super::WorkLog;
use super::calls::Totals;
use super::diff_lines::LineCounts;

/// Longest text any of these is, in bytes.
pub(super) const MAX_TEXT_BYTES: usize = 1500;
/// Names a short summary lists before `and N more`.
const SHORT_NAMES: usize = 3;

/// How much of the work the answer tells (`--work-summary`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkSummary {
    /// Nothing.
    None,
    /// One or two lines: totals and the first few names.
    #[default]
    Short,
    /// Every file and command, bounded.
    Full,
}

impl WorkSummary {
    pub const NAMES: [&'static str; 3] = ["none", "short", "full"];

    pub fn as_str(self) -> &'static str {
        match self {
            WorkSummary::None => "none",
            WorkSummary::Short => "short",
            WorkSummary::Full => "full",
        }
    }
}

impl FromStr for WorkSummary {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "none" => Ok(WorkSummary::None),
            "short" => Ok(WorkSummary::Short),
            "full" => Ok(WorkSummary::Full),
            other => Err(format!("work summary {other:?} is not one of none, short, full")),
        }
    }
}

/// Lines gathered within [`MAX_TEXT_BYTES`], with room kept for a last
/// line and the `… N more` marker.
struct Lines {
    text: String,
    budget: usize,
    left_out: usize,
}

impl Lines {
    /// Room for `reserve` bytes kept for what must close the text.
    fn new(reserve: usize) -> Self {
        Lines {
            text: String::new(),
            budget: MAX_TEXT_BYTES.saturating_sub(reserve + MORE_MARKER_BYTES),
            left_out: 0,
        }
    }

    fn push(&mut self, line: &str) {
        let needed = line.len() + usize::from(!self.text.is_empty());
        if self.left_out == 0 && self.text.len() + needed <= self.budget {
            if !self.text.is_empty() {
                self.text.push('\n');
            }
            self.text.push_str(line);
        } else {
            self.left_out += 1;
        }
    }

    /// The text, with the marker if lines were left out, then `last`.
    fn finish(mut self, last: Option<&str>) -> String {
        if self.left_out > 0 {
            let _ = write!(self.text, "\n… {} more", self.left_out);
        }
        if let Some(last) = last {
            if !self.text.is_empty() {
                self.text.push('\n');
            }
            self.text.push_str(last);
        }
        self.text
    }
}

/// Room the `… N more` line takes.
const MORE_MARKER_BYTES: usize = "\n… 18446744073709551615 more".len();

pub(super) fn progress(work: &WorkLog, elapsed: Duration) -> String {
    let now = now_line(work);
    let mut lines = Lines::new(now.as_ref().map_or(0, |line| line.len() + 1));
    lines.push(&format!("Working for {}", human(elapsed)));
    push_plan(&mut lines, work);
    lines.finish(now.as_deref())
}

pub(super) fn status(work: &WorkLog) -> Option<String> {
    let calls = work.calls.folded.calls as usize + work.calls.kept.len();
    if work.plan.is_empty() && calls == 0 {
        return None;
    }
    let tally = match calls {
        0 => String::new(),
        1 => "1 tool call so far".to_owned(),
        calls => format!("{calls} tool calls so far"),
    };
    let last = match now_line(work) {
        Some(now) if tally.is_empty() => now,
        Some(now) => format!("{now} · {tally}"),
        None => tally,
    };
    let mut lines = Lines::new(last.len() + 1);
    if !work.plan.is_empty() {
        lines.push("Plan:");
    }
    push_plan(&mut lines, work);
    Some(lines.finish((!last.is_empty()).then_some(last.as_str())))
}

fn push_plan(lines: &mut Lines, work: &WorkLog) {
    for entry in &work.plan {
        lines.push(&format!("{} {}", entry.status.mark(), entry.content));
    }
}

fn now_line(work: &WorkLog) -> Option<String> {
    work.running()
        .map(|call| format!("Now: {} ({})", call.title, call.kind.as_str()))
}

pub(super) fn summary(totals: &Totals, detail: WorkSummary) -> Option<String> {
    if totals.calls == 0 {
        return None;
    }
    match detail {
        WorkSummary::None => None,
        WorkSummary::Short => Some(short(totals)),
        WorkSummary::Full => Some(full(totals)),
    }
}

fn short(totals: &Totals) -> String {
    let mut lines = Vec::new();
    let names = display_paths(totals.files.keys().map(String::as_str));
    let files = totals.files.len() as u64;
    if files > 0 {
        let mut line = format!(
            "Changed {} ({}): {}",
            plural(files, "file"),
            signed(totals.lines()),
            first_few(names.iter().map(String::as_str), files)
        );
        if totals.unnamed_edits > 0 {
            let _ = write!(line, ", and {}", unnamed_edits(totals));
        }
        lines.push(line);
    }
    let mut last = Vec::new();
    if totals.command_count() > 0 {
        last.push(format!(
            "Ran {}: {}",
            plural(totals.command_count(), "command"),
            first_few(
                totals.commands.iter().map(|command| command.text.as_str()),
                totals.command_count()
            )
        ));
    }
    last.push(format!("Tools: {}", tool_counts(totals)));
    lines.push(last.join(" · "));
    let mut text = Lines::new(0);
    for line in &lines {
        text.push(&super::clip(line, MAX_TEXT_BYTES / 2));
    }
    text.finish(None)
}

fn full(totals: &Totals) -> String {
    let tools = format!("Tools: {}", tool_counts(totals));
    let mut lines = Lines::new(tools.len() + 1);
    if !totals.files.is_empty() {
        lines.push(&format!("Files changed ({}):", signed(totals.lines())));
        let names = display_paths(totals.files.keys().map(String::as_str));
        for (name, counts) in names.iter().zip(totals.files.values()) {
            lines.push(&format!("  {name} {}", signed(*counts)));
        }
        if totals.unnamed_edits > 0 {
            lines.push(&format!("  {}", unnamed_edits(totals)));
        }
    }
    if totals.command_count() > 0 {
        lines.push("Commands run:");
        for command in &totals.commands {
            let failed = if command.failed { " (failed)" } else { "" };
            lines.push(&format!("  {}{failed}", command.text));
        }
        if totals.unnamed_commands > 0 {
            lines.push(&format!("  {} more", plural(totals.unnamed_commands, "command")));
        }
    }
    lines.finish(Some(&tools))
}

/// Edits whose files were not kept by name (a turn past its bounds).
fn unnamed_edits(totals: &Totals) -> String {
    format!(
        "{} to files not named ({})",
        plural(totals.unnamed_edits, "edit"),
        signed(totals.unnamed_lines)
    )
}

/// `edit ×2, execute ×1`, most used first.
fn tool_counts(totals: &Totals) -> String {
    let mut tools: Vec<(&str, u64)> = totals.tools.iter().map(|(kind, count)| (*kind, *count)).collect();
    tools.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    tools
        .iter()
        .map(|(kind, count)| format!("{kind} ×{count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The first [`SHORT_NAMES`] of `names`, then `and N more` of `total`.
fn first_few<'a>(names: impl Iterator<Item = &'a str>, total: u64) -> String {
    let shown: Vec<&str> = names.take(SHORT_NAMES).collect();
    let more = total.saturating_sub(shown.len() as u64);
    let mut text = shown.join(", ");
    if more > 0 {
        let _ = write!(text, " and {more} more");
    }
    text
}

/// `+5 −3` (a minus sign, not a hyphen).
fn signed(counts: LineCounts) -> String {
    format!("+{} −{}", counts.added, counts.removed)
}

fn plural(count: u64, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// The paths without the directories they all share: the agent names
/// absolute paths, whose leading part (the operator's home, the project's
/// place) says nothing to the thread. One file shows its name.
fn display_paths<'a>(paths: impl Iterator<Item = &'a str> + Clone) -> Vec<String> {
    let dirs = |path: &'a str| path.rsplit_once('/').map_or("", |(dir, _)| dir);
    let mut common: Option<&str> = None;
    for path in paths.clone() {
        let dir = dirs(path);
        common = Some(match common {
            None => dir,
            Some(common) => shared_dir(common, dir),
        });
    }
    let strip = common.map_or(0, |common| if common.is_empty() { 0 } else { common.len() + 1 });
    paths
        .map(|path| {
            path.get(strip..)
                .filter(|rest| !rest.is_empty())
                .unwrap_or(path)
                .to_owned()
        })
        .collect()
}

/// The longest directory both `a` and `b` are in (whole components).
fn shared_dir<'a>(a: &'a str, b: &str) -> &'a str {
    let mut end = 0;
    for ((index, x), y) in a
        .split('/')
        .scan(0, |at, part| {
            let start = *at;
            *at += part.len() + 1;
            Some((start, part))
        })
        .zip(b.split('/'))
    {
        if x != y {
            break;
        }
        end = index + x.len();
    }
    &a[..end]
}

/// `45 s`, `1 min 5 s`, `2 h 3 min`.
fn human(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min {} s", seconds / 60, seconds % 60),
        _ => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
    }
}
