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
//! [`Intent::Scheduled`]: crate::mention::Intent::Scheduled

mod board;
mod missed;
mod scheduler;
pub(crate) mod target;
pub(crate) mod when;

pub(crate) use board::Board;
pub(crate) use scheduler::Scheduler;
use target::Target;
use when::CronTime;

/// One schedule, checked.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Its stable name: in logs, in `!schedules`, in its runs' event ids.
    pub(crate) id: String,
    pub(crate) when: CronTime,
    pub(crate) target: Target,
    pub(crate) prompt: String,
    /// The agent profile its runs use (`None`: the default agent).
    pub(crate) agent: Option<String>,
}
