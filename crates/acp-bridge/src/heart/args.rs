//! The turns' flags (their bounds, what a mid-turn mention does, how
//! agents' questions are answered, when a waiting mention is told why) and their validation
//! into [`TurnSettings`].

use std::time::Duration;

use acp_bridge_core::mode_gate::{Dedup, ModeGate, MultipleEventHandling};
use acp_client::{PermissionPolicy, TurnOptions};
use clap::Args;

use super::HeartSettings;
use crate::agents::pool::{AgentSettings, PermissionPolicyArg};
use crate::base::flags::{ConfigError, choice, flag_defaults, longer_than_zero, parse_duration, refuse};
use crate::policy::shard::{QuestionAskers, Shard};

/// The longest `--permission-timeout` taken: a question to the owner holds
/// its turn and its agent while it waits (24 h, as the flag's help says).
const MAX_PERMISSION_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The turns' flags.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Turns")]
pub struct TurnArgs {
    /// What a mention arriving mid-turn does.
    #[arg(
        long,
        env = "ACP_BRIDGE_MULTIPLE_EVENT_HANDLING",
        value_parser = choice::<MultipleEventHandling>(),
        default_value = "steer"
    )]
    pub multiple_event_handling: MultipleEventHandling,

    /// A turn with no sign of life this long fails
    ///
    /// A turn with no sign of life from the agent for this long fails.
    #[arg(long, env = "ACP_BRIDGE_IDLE_TIMEOUT", default_value = "900s", value_parser = parse_duration)]
    pub idle_timeout: Duration,

    /// Hard limit of one turn.
    #[arg(long, env = "ACP_BRIDGE_MAX_TURN_DURATION", default_value = "7200s", value_parser = parse_duration)]
    pub max_turn_duration: Duration,

    /// Mid-turn mentions the mode does not take: queue or drop
    ///
    /// What happens to mid-turn mentions the mode gate does not take.
    #[arg(long, env = "ACP_BRIDGE_DEDUP", value_parser = choice::<Dedup>(), default_value = "queue")]
    pub dedup: Dedup,

    /// How agents' permission questions are answered
    ///
    /// How agents' permission questions are answered. `allow` runs every tool
    /// the agent asks for; `ask-owner` asks you in the thread.
    #[arg(
        long,
        env = "ACP_BRIDGE_PERMISSION_POLICY",
        help_heading = "Agent",
        value_enum,
        default_value = "allow"
    )]
    pub permission_policy: PermissionPolicyArg,

    /// A question to the owner unanswered this long is refused
    ///
    /// A question to the owner unanswered this long is refused: a
    /// permission rejected, a form declined. Between 1s and 24h; 0 (wait
    /// forever) is refused, as an unanswered question holds its turn and
    /// its agent.
    #[arg(long, env = "ACP_BRIDGE_PERMISSION_TIMEOUT", help_heading = "Agent", default_value = "15m", value_parser = parse_duration)]
    pub permission_timeout: Duration,

    /// A mention waiting this long is told why
    ///
    /// A mention still waiting for its turn after this long gets one
    /// notice saying why (queued behind others, its conversation's turn in
    /// flight, its agent still starting, a retry's backoff) and for how
    /// long (0 = never).
    #[arg(long, env = "ACP_BRIDGE_WAIT_NOTICE_AFTER", default_value = "5s", value_parser = parse_duration)]
    pub wait_notice_after: Duration,
}

impl Default for TurnArgs {
    fn default() -> Self {
        flag_defaults()
    }
}

/// How long turns may run, and how they take mid-turn mentions and
/// agents' questions: [`TurnArgs`], checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnSettings {
    /// `--multiple-event-handling`.
    pub multiple_event_handling: MultipleEventHandling,
    /// Mid-turn mentions the mode does not take: queue or drop
    ///
    /// `--dedup`.
    pub dedup: Dedup,
    /// `--permission-policy`.
    pub permission_policy: PermissionPolicyArg,
    /// `--permission-timeout`: how long a question to the owner waits.
    pub question_timeout: Duration,
    /// `--wait-notice-after` (`None`: off).
    pub wait_notice_after: Option<Duration>,
    /// A turn with no sign of life this long fails
    ///
    /// `--idle-timeout`: a turn with no sign of life this long fails.
    pub idle_timeout: Duration,
    /// `--max-turn-duration`: the hard limit of one turn.
    pub max_turn_duration: Duration,
}

impl Default for TurnSettings {
    /// The flags' defaults.
    fn default() -> Self {
        TurnArgs::default()
            .validate()
            .expect("the flags' defaults are valid")
    }
}

impl TurnSettings {
    /// Whether agents' questions go to the owner (`--permission-policy
    /// ask-owner`): only then do they reach a person (docs/owner.md).
    pub(crate) fn asks_owner(&self) -> bool {
        self.permission_policy == PermissionPolicyArg::AskOwner
    }

    /// What a turn asks of its agent: these bounds and permission
    /// policy, its answer cut at `max_text_bytes` (`--max-reply-bytes`).
    pub(crate) fn turn_options(&self, max_text_bytes: usize) -> TurnOptions {
        TurnOptions {
            idle_timeout: self.idle_timeout,
            max_duration: self.max_turn_duration,
            permission: match self.permission_policy {
                PermissionPolicyArg::Allow => PermissionPolicy::AllowOnce,
                PermissionPolicyArg::Reject => PermissionPolicy::RejectOnce,
                PermissionPolicyArg::AskOwner => PermissionPolicy::AskCaller,
            },
            max_text_bytes,
        }
    }

    /// The heart's settings: these, with the capacity and cancel bound
    /// of `agent`, for the conversations of `shard`.
    pub(crate) fn heart(
        &self,
        agent: &AgentSettings,
        shard: Shard,
        question_askers: QuestionAskers,
    ) -> HeartSettings {
        HeartSettings {
            mode_gate: ModeGate::new(self.multiple_event_handling, self.dedup),
            schedules: None,
            capacity: (agent.processes * agent.turns_per_agent) as usize,
            question_timeout: self.question_timeout,
            cancel_timeout: agent.cancel_timeout,
            wait_notice_after: self.wait_notice_after,
            shard,
            question_askers,
        }
    }
}

impl TurnArgs {
    pub(crate) fn validate(&self) -> Result<TurnSettings, ConfigError> {
        for (flag, value) in [
            ("--idle-timeout", self.idle_timeout),
            ("--max-turn-duration", self.max_turn_duration),
        ] {
            longer_than_zero(flag, value)?;
        }
        if self.permission_timeout.is_zero() || self.permission_timeout > MAX_PERMISSION_TIMEOUT {
            return Err(refuse(
                "--permission-timeout",
                "must be between 1s and 24h: a question nobody answers holds its turn and its agent until then (0, once \"wait forever\", is no longer allowed)",
            ));
        }
        if self.multiple_event_handling != MultipleEventHandling::Queue && self.dedup != Dedup::Queue {
            return Err(refuse(
                "--dedup",
                "must be `queue` unless --multiple-event-handling is `queue`: steering and interrupting merge mid-turn mentions into a turn, which needs them kept",
            ));
        }
        Ok(TurnSettings {
            multiple_event_handling: self.multiple_event_handling,
            dedup: self.dedup,
            permission_policy: self.permission_policy,
            question_timeout: self.permission_timeout,
            wait_notice_after: (!self.wait_notice_after.is_zero()).then_some(self.wait_notice_after),
            idle_timeout: self.idle_timeout,
            max_turn_duration: self.max_turn_duration,
        })
    }
}
