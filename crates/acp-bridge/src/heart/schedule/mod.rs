//! Work on a schedule (issue 25 §3): prompts the bot runs at times of its
//! own, as turns like any other.
//!
//! A schedule is an entry of the config file (`[[schedule]]`, read by
//! `config_file::schedules`): an id, a cron expression in a time zone
//! ([`when`]), a target conversation ([`target`]), a prompt, and the agent
//! profile its runs use. At each fire time the scheduler ([`scheduler`])
//! journals a mention from the owner with [`Intent::Scheduled`] and hands
//! it to the heart as the intake hands one. The store keeps each
//! schedule's last fire time, from which [`missed`] decides the one
//! catch-up run for fire times that passed while the daemon was down.
//!
//! [`Intent::Scheduled`]: acp_bridge_core::mention::Intent::Scheduled

mod board;
pub(crate) mod chat;
mod missed;
mod scheduler;
pub(crate) mod target;
pub(crate) mod when;

pub(crate) use board::Board;
pub(crate) use chat::Planner;
pub(crate) use scheduler::Scheduler;
use target::Target;
use when::When;

/// Where a schedule was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A `[[schedule]]` entry: changed by editing the file.
    File,
    /// `!every` / `!at` at `since` (kept in the store; `!unschedule`
    /// removes it). A fire time between `since` and a start-up was missed.
    Chat { since: chrono::DateTime<chrono::Utc> },
}

/// One schedule, checked.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Its stable name: in logs, in `!schedules`, in its runs' event ids.
    pub(crate) id: String,
    pub(crate) when: When,
    /// Where it was set: the config file, or the owner's chat command.
    pub(crate) origin: Origin,
    pub(crate) target: Target,
    pub(crate) prompt: String,
    /// The agent profile its runs use (`None`: the default agent).
    pub(crate) agent: Option<String>,
}

impl Schedule {
    /// Its stable name.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The agent profile its runs use (`None`: the default agent).
    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref()
    }
}
