//! The replies' flags (`--reply-mode`, `--reply-content`,
//! `--no-reactions`, `--max-reply-bytes`, `--work-summary`, and a long
//! turn's progress: `--progress-after`, `--progress-every`,
//! `--activity-every`) and their validation into [`ReplySettings`].

use std::time::Duration;

use acp_bridge_core::work::WorkSummary;
use clap::Args;
use clap::builder::{PossibleValuesParser, TypedValueParser};

use super::{ReplyContent, ReplyMode};
use crate::base::flags::{ConfigError, at_least_one, flag_defaults, longer_than_zero, parse_duration};

/// The replies' flags.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Replies")]
pub struct ReplyArgs {
    /// Who publishes answers.
    #[arg(long, env = "ACP_BRIDGE_REPLY_MODE", value_enum, default_value = "daemon")]
    pub reply_mode: ReplyMode,

    /// What a reply carries: answer or full
    ///
    /// What a reply carries: the agent's answer, or everything it wrote
    /// (its narration between tool calls too).
    #[arg(long, env = "ACP_BRIDGE_REPLY_CONTENT", value_enum, default_value = "answer")]
    pub reply_content: ReplyContent,

    /// Do not react (NIP-25) to mentions
    ///
    /// Do not react (NIP-25) to accepted mentions.
    #[arg(long, env = "ACP_BRIDGE_NO_REACTIONS")]
    pub no_reactions: bool,

    /// The agent's text kept for one reply, at most
    ///
    /// Most of the agent's text kept for one reply; past it the text is
    /// dropped and the reply says it was truncated. Long replies go out as
    /// a numbered series of events.
    #[arg(long, env = "ACP_BRIDGE_MAX_REPLY_BYTES", default_value_t = acp_client::DEFAULT_MAX_TEXT_BYTES)]
    pub max_reply_bytes: usize,

    /// The account of the agent's work an answer ends with
    ///
    /// The account of the agent's work an answer ends with, below a line:
    /// `short` (files changed with their added and removed lines, commands
    /// run, tools used, in a line or two), `full` (every file and command)
    /// or `none`. Notices carry none, nor does an answer whose turn called
    /// no tool.
    #[arg(
        long,
        env = "ACP_BRIDGE_WORK_SUMMARY",
        default_value = "short",
        value_parser = PossibleValuesParser::new(WorkSummary::NAMES)
            .map(|name| name.parse::<WorkSummary>().expect("a possible value")),
        hide_short_help = true
    )]
    pub work_summary: WorkSummary,

    /// A turn running this long gets an interim progress message (0 = never)
    ///
    /// A turn still running after this long gets one interim progress
    /// message in its thread (what the agent is doing, how long it has
    /// been working), replaced as the work advances and deleted once the
    /// answer is out (docs/progress.md). 0 = no progress messages.
    #[arg(long, env = "ACP_BRIDGE_PROGRESS_AFTER", default_value = "20s", value_parser = parse_duration)]
    pub progress_after: Duration,

    /// A newer progress message at most this often, when the work advanced
    ///
    /// After the first progress message of a turn, a newer one (replacing
    /// it) goes out only when the agent's plan moved on, and at most this
    /// often.
    #[arg(long, env = "ACP_BRIDGE_PROGRESS_EVERY", default_value = "60s", value_parser = parse_duration)]
    pub progress_every: Duration,

    /// How often a running turn's ephemeral activity event goes out (0 = never)
    ///
    /// While a turn runs in a public thread, an ephemeral activity event
    /// (kind 25910: its plan, its running tool, how long it has worked)
    /// goes out this often, for clients that show live activity
    /// (docs/progress.md). 0 = no activity events.
    #[arg(long, env = "ACP_BRIDGE_ACTIVITY_EVERY", default_value = "5s", value_parser = parse_duration, hide_short_help = true)]
    pub activity_every: Duration,
}

impl Default for ReplyArgs {
    fn default() -> Self {
        flag_defaults()
    }
}

/// What replies carry and who publishes them: [`ReplyArgs`], checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplySettings {
    /// `--reply-mode`.
    pub mode: ReplyMode,
    /// `--reply-content`.
    pub content: ReplyContent,
    /// Not `--no-reactions`: accepted mentions get a reaction.
    pub reactions: bool,
    /// `--max-reply-bytes`: the agent's text kept for one reply, at most.
    pub max_reply_bytes: usize,
    /// `--work-summary`.
    pub work_summary: WorkSummary,
    /// A long turn's progress messages and activity events.
    pub progress: ProgressSettings,
}

/// When a running turn shows its progress (see docs/progress.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressSettings {
    /// `--progress-after` (`None`: no progress messages).
    pub after: Option<Duration>,
    /// `--progress-every`: a newer progress message at most this often.
    pub every: Duration,
    /// `--activity-every` (`None`: no activity events).
    pub activity_every: Option<Duration>,
}

impl Default for ReplySettings {
    fn default() -> Self {
        ReplyArgs::default()
            .validate()
            .expect("the flags' defaults are valid")
    }
}

impl ReplyArgs {
    pub(crate) fn validate(&self) -> Result<ReplySettings, ConfigError> {
        Ok(ReplySettings {
            mode: self.reply_mode,
            content: self.reply_content,
            reactions: !self.no_reactions,
            max_reply_bytes: at_least_one("--max-reply-bytes", self.max_reply_bytes)?,
            work_summary: self.work_summary,
            progress: ProgressSettings {
                after: Some(self.progress_after).filter(|after| !after.is_zero()),
                every: longer_than_zero("--progress-every", self.progress_every)?,
                activity_every: Some(self.activity_every).filter(|every| !every.is_zero()),
            },
        })
    }
}
