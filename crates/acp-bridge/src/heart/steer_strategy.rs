//! The steer step, per agent: how mid-turn text reaches a live turn.
//!
//! The turn machine only asks for a steer and learns how it went
//! ([`SteerAnswer`]); which request carries it is chosen here, per agent.
//! Detection is behavioural: a method is tried and its refusal tolerated
//! (the machine then falls back to cancel + merge), never chosen by agent
//! name.

use acp_bridge_core::turn::SteerAnswer;
use acp_client::{AgentClient, ContentBlock, SessionId, SteerRefusal, SteeringOutcome};

/// A way to steer a live turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SteerMethod {
    /// The cross-vendor `_session/steering`, for agents that advertise
    /// `_meta.steering.supported`: an `injected` answer is delivery.
    SessionSteering,
    /// goose's `_goose/unstable/session/steer`, keyed on the advertised run
    /// id; delivery is proven when the run folds the steer in. Tried on
    /// every agent that advertises nothing.
    GooseRun,
}

impl SteerMethod {
    /// The method for the agent behind `client`, from what it advertised.
    pub(super) fn for_agent(client: &AgentClient) -> Self {
        match client.info() {
            Some(info) if info.session_steering => SteerMethod::SessionSteering,
            _ => SteerMethod::GooseRun,
        }
    }

    /// Writes the steer (its text, and the images or audio its mentions
    /// carry, as a prompt's blocks) and reads the agent's answer.
    pub(super) async fn steer(
        self,
        client: &AgentClient,
        session: &SessionId,
        blocks: Vec<ContentBlock>,
    ) -> SteerAnswer {
        match self {
            SteerMethod::SessionSteering => match client.steer_session_with(session, blocks).await {
                Ok(SteeringOutcome::Injected) => SteerAnswer::Delivered,
                Ok(SteeringOutcome::PromptRequired) => {
                    SteerAnswer::TurnOver("no turn was running: prompt required".into())
                }
                Ok(SteeringOutcome::StartedNewTurn) => {
                    // An agent that ignored `idleBehavior` started a turn of
                    // its own, which has no answer to publish. It is stopped,
                    // and the text goes to the next turn as a prompt: one
                    // reply, nothing lost (the agent may have read it twice).
                    if let Err(error) = client.cancel_detached(session).await {
                        tracing::warn!(%error, "cannot cancel the turn the agent started by itself");
                    }
                    SteerAnswer::TurnOver("the agent started a turn of its own; it was cancelled".into())
                }
                Err(refusal) => refused(refusal),
            },
            SteerMethod::GooseRun => match client.steer_with(session, blocks).await {
                Ok(accepted) => SteerAnswer::AwaitingFold {
                    message_id: accepted.message_id,
                },
                Err(refusal) => refused(refusal),
            },
        }
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            SteerMethod::SessionSteering => "_session/steering",
            SteerMethod::GooseRun => "goose",
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
