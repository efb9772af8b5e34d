//! The turns' flags (what a mid-turn mention does, how agents' questions
//! are answered, when a waiting mention is told why) and their validation
//! into [`TurnSettings`].

use std::time::Duration;

use clap::Args;

use super::HeartSettings;
use crate::flags::{ConfigError, flag_defaults, parse_duration, refuse};
use crate::mode_gate::{Dedup, ModeGate, MultipleEventHandling};
use crate::pool::{AgentSettings, PermissionPolicyArg};
use crate::shard::{QuestionAskers, Shard};

/// The longest `--permission-timeout` taken: a question to the owner holds
/// its turn and its agent while it waits (24 h, as the flag's help says).
const MAX_PERMISSION_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The turns' flags.
#[derive(Debug, Clone, Args)]
pub struct TurnArgs {
    /// What a mention arriving mid-turn does.
    #[arg(
        long,
        env = "ACP_BRIDGE_MULTIPLE_EVENT_HANDLING",
        value_enum,
        default_value = "steer"
    )]
    pub multiple_event_handling: MultipleEventHandling,

    /// What happens to mid-turn mentions the mode gate does not take.
    #[arg(long, env = "ACP_BRIDGE_DEDUP", value_enum, default_value = "queue")]
    pub dedup: Dedup,

    /// How agents' permission questions are answered. `allow` runs every tool
    /// the agent asks for; `ask-owner` asks you in the thread.
    #[arg(
        long,
        env = "ACP_BRIDGE_PERMISSION_POLICY",
        value_enum,
        default_value = "allow"
    )]
    pub permission_policy: PermissionPolicyArg,

    /// A question to the owner unanswered this long is refused: a
    /// permission rejected, a form declined. Between 1s and 24h; 0 (wait
    /// forever) is refused, as an unanswered question holds its turn and
    /// its agent.
    #[arg(long, env = "ACP_BRIDGE_PERMISSION_TIMEOUT", default_value = "15m", value_parser = parse_duration)]
    pub permission_timeout: Duration,

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

/// How turns take mid-turn mentions and agents' questions: [`TurnArgs`],
/// checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnSettings {
    /// `--multiple-event-handling`.
    pub multiple_event_handling: MultipleEventHandling,
    /// `--dedup`.
    pub dedup: Dedup,
    /// `--permission-policy`.
    pub permission_policy: PermissionPolicyArg,
    /// `--permission-timeout`: how long a question to the owner waits.
    pub question_timeout: Duration,
    /// `--wait-notice-after` (`None`: off).
    pub wait_notice_after: Option<Duration>,
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
    /// ask-owner`): only then do they reach a person (README).
    pub(crate) fn asks_owner(&self) -> bool {
        self.permission_policy == PermissionPolicyArg::AskOwner
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
        })
    }
}
