//! Mid-turn steering, both ways agents offer it, as types: goose's
//! `_goose/unstable/session/steer` (its answers and refusals) and the
//! cross-vendor `_session/steering` (its outcomes; refusals are shared).
//!
//! A steer is only as good as its delivery: goose queues an accepted steer
//! and folds it in at the next round boundary, streaming a
//! `user_message_chunk` marked `_meta.goose.steer` with the same
//! `messageId`; steers still queued when the run ends are dropped. So an
//! acceptance is a promise, and [`SteerDelivery::folded`] is the proof.

use serde_json::Value;

use crate::rpc::{AgentExit, RpcError, codes};

/// The agent queued the steer for the live run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteerAccepted {
    pub run_id: String,
    pub message_id: String,
}

impl SteerAccepted {
    pub fn parse(result: &Value) -> Option<Self> {
        Some(SteerAccepted {
            run_id: result.get("runId")?.as_str()?.to_owned(),
            message_id: result.get("messageId")?.as_str()?.to_owned(),
        })
    }
}

/// How an agent took a `_session/steering` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteeringOutcome {
    /// In the running turn; the agent settles that turn only after
    /// answering it, so it is delivered.
    Injected,
    /// No turn was running: send it as a normal prompt.
    PromptRequired,
    /// No turn was running and the agent, ignoring `idleBehavior`, started
    /// a turn of its own, which has no prompt answer.
    StartedNewTurn,
}

impl SteeringOutcome {
    pub fn parse(result: &Value) -> Option<Self> {
        match result.get("outcome")?.as_str()? {
            "injected" => Some(SteeringOutcome::Injected),
            "promptRequired" => Some(SteeringOutcome::PromptRequired),
            "startedNewTurn" => Some(SteeringOutcome::StartedNewTurn),
            _ => None,
        }
    }
}

/// An accepted steer of a finished turn, and whether the turn folded it in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteerDelivery {
    pub accepted: SteerAccepted,
    /// `false` means the agent acknowledged the steer but the run ended
    /// before it was folded in: the caller must deliver it again.
    pub folded: bool,
}

/// Why a steer did not land in the live turn.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SteerRefusal {
    /// No turn is in flight on the session (it ended first). Nothing was written.
    #[error("no turn in flight")]
    NoTurn,
    /// A turn is in flight but the agent advertised no run id. Nothing was written.
    #[error("the agent advertised no active run id")]
    NoRunId,
    /// The agent acknowledged the steer after its turn had already ended;
    /// the run discards such steers.
    #[error("the turn ended before the steer was acknowledged")]
    TurnEnded,
    /// The agent does not implement the steer extension (-32601).
    #[error("the agent does not implement steering")]
    MethodNotFound,
    /// -32602: goose's one code for every refusal; `reason` tells them apart.
    #[error("steer refused: {reason:?}")]
    InvalidParams {
        reason: InvalidSteer,
        data: Option<Value>,
    },
    /// -32002: the agent does not know the session.
    #[error("the agent does not know the session")]
    SessionNotFound,
    /// Any other JSON-RPC error.
    #[error("steer failed: {0}")]
    Rpc(RpcError),
    /// A success answer without `runId`/`messageId`: delivery cannot be
    /// confirmed, so it is treated as not delivered.
    #[error("malformed steer answer: {0}")]
    Malformed(Value),
    #[error("{0}")]
    AgentExited(AgentExit),
    /// Writing failed or no answer came within the request timeout.
    #[error("transport: {0}")]
    Transport(String),
}

/// The cases goose folds into -32602, told apart by the error's `data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvalidSteer {
    EmptyPrompt,
    /// The run ended (or never started) before the steer arrived.
    NoActiveRun,
    /// A different run is live than the one we named.
    RunIdMismatch {
        expected: Option<String>,
        actual: Option<String>,
    },
    Other,
}

impl SteerRefusal {
    pub fn from_rpc(error: RpcError) -> Self {
        match error.code {
            codes::METHOD_NOT_FOUND => SteerRefusal::MethodNotFound,
            codes::RESOURCE_NOT_FOUND => SteerRefusal::SessionNotFound,
            codes::INVALID_PARAMS => SteerRefusal::InvalidParams {
                reason: InvalidSteer::classify(error.data.as_ref()),
                data: error.data,
            },
            _ => SteerRefusal::Rpc(error),
        }
    }

    /// True when the refusal only means the turn was already over, so the
    /// steered text belongs to the next turn rather than to a fallback
    /// cancel of this one.
    pub fn turn_already_over(&self) -> bool {
        matches!(
            self,
            SteerRefusal::NoTurn
                | SteerRefusal::TurnEnded
                | SteerRefusal::InvalidParams {
                    reason: InvalidSteer::NoActiveRun,
                    ..
                }
        )
    }
}

impl InvalidSteer {
    fn classify(data: Option<&Value>) -> Self {
        let Some(data) = data else {
            return InvalidSteer::Other;
        };
        if data.get("expectedRunId").is_some() || data.get("actualRunId").is_some() {
            let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
            return InvalidSteer::RunIdMismatch {
                expected: text("expectedRunId"),
                actual: text("actualRunId"),
            };
        }
        let message = data
            .as_str()
            .or_else(|| data.get("message").and_then(Value::as_str))
            .unwrap_or_default()
            .to_ascii_lowercase();
        if message.contains("no active run") {
            InvalidSteer::NoActiveRun
        } else if message.contains("must not be empty") || message.contains("steerable content") {
            InvalidSteer::EmptyPrompt
        } else {
            InvalidSteer::Other
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn invalid(data: Value) -> SteerRefusal {
        SteerRefusal::from_rpc(RpcError {
            code: codes::INVALID_PARAMS,
            message: "Invalid params".into(),
            data: Some(data),
        })
    }

    #[test]
    fn goose_refusals_are_told_apart_by_their_data() {
        assert!(matches!(
            invalid(json!("no active run to steer")),
            SteerRefusal::InvalidParams {
                reason: InvalidSteer::NoActiveRun,
                ..
            }
        ));
        assert!(matches!(
            invalid(json!("prompt must not be empty")),
            SteerRefusal::InvalidParams {
                reason: InvalidSteer::EmptyPrompt,
                ..
            }
        ));
        let mismatch = invalid(json!({
            "message": "expected active run id `run_a` but found `run_b`",
            "expectedRunId": "run_a",
            "actualRunId": "run_b"
        }));
        assert!(matches!(
            mismatch,
            SteerRefusal::InvalidParams {
                reason: InvalidSteer::RunIdMismatch { ref expected, ref actual }, ..
            } if expected.as_deref() == Some("run_a") && actual.as_deref() == Some("run_b")
        ));
    }

    #[test]
    fn only_ended_turn_refusals_count_as_turn_already_over() {
        assert!(invalid(json!("no active run to steer")).turn_already_over());
        assert!(SteerRefusal::TurnEnded.turn_already_over());
        assert!(!SteerRefusal::MethodNotFound.turn_already_over());
        assert!(!SteerRefusal::NoRunId.turn_already_over());
        let other = SteerRefusal::from_rpc(RpcError {
            code: -32000,
            message: "boom".into(),
            data: None,
        });
        assert!(matches!(other, SteerRefusal::Rpc(_)));
    }
}
