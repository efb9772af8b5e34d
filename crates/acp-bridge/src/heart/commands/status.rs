//! `!status`: turns, queues, agents and steers; sent in the owner's DM,
//! the details too (which conversations wait on which questions, the last
//! agent failure, this conversation's session usage), as a public thread
//! is read by others. The heart and the pool gather the facts
//! ([`StatusFacts`]); this room words them.

use std::time::Duration;

use acp_bridge_core::mention::ConversationKey;

use super::{Command, Context, Who, no_args};
use crate::agents::pool::{PoolStatus, Starts};

pub(crate) struct Status;

/// What `!status` reports, gathered by the heart when it is asked.
#[derive(Debug)]
pub(crate) struct StatusFacts {
    pub turns_in_flight: usize,
    pub waiting: usize,
    pub pool: PoolStatus,
    /// The agents alive by profile (` (claude 1, codex 0)`; nothing with
    /// one profile).
    pub alive_by_profile: String,
    pub turns_started: u64,
    /// Mid-turn mentions handed to live turns.
    pub absorbed: u64,
    /// Mid-turn mentions queued.
    pub queued_mid_turn: u64,
    /// Calls of the bridge's MCP tools.
    pub tool_calls: u64,
    /// The conversations whose turn waits for the owner's answer, and to
    /// which question.
    pub blocked: Vec<(ConversationKey, String)>,
    /// What the shard answering says of itself (nothing unsharded).
    pub shard: String,
    pub schedules: usize,
    /// The outbox's refusals, worded for where `!status` was sent.
    pub refusals: String,
    pub here: HereFacts,
}

/// What `!status` says of the conversation it was sent in: counts and
/// settings only, fit for a public thread (its usage only in private).
#[derive(Debug)]
pub(crate) struct HereFacts {
    /// How long its turn in flight has run, if one does.
    pub turn_for: Option<Duration>,
    /// That turn's plan and current tool call (`WorkLog::status_text`),
    /// once the agent has said anything of either.
    pub work: Option<String>,
    pub waiting: usize,
    /// Its delegated tasks running.
    pub tasks: Vec<String>,
    /// Its agent profile.
    pub profile: String,
    /// Its session's model, mode and steer path, as the controls word them.
    pub controls: String,
    /// Its session's usage, as the agent last reported it.
    pub session_usage: Option<String>,
}

impl Command for Status {
    const NAME: &'static str = "!status";
    const HELP: &'static str = "!status: turns, queues, agents and steers; sent in a DM, the details too.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(Status)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        let facts = context.status();
        let in_private = context.in_private();
        let counts = counts(&facts) + &here(&facts.here);
        if !in_private {
            return counts + &facts.refusals + " Details only in a DM: send !status there.";
        }
        let failure = match (&facts.pool.starts, &facts.pool.last_failure) {
            (Starts::CannotStart(reason), _) => format!(" Agent cannot start: {reason}."),
            (Starts::Paused, Some(failure)) => format!(" Last agent failure: {failure}."),
            _ => String::new(),
        };
        let blocked: String = facts
            .blocked
            .iter()
            .map(|(key, question)| format!(" {key} is waiting for the owner to answer {question}."))
            .collect();
        let usage = match &facts.here.session_usage {
            Some(usage) => format!(" This conversation's session: {usage}."),
            None => String::new(),
        };
        counts + &failure + &blocked + &usage + &facts.refusals
    }
}

/// The counts, fit for anywhere.
fn counts(facts: &StatusFacts) -> String {
    let pool = &facts.pool;
    format!(
        "Turns in flight: {}. Mentions waiting: {}. Agents alive: {}{}{}. Live sessions: {}{}. Turns started: {}; mid-turn mentions handed to live turns: {}, queued: {}. Agent questions pending: {}. Agents' calls of the bridge's tools (MCP): {}.",
        facts.turns_in_flight,
        facts.waiting,
        pool.alive,
        facts.alive_by_profile,
        match pool.starts {
            Starts::Allowed => "",
            Starts::CannotStart(_) => " (the agent cannot start)",
            Starts::Paused => " (restarts paused after repeated crashes)",
        },
        pool.live_sessions.len(),
        match pool.awaiting.len() {
            0 => String::new(),
            waiting => format!(" ({waiting} turn(s) waiting for one to free)"),
        },
        facts.turns_started,
        facts.absorbed,
        facts.queued_mid_turn,
        facts.blocked.len(),
        facts.tool_calls,
    ) + &facts.shard
        + &format!(" Schedules: {}.", facts.schedules)
}

/// The words for the conversation `!status` was sent in.
fn here(here: &HereFacts) -> String {
    let turn = match here.turn_for {
        Some(running) => format!("a turn in flight for {} s", running.as_secs()),
        None => "no turn in flight".to_owned(),
    };
    let tasks = match here.tasks.len() {
        0 => String::new(),
        count => format!(", {count} delegated task(s) running ({})", here.tasks.join(", ")),
    };
    let work = match &here.work {
        Some(work) => format!("\n{work}\n"),
        None => String::new(),
    };
    format!(
        " This conversation: {turn}, {} mention(s) waiting{tasks}.{work} Its agent profile: {}.{}",
        here.waiting, here.profile, here.controls
    )
}
