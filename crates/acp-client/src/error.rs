//! Typed failures at the edge of the crate.
//!
//! Every way a call can fail is a variant a caller can match on: a supervisor
//! decides between "retry", "respawn" and "tell the person" from the variant
//! alone, never from parsing a message string.

use std::time::Duration;

use acp_protocol::{AgentExit, RpcError};
use serde_json::Value;

/// Failures of ordinary requests and of the client as a whole.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    #[error("could not start agent `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    AgentExited(AgentExit),
    #[error("`{method}` got no answer within {after:?}")]
    Timeout { method: String, after: Duration },
    #[error("`{method}` failed: {error}")]
    Rpc { method: String, error: RpcError },
    #[error("agent speaks ACP protocol version {answered}, this client speaks {expected}")]
    UnsupportedProtocolVersion { expected: u64, answered: Value },
    #[error("agent sent a malformed `{method}` result: {detail}")]
    MalformedResult { method: String, detail: String },
    #[error("session {0} already has a turn in flight")]
    TurnInFlight(String),
    #[error("session {0} did not finish its turn within {1:?} of being cancelled")]
    CancelTimedOut(String, Duration),
}

/// Why a turn ended without an outcome.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("{0}")]
    AgentExited(AgentExit),
    #[error("agent was silent for {0:?}")]
    IdleTimeout(Duration),
    #[error("turn ran past its hard deadline of {0:?}")]
    DeadlineExceeded(Duration),
    #[error("agent refused the prompt: {0}")]
    Rpc(RpcError),
    #[error("agent answered the prompt with a malformed result: {0}")]
    MalformedResult(String),
    #[error("the turn already finished")]
    AlreadyFinished,
}
