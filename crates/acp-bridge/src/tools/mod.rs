//! The bridge's MCP tools, one room each (mini-redis's `cmd/`): every tool
//! is a file here holding its input type (the schema, and the doc comments
//! the model reads), its description, its checks (the caller's turn in
//! flight, the per-conversation rate limits, sizes, budgets) and its work,
//! and [`router`] registers them, one line each.
//!
//! A tool lives here, not in `mcp`, because what a tool does is the
//! conversation's business, which the heart owns; `mcp` owns how the tools
//! are served (transports, tokens, the offer to each session). A call
//! arrives on the server's task bound to the conversation of its token
//! ([`server`]) and travels to the heart as a [`ToolRequest`]; the heart
//! carries it out at once, lending the tool a narrow [`Context`] (that
//! conversation's live turn, the replier, the limits, …). Slow work (a
//! post, an upload, a relay read) runs on a task of its own, never on the
//! heart's. No tool takes a conversation, thread or session argument. A
//! refusal the model should read (no turn running, too long, too many
//! posts) is a tool result marked as an error, not a protocol error.
//!
//! A new tool is one new file with a type implementing [`Tool`] and one
//! line in [`router`].

mod context;
mod delegate;
mod post_message;
mod posts;
mod react;
mod read_thread;
mod send_file;
mod server;
mod task_status;
mod task_stop;
// Satellites of this wing (docs/architecture.md, "Wings").
pub(crate) mod mcp;
pub(crate) mod upload;

use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::schemars::JsonSchema;
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;

pub(crate) use context::Context;
pub(crate) use delegate::{DelegateCall, FOREGROUND_WAIT};
pub(crate) use posts::tool_budget;
pub(crate) use server::BridgeTools;

use acp_bridge_core::mention::ConversationKey;

/// How long a tool waits for the heart's answer before telling the model
/// it is not known whether the call took effect.
const HEART_ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// What a tool is told: a message for the model, or why not.
pub(crate) type Answer = oneshot::Sender<Result<String, String>>;

/// One MCP tool: a room of its own.
pub(crate) trait Tool: DeserializeOwned + JsonSchema + Send + 'static {
    /// The tool's name, as the model calls it.
    const NAME: &'static str;
    /// What the model reads of the tool.
    const DESCRIPTION: &'static str;

    /// How long the call waits for the heart's answer.
    fn answer_timeout(&self) -> Duration {
        HEART_ANSWER_TIMEOUT
    }

    /// Checks the call and does its work, on the heart's task; `answer`
    /// takes the outcome, now or from a task of its own.
    fn run(self, context: &mut dyn Context, answer: Answer);
}

/// Every tool the bridge serves: one line each.
fn router() -> ToolRouter<BridgeTools> {
    ToolRouter::new()
        .with_route(server::route::<post_message::PostMessage>())
        .with_route(server::route::<react::React>())
        .with_route(server::route::<send_file::SendFile>())
        .with_route(server::route::<delegate::Delegate>())
        .with_route(server::route::<task_status::TaskStatus>())
        .with_route(server::route::<task_stop::TaskStop>())
        .with_route(server::route::<read_thread::ReadThread>())
}

/// A tool's work with its input, waiting for what the heart lends.
type Call = Box<dyn FnOnce(&mut dyn Context, Answer) + Send>;

/// A call of a tool, for the heart to carry out in the conversation of the
/// caller's token.
pub(crate) struct ToolRequest {
    pub conversation: ConversationKey,
    /// The tool's name, for debugging.
    tool: &'static str,
    run: Call,
    answer: Answer,
}

impl ToolRequest {
    fn new<T: Tool>(conversation: ConversationKey, call: T, answer: Answer) -> Self {
        ToolRequest {
            conversation,
            tool: T::NAME,
            run: Box::new(move |context, answer| call.run(context, answer)),
            answer,
        }
    }

    /// Carries the call out with what the heart lends (`context`, for the
    /// request's conversation).
    pub(crate) fn carry_out(self, context: &mut dyn Context) {
        (self.run)(context, self.answer);
    }
}

impl std::fmt::Debug for ToolRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRequest")
            .field("conversation", &self.conversation)
            .field("tool", &self.tool)
            .finish_non_exhaustive()
    }
}
