//! ACP (Agent Client Protocol) wire data, as plain Rust types.
//!
//! The typed view of what a client and an agent say to each other: session
//! ids, prompt content, the updates of a turn, permission and form
//! questions, a session's model, mode and other options, the agent's slash
//! commands, what an agent says of itself in
//! `initialize`, steering answers and JSON-RPC error objects. Reading is
//! lenient: a missing optional field or an unknown kind is kept raw, never
//! an error.
//!
//! What this crate does not have: processes, sockets, a runtime. It is
//! pure so that code without I/O (the daemon's core) can speak in ACP's
//! terms; the connection that moves these values is `acp-client`'s.

#![warn(unreachable_pub)]

mod agent_info;
mod commands;
mod config_options;
mod content;
mod elicitation;
pub mod methods;
mod permission;
mod rpc;
mod session;
mod steer;
mod update;

pub use agent_info::{AgentInfo, AuthKind, AuthMethod};
pub use commands::{AvailableCommand, available_commands};
pub use config_options::{Control, ControlChoice, ControlKind, ControlRoute, SessionControls, SessionOption};
pub use content::{ContentBlock, ImageBlock, ResourceLinkBlock, TextBlock};
pub use elicitation::{Choice, ElicitationAction, ElicitationRequest, FieldKind, FormField, Unsupported};
pub use permission::{
    PermissionKind, PermissionOption, PermissionPolicy, PermissionRequest, outcome as permission_outcome,
};
pub use rpc::{AgentExit, ExitReason, RpcError, codes};
pub use session::{
    ListedSession, PROTOCOL_VERSION, SessionId, StopReason, initialize_params, session_list_page,
    session_title,
};
pub use steer::{InvalidSteer, SteerAccepted, SteerDelivery, SteerRefusal, SteeringOutcome};
pub use update::{
    Cost, RunMarker, TextChunk, ToolCall, ToolContent, ToolKind, TurnEvent, Usage, run_marker, tool_command,
    tool_content, turn_event,
};
