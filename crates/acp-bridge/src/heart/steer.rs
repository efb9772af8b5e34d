//! The steer step, per agent: how mid-turn text reaches a live turn.
//!
//! The turn machine only asks for a steer and learns how it went
//! ([`SteerAnswer`]); which request carries it is chosen here, per agent.
//! Detection is behavioural: a method is tried and its refusal tolerated
//! (the machine then falls back to cancel + merge), never chosen by agent
//! name.

use acp_client::{AgentClient, SessionId, SteerRefusal};

use super::turn::SteerAnswer;

/// A way to steer a live turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum SteerMethod {
    /// goose's `_goose/unstable/session/steer`, keyed on the advertised run
    /// id; delivery is proven when the run folds the steer in.
    #[default]
    GooseRun,
}

impl SteerMethod {
    /// Writes the steer and reads the agent's answer.
    pub async fn steer(self, client: &AgentClient, session: &SessionId, text: &str) -> SteerAnswer {
        match self {
            SteerMethod::GooseRun => match client.steer(session, text).await {
                Ok(accepted) => SteerAnswer::AwaitingFold {
                    message_id: accepted.message_id,
                },
                Err(refusal) => refused(refusal),
            },
        }
    }
}

fn refused(refusal: SteerRefusal) -> SteerAnswer {
    if refusal.turn_already_over() {
        SteerAnswer::TurnOver(refusal.to_string())
    } else {
        SteerAnswer::Unsupported(refusal.to_string())
    }
}
