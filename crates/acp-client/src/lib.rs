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

mod client;
mod connection;
mod dropped;
mod error;
mod forker;
mod framing;
mod isolation;
mod jsonrpc;
mod pending;
mod pid_namespace;
mod process;
mod program;
mod question;
mod stderr_tail;
mod transcript;
mod turn;

pub use acp_protocol::{
    AgentExit, AgentInfo, AuthKind, AuthMethod, AvailableCommand, Choice, ContentBlock, Control,
    ControlChoice, ControlKind, ControlRoute, Cost, ElicitationAction, ElicitationRequest, ExitReason,
    FieldKind, FormField, ImageBlock, InvalidSteer, ListedSession, PROTOCOL_VERSION, PermissionKind,
    PermissionOption, PermissionPolicy, PermissionRequest, ResourceLinkBlock, RpcError, SessionControls,
    SessionId, SessionOption, SteerAccepted, SteerDelivery, SteerRefusal, SteeringOutcome, StopReason,
    ToolCall, Unsupported, Usage, codes,
};
pub use client::{
    AgentClient, CancelOutcome, ClientConfig, DEFAULT_CANCEL_TIMEOUT, DEFAULT_INITIALIZE_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT, ExitWatch, LIST_PAGES,
};
pub use connection::{
    SESSION_BACKLOG_LIMIT, TURN_EVENTS_CAPACITY, TURN_QUESTIONS_RESERVED, UNCLAIMED_UPDATES_LIMIT,
};
pub use dropped::{DropObserver, DroppedUpdate};
pub use error::{AcpError, TurnError};
pub use framing::DEFAULT_MAX_LINE_BYTES;
pub use isolation::{AgentUser, AgentUserError};
pub use pending::AnswerError;
pub use process::AgentCommand;
pub use program::{DEFAULT_SEARCH_PATH, ProgramError};
pub use question::{ElicitationQuestion, PermissionQuestion};
pub use stderr_tail::{STDERR_TAIL_LINE_BYTES, STDERR_TAIL_LINES};
pub use transcript::AgentMessage;
pub use turn::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_TEXT_BYTES, DEFAULT_MAX_TURN_DURATION, Turn, TurnOptions, TurnOutcome,
    TurnProgress,
};

/// One typed event of a turn, with this client's answer handles for the
/// two questions an agent may ask (see [`acp_protocol::TurnEvent`]).
pub type TurnEvent = acp_protocol::TurnEvent<PermissionQuestion, ElicitationQuestion>;
