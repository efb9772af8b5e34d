//! What an agent answers when a request fails, and how an agent ended: the
//! plain facts a client's own errors are built from.

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

/// JSON-RPC error codes ACP clients give a meaning to.
pub mod codes {
    /// The method does not exist (also: the agent lacks the steer extension).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid params; goose uses this one code for every steer refusal.
    pub const INVALID_PARAMS: i64 = -32602;
    /// ACP's "resource not found", used for unknown sessions.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// ACP's "authentication required" (answered by `session/new` and
    /// friends until `authenticate` succeeded).
    pub const AUTH_REQUIRED: i64 = -32000;
    /// The request was withdrawn (`$/cancel_request`).
    pub const REQUEST_CANCELLED: i64 = -32800;
}

/// An error object sent by the agent in a JSON-RPC response.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RpcError {
    pub code: i64,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub data: Option<Value>,
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JSON-RPC error {}: {}", self.code, self.message)?;
        if let Some(data) = &self.data {
            write!(f, " ({data})")?;
        }
        Ok(())
    }
}

impl std::error::Error for RpcError {}

/// How an agent process ended, as far as we could observe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentExit {
    /// Exit code, when the process exited normally.
    pub code: Option<i32>,
    /// Terminating signal, when a signal ended it.
    pub signal: Option<i32>,
    /// Why we consider the agent gone (closed stdout, killed by us, ...).
    pub reason: ExitReason,
}

/// What made the client give up on the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReason {
    /// The agent closed its stdout (it exited or crashed).
    StdoutClosed,
    /// Reading the agent's stdout failed.
    ReadFailed,
    /// Writing to the agent's stdin failed (broken pipe).
    WriteFailed,
    /// We killed it (explicitly, or by dropping the last handle).
    Killed,
}

impl fmt::Display for AgentExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reason = match self.reason {
            ExitReason::StdoutClosed => "closed its stdout",
            ExitReason::ReadFailed => "could not be read",
            ExitReason::WriteFailed => "stopped reading its stdin",
            ExitReason::Killed => "was killed by the client",
        };
        write!(f, "agent {reason}")?;
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, " (exit code {code})"),
            (None, Some(signal)) => write!(f, " (signal {signal})"),
            (None, None) => Ok(()),
        }
    }
}
