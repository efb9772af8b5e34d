//! The server side of goose's `_goose/unstable/session/steer`, checked in
//! goose's order: empty prompt, missing run id, unknown session, no live run,
//! run id mismatch. An accepted steer is queued on the live run, announced
//! with a `queuedSteer` marker, and answered `{runId, messageId}`; the turn
//! folds it at its next round boundary (see `turn`).

use serde::Deserialize;
use serde_json::{Value, json};

use crate::acp::{self, update};
use crate::rpc::RpcError;
use crate::session::{QueuedSteer, SteerRefusal};
use crate::shared::Agent;
use crate::wire::ClientGone;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SteerParams {
    session_id: String,
    #[serde(default)]
    expected_run_id: Option<String>,
    #[serde(default)]
    prompt: Vec<Value>,
}

#[derive(Debug)]
struct Accepted {
    session_id: String,
    run_id: String,
    message_id: String,
}

/// Answers one steer request.
pub(crate) async fn handle(agent: &Agent, id: Value, params: Value) -> Result<(), ClientGone> {
    let accepted = match accept(agent, params) {
        Ok(accepted) => accepted,
        Err(refusal) => {
            log!("steer refused: {refusal}");
            return agent.outbox.respond_error(id, refusal).await;
        }
    };
    let Accepted {
        session_id,
        run_id,
        message_id,
    } = accepted;
    log!("session {session_id}: steer {message_id} queued on run {run_id}");
    let marker = update::queued_steer(&message_id, &run_id);
    acp::send_update(&agent.outbox, &session_id, marker).await?;
    let result = json!({ "runId": run_id, "messageId": message_id });
    agent.outbox.respond(id, result).await?;
    if agent.options.end_run_after_steer {
        log!("session {session_id}: ending run {run_id} before it folds the steer");
        agent.sessions.end_run_now(&session_id, &run_id);
    }
    Ok(())
}

fn accept(agent: &Agent, params: Value) -> Result<Accepted, RpcError> {
    let params: SteerParams =
        serde_json::from_value(params).map_err(|e| RpcError::invalid_params(e.to_string()))?;
    let text = acp::text_of(&params.prompt) + &acp::media_of(&params.prompt);
    if text.is_empty() {
        return Err(RpcError::invalid_params("prompt must not be empty"));
    }
    let expected_run_id = params
        .expected_run_id
        .filter(|run_id| !run_id.is_empty())
        .ok_or_else(|| RpcError::invalid_params("expectedRunId must not be empty"))?;
    let message_id = agent.ids.steer();
    let steer = QueuedSteer {
        message_id: message_id.clone(),
        text,
        injected: false,
    };
    // Under `--end-run-after-steer` the run stops folding right here, so the
    // steer cannot slip in at a round boundary before the run ends.
    let close_folding = agent.options.end_run_after_steer;
    let session_id = params.session_id;
    match agent
        .sessions
        .queue_steer(&session_id, &expected_run_id, steer, close_folding)
    {
        Ok(run_id) => Ok(Accepted {
            session_id,
            run_id,
            message_id,
        }),
        Err(SteerRefusal::UnknownSession) => Err(RpcError::resource_not_found(format!(
            "Session not found: {session_id}"
        ))),
        Err(SteerRefusal::NoLiveRun) => Err(RpcError::invalid_params("no active run to steer")),
        Err(SteerRefusal::RunMismatch { actual }) => Err(RpcError::invalid_params(json!({
            "message": format!(
                "expected active run id `{expected_run_id}` but found `{actual}`"
            ),
            "expectedRunId": expected_run_id,
            "actualRunId": actual,
        }))),
    }
}
