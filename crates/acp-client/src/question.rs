//! The two questions an agent asks a caller, as the handles a caller
//! answers through: a permission question (`session/request_permission`)
//! and a form (`elicitation/create`). What they ask is acp-protocol's; the
//! answer's way back to the agent is [`crate::pending`]'s.

use acp_protocol::{ElicitationAction, ElicitationRequest, PermissionRequest, permission_outcome};
use serde_json::Value;

use crate::pending::{AnswerError, OpenRequest, PendingAnswer};

/// An open question the caller must answer. Dropping it unanswered answers
/// `cancelled`.
#[derive(Debug)]
pub struct PermissionQuestion {
    request: PermissionRequest,
    pending: PendingAnswer,
}

impl PermissionQuestion {
    pub(crate) fn new(request: PermissionRequest, pending: PendingAnswer) -> Self {
        PermissionQuestion { request, pending }
    }

    /// How the connection tracks the question until it is answered.
    pub(crate) fn open_request(rpc_id: Value) -> OpenRequest {
        OpenRequest {
            rpc_id,
            cancelled: permission_outcome(None),
        }
    }

    pub fn request(&self) -> &PermissionRequest {
        &self.request
    }

    /// The JSON-RPC id of the agent's request, as a withdrawal names it
    /// ([`crate::TurnEvent::QuestionWithdrawn`]).
    pub fn request_id(&self) -> &Value {
        self.pending.request_id()
    }

    /// Answers with the offered option whose id is `option_id`.
    pub async fn answer(mut self, option_id: &str) -> Result<(), AnswerError> {
        let option = self
            .request
            .options
            .iter()
            .find(|option| option.id == option_id)
            .cloned()
            .ok_or_else(|| AnswerError::UnknownOption(option_id.to_owned()))?;
        self.pending.send(permission_outcome(Some(&option))).await
    }

    /// Answers `cancelled`.
    pub async fn cancel(mut self) -> Result<(), AnswerError> {
        self.pending.cancel().await
    }
}

/// An open form question the caller must answer. Dropping it unanswered
/// answers `cancel`.
#[derive(Debug)]
pub struct ElicitationQuestion {
    request: ElicitationRequest,
    pending: PendingAnswer,
}

impl ElicitationQuestion {
    pub(crate) fn new(request: ElicitationRequest, pending: PendingAnswer) -> Self {
        ElicitationQuestion { request, pending }
    }

    /// How the connection tracks the question until it is answered.
    pub(crate) fn open_request(rpc_id: Value) -> OpenRequest {
        OpenRequest {
            rpc_id,
            cancelled: ElicitationAction::Cancel.result(),
        }
    }

    pub fn request(&self) -> &ElicitationRequest {
        &self.request
    }

    /// The JSON-RPC id of the agent's request, as a withdrawal names it
    /// ([`crate::TurnEvent::QuestionWithdrawn`]).
    pub fn request_id(&self) -> &Value {
        self.pending.request_id()
    }

    pub async fn answer(mut self, action: ElicitationAction) -> Result<(), AnswerError> {
        self.pending.send(action.result()).await
    }
}
