//! The server side of the cross-vendor `_session/steering` (with
//! `--session-steering`), as claude-agent-acp and codex-acp answer it:
//! with a live run the text is injected into it (`injected`: the turn folds
//! it in at its next round boundary, at the latest before it answers); with
//! none, `promptRequired` when the client asked for it, else (an agent that
//! ignores `idleBehavior`, `--steering-starts-turns`) a turn of the agent's
//! own starts, whose output has no prompt answer (`startedNewTurn`).

use serde::Deserialize;
use serde_json::{Value, json};

use crate::acp;
use crate::rpc::RpcError;
use crate::session::{QueuedSteer, SteerRefusal};
use crate::shared::Agent;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SteeringParams {
    session_id: String,
    #[serde(default)]
    prompt: Vec<Value>,
    #[serde(default, rename = "_meta")]
    meta: Value,
}

/// How the request is answered.
#[derive(Debug)]
pub(crate) enum Steering {
    Answered(Value),
    /// No live run and the agent starts a turn of its own for the text.
    StartTurn {
        session_id: String,
        text: String,
    },
}

/// Decides the answer to one `_session/steering` request.
pub(crate) fn handle(agent: &Agent, params: Value) -> Result<Steering, RpcError> {
    let params: SteeringParams =
        serde_json::from_value(params).map_err(|error| RpcError::invalid_params(error.to_string()))?;
    let text = acp::text_of(&params.prompt) + &acp::media_of(&params.prompt);
    if text.is_empty() {
        return Err(RpcError::invalid_params("prompt must not be empty"));
    }
    let message_id = agent.ids.steer();
    let steer = QueuedSteer {
        message_id: message_id.clone(),
        text: text.clone(),
        injected: true,
    };
    let session_id = params.session_id;
    match agent.sessions.inject_steer(&session_id, steer) {
        Ok(()) => {
            log!("session {session_id}: steering {message_id} injected into the live run");
            Ok(Steering::Answered(json!({ "outcome": "injected" })))
        }
        Err(SteerRefusal::UnknownSession) => Err(RpcError::resource_not_found(format!(
            "Session not found: {session_id}"
        ))),
        Err(_) => {
            let idle_behavior = params.meta["steering"]["idleBehavior"].as_str();
            if idle_behavior == Some("promptRequired") && !agent.options.steering_starts_turns {
                log!("session {session_id}: steering with no live run: prompt required");
                Ok(Steering::Answered(json!({ "outcome": "promptRequired" })))
            } else {
                log!("session {session_id}: steering with no live run starts a turn of its own");
                Ok(Steering::StartTurn { session_id, text })
            }
        }
    }
}
