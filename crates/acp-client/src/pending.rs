//! An agent's request that waits on the caller (a permission question, a
//! form elicitation): the handle the caller answers through, shared by
//! every kind of question.
//!
//! Owns the lifecycle, not the content: exactly one answer reaches the
//! agent, dropping the handle unanswered sends the kind's "cancelled"
//! answer (so an agent is never left waiting on a forgotten handle), and
//! the turn's count of open questions follows (the turn suspends its idle
//! timer while the agent waits on us). What a question asks and what its
//! answers look like belong to its own module. The answer reaches the agent
//! through an [`AnswerSink`] (the connection, which sits above this module).

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;

use acp_protocol::SessionId;
use serde_json::Value;
use tokio::sync::watch;

use crate::error::AcpError;

/// Why an answer did not reach the agent.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("the agent offered no option `{0}`")]
    UnknownOption(String),
    #[error("the question was already answered (cancelled with its turn, or withdrawn)")]
    AlreadyAnswered,
    #[error(transparent)]
    Transport(#[from] AcpError),
}

/// One of the agent's requests as the connection tracks it until answered:
/// its id and the `result` that answers it "cancelled" (what a cancel of
/// the turn sends).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OpenRequest {
    pub rpc_id: Value,
    pub cancelled: Value,
}

/// Where answers go: what tracks the open requests and writes to the agent
/// (the connection). A trait, so that the handle does not name the
/// connection and the connection can name the handle.
pub(crate) trait AnswerSink: fmt::Debug + Send + Sync {
    /// Answers the open request `rpc_id` of `session` with `result`, unless
    /// it was already answered; returns whether this call answered it.
    fn answer<'a>(
        &'a self,
        session: &'a SessionId,
        rpc_id: &'a Value,
        result: Value,
    ) -> Pin<Box<dyn Future<Output = Result<bool, AcpError>> + Send + 'a>>;
}

/// The answering end of one open request.
#[derive(Debug)]
pub(crate) struct PendingAnswer {
    session_id: SessionId,
    request: OpenRequest,
    conn: Arc<dyn AnswerSink>,
    open_questions: Arc<watch::Sender<usize>>,
    answered: bool,
}

impl PendingAnswer {
    pub(crate) fn new(
        session_id: SessionId,
        request: OpenRequest,
        conn: Arc<dyn AnswerSink>,
        open_questions: Arc<watch::Sender<usize>>,
    ) -> Self {
        open_questions.send_modify(|open| *open += 1);
        PendingAnswer {
            session_id,
            request,
            conn,
            open_questions,
            answered: false,
        }
    }

    pub(crate) fn request_id(&self) -> &Value {
        &self.request.rpc_id
    }

    /// Sends `result`, unless the request was already answered.
    pub(crate) async fn send(&mut self, result: Value) -> Result<(), AnswerError> {
        self.mark_answered();
        let sent = self
            .conn
            .answer(&self.session_id, &self.request.rpc_id, result)
            .await?;
        if sent {
            Ok(())
        } else {
            Err(AnswerError::AlreadyAnswered)
        }
    }

    /// Sends the kind's "cancelled" answer.
    pub(crate) async fn cancel(&mut self) -> Result<(), AnswerError> {
        let cancelled = self.request.cancelled.clone();
        self.send(cancelled).await
    }

    fn mark_answered(&mut self) {
        if !self.answered {
            self.answered = true;
            self.open_questions
                .send_modify(|open| *open = open.saturating_sub(1));
        }
    }
}

impl Drop for PendingAnswer {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        self.mark_answered();
        let conn = Arc::clone(&self.conn);
        let session = self.session_id.clone();
        let OpenRequest { rpc_id, cancelled } = self.request.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = conn.answer(&session, &rpc_id, cancelled).await;
            });
        }
    }
}
