//! ACP (Agent Client Protocol) over stdio, and nothing else.
//!
//! One [`AgentClient`] owns one agent process (or any pair of byte streams)
//! and speaks newline-delimited JSON-RPC 2.0 to it: `initialize`,
//! `session/new`, `session/prompt` with its streamed `session/update`s,
//! `session/cancel`, `session/request_permission`, `elicitation/create`
//! (form mode), a session's model and mode (`configOptions`,
//! `session/set_config_option`), and goose's mid-turn
//! steer extension (`_goose/unstable/session/steer`). Many sessions share one
//! process; each may have one turn in flight, and a steer can be written
//! while that turn streams.
//!
//! What this crate does not know: Nostr, queues, conversations, CLIs. The
//! daemon reaches it only through the items re-exported here.
//!
//! Tests against a real agent process live in `crates/scripted-agent/tests`:
//! Cargo hands a test the path of a binary only inside the binary's own
//! package.

#![warn(unreachable_pub)]

mod agent_info;
mod client;
mod config_options;
mod connection;
mod dropped;
mod elicitation;
mod error;
mod forker;
mod framing;
mod isolation;
mod jsonrpc;
mod pending;
mod permission;
mod pid_namespace;
mod process;
mod program;
mod protocol;
mod stderr_tail;
mod steer;
mod turn;

pub use agent_info::{AgentInfo, AuthKind, AuthMethod};
pub use client::{
    AgentClient, CancelOutcome, ClientConfig, DEFAULT_CANCEL_TIMEOUT, DEFAULT_INITIALIZE_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT, ExitWatch,
};
pub use config_options::{Control, ControlChoice, ControlKind, ControlRoute, SessionControls};
pub use connection::{
    SESSION_BACKLOG_LIMIT, TURN_EVENTS_CAPACITY, TURN_QUESTIONS_RESERVED, UNCLAIMED_UPDATES_LIMIT,
};
pub use dropped::{DropObserver, DroppedUpdate};
pub use elicitation::{
    Choice, ElicitationAction, ElicitationQuestion, ElicitationRequest, FieldKind, FormField, Unsupported,
};
pub use error::{AcpError, AgentExit, ExitReason, RpcError, TurnError, codes};
pub use framing::DEFAULT_MAX_LINE_BYTES;
pub use isolation::{AgentUser, AgentUserError};
pub use pending::AnswerError;
pub use permission::{
    PermissionKind, PermissionOption, PermissionPolicy, PermissionQuestion, PermissionRequest,
};
pub use process::AgentCommand;
pub use program::{DEFAULT_SEARCH_PATH, ProgramError};
pub use protocol::{
    ContentBlock, Cost, ImageBlock, PROTOCOL_VERSION, ResourceLinkBlock, SessionId, StopReason, ToolCall,
    TurnEvent, Usage,
};
pub use stderr_tail::{STDERR_TAIL_LINE_BYTES, STDERR_TAIL_LINES};
pub use steer::{InvalidSteer, SteerAccepted, SteerDelivery, SteerRefusal, SteeringOutcome};
pub use turn::{
    AgentMessage, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_TEXT_BYTES, DEFAULT_MAX_TURN_DURATION, Turn, TurnOptions,
    TurnOutcome, TurnProgress,
};
