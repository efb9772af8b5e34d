//! The tools the bridge's MCP server offers, and the requests they send.
//!
//! A tool is a typed function with a doc comment (the description the
//! model reads). It holds the conversation its token was minted for (the
//! HTTP layer resolved it before rmcp saw the request), turns the call into
//! a [`ToolRequest`] for the heart, which owns turns and replies, and
//! returns what the heart answered. No tool takes a conversation, thread or
//! session argument, and none touches the store or a relay itself.
//! A refusal the model should read (no turn running, too long, too many
//! posts) is a tool result marked as an error, not a protocol error.

use std::time::Duration;

use acp_bridge_core::mention::ConversationKey;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
use tokio::sync::{mpsc, oneshot};

use crate::telemetry::metrics;

/// How long a tool waits for the heart's answer before telling the model
/// it is not known whether the call took effect.
const HEART_ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest a `delegate` with `background: false` waits for its task
/// (the heart's side of it is `heart/tasks`): below the agents' own MCP
/// tool timeouts (codex and goose give up after 300 s).
pub(crate) const FOREGROUND_WAIT: Duration = Duration::from_secs(240);

/// A `delegate` call, as the tool took it.
#[derive(Debug)]
pub(crate) struct DelegateCall {
    pub prompt: String,
    /// `self`, or the npub / hex key of a sibling bot.
    pub to: String,
    pub background: bool,
}

/// What a tool asks the heart to do, for the conversation of its token.
#[derive(Debug)]
pub(crate) struct ToolRequest {
    pub conversation: ConversationKey,
    pub action: ToolAction,
    /// The heart's answer: what the model is told (`Err`: a refusal).
    pub answer: oneshot::Sender<Result<String, String>>,
}

/// The work a tool asks for.
#[derive(Debug)]
pub(crate) enum ToolAction {
    /// Post `text` in the thread of the turn in flight, now, as an interim
    /// message (it does not answer the mention).
    PostMessage { text: String },
    /// React (NIP-25) with `emoji` to the conversation's message `event_id`.
    React { event_id: String, emoji: String },
    /// Upload the file `path` of the conversation's workspace to Blossom
    /// and post its link with `caption`, like `PostMessage`.
    SendFile { path: String, caption: String },
    /// Start a delegated task (see `heart/tasks`).
    Delegate(DelegateCall),
    /// Where the conversation's task `id` stands.
    TaskStatus { id: String },
    /// Stop the conversation's task `id`.
    TaskStop { id: String },
    /// Read up to `limit` of the newest messages of the conversation's thread.
    ReadThread { limit: u32 },
}

impl ToolAction {
    /// The tool's name, for logs and metrics.
    pub(crate) fn tool(&self) -> &'static str {
        match self {
            ToolAction::PostMessage { .. } => "post_message",
            ToolAction::React { .. } => "react",
            ToolAction::SendFile { .. } => "send_file",
            ToolAction::Delegate(_) => "delegate",
            ToolAction::TaskStatus { .. } => "task_status",
            ToolAction::TaskStop { .. } => "task_stop",
            ToolAction::ReadThread { .. } => "read_thread",
        }
    }

    /// How long the tool waits for the heart's answer: a file's upload
    /// takes its own bound on top, and a delegation in the foreground is
    /// answered once its task ends or its wait is over.
    fn answer_timeout(&self) -> Duration {
        match self {
            ToolAction::SendFile { .. } => HEART_ANSWER_TIMEOUT + crate::send_file::UPLOAD_TIMEOUT,
            ToolAction::Delegate(call) if !call.background => HEART_ANSWER_TIMEOUT + FOREGROUND_WAIT,
            _ => HEART_ANSWER_TIMEOUT,
        }
    }
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct PostMessage {
    /// The message, as it should appear in the thread.
    text: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct React {
    /// The id of a message of this conversation (hex, or `note1…`/`nevent1…`).
    event_id: String,
    /// The reaction: an emoji, or `+` / `-`.
    emoji: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct SendFile {
    /// The file, relative to your working directory (or an absolute path in it).
    path: String,
    /// A line said with the file.
    #[serde(default)]
    caption: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct Delegate {
    /// The task, complete in itself: the task's session sees nothing else.
    prompt: String,
    /// Who does it: `self` (a fresh session of this agent, the default),
    /// or the npub / hex key of a sibling bot of the owner's, which is
    /// mentioned in the thread and whose reply is the result.
    to: Option<String>,
    /// `true` (the default): return a task id at once; the result comes to
    /// you as a message when the task ends. `false`: wait for the result
    /// (for a few minutes at most).
    background: Option<bool>,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct TaskId {
    /// The task id `delegate` returned.
    id: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct ReadThread {
    /// How many of the thread's newest messages to read (the bridge caps it).
    limit: u32,
}

/// The tools of one request, bound to the conversation of its token.
#[derive(Debug, Clone)]
pub(crate) struct BridgeTools {
    conversation: ConversationKey,
    heart: mpsc::Sender<ToolRequest>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl BridgeTools {
    pub(crate) fn new(conversation: ConversationKey, heart: mpsc::Sender<ToolRequest>) -> Self {
        BridgeTools {
            conversation,
            heart,
            tool_router: Self::tool_router(),
        }
    }

    /// Posts a message in this conversation's thread now, while you keep
    /// working: progress, or a part of the answer. It does not replace your
    /// final answer, which is still posted when your turn ends.
    #[tool(
        description = "Post a message in this conversation's thread now, while you keep working (progress, or a part of the answer). Your final answer is still posted when your turn ends."
    )]
    async fn post_message(
        &self,
        Parameters(PostMessage { text }): Parameters<PostMessage>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.ask(ToolAction::PostMessage { text }).await)
    }

    /// Reacts to a message of this conversation (a mention the bridge took
    /// in) with an emoji.
    #[tool(
        description = "React with an emoji to a message of this conversation (a message you were asked in), by its event id."
    )]
    async fn react(
        &self,
        Parameters(React { event_id, emoji }): Parameters<React>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.ask(ToolAction::React { event_id, emoji }).await)
    }

    /// Sends a file of the working directory into this conversation's
    /// thread: uploaded to the bridge's Blossom servers, posted as a link.
    #[tool(
        description = "Send a file from your working directory into this conversation's thread, with a caption: images, audio, video, PDF, archives or text, up to the bridge's size bound. It is uploaded and posted as a link."
    )]
    async fn send_file(
        &self,
        Parameters(SendFile { path, caption }): Parameters<SendFile>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.ask(ToolAction::SendFile { path, caption }).await)
    }

    /// Hands a task to a fresh session; its result comes back framed by
    /// the bridge (see `heart/tasks`).
    #[tool(
        description = "Delegate a task to a fresh session of this agent (to: \"self\", the default), which sees only your prompt, or to a sibling bot of your owner's (to: its npub), which is mentioned in this thread with the prompt and whose reply is the result. With background true (the default) you get a task id at once and the task's result reaches you as a message framed by the bridge when it ends (or starts your next turn if you have finished). With background false the call waits for the result, for a few minutes at most."
    )]
    async fn delegate(
        &self,
        Parameters(Delegate {
            prompt,
            to,
            background,
        }): Parameters<Delegate>,
    ) -> Result<CallToolResult, ErrorData> {
        let call = DelegateCall {
            prompt,
            to: to.unwrap_or_else(|| "self".to_owned()),
            background: background.unwrap_or(true),
        };
        Ok(self.ask(ToolAction::Delegate(call)).await)
    }

    /// Where a task of this conversation stands.
    #[tool(
        description = "Where a task you delegated stands: running, done (with its result), failed, or stopped."
    )]
    async fn task_status(
        &self,
        Parameters(TaskId { id }): Parameters<TaskId>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.ask(ToolAction::TaskStatus { id }).await)
    }

    /// Stops a running task of this conversation.
    #[tool(description = "Stop a task you delegated that still runs.")]
    async fn task_stop(
        &self,
        Parameters(TaskId { id }): Parameters<TaskId>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.ask(ToolAction::TaskStop { id }).await)
    }

    /// Reads the newest messages of this conversation's thread, quoted
    /// with their authors' standing, as the bridge's thread context does.
    #[tool(
        description = "Read the newest messages of this conversation's thread (up to `limit`; the bridge caps it), quoted with who wrote them. Only authors the bridge listens to are shown."
    )]
    async fn read_thread(
        &self,
        Parameters(ReadThread { limit }): Parameters<ReadThread>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.ask(ToolAction::ReadThread { limit }).await)
    }

    /// Sends `action` to the heart and turns its answer into the tool's
    /// result; logs and counts the call.
    async fn ask(&self, action: ToolAction) -> CallToolResult {
        let tool = action.tool();
        let answer_timeout = action.answer_timeout();
        let (answer, answered) = oneshot::channel();
        let request = ToolRequest {
            conversation: self.conversation.clone(),
            action,
            answer,
        };
        let outcome = if self.heart.send(request).await.is_err() {
            Err("the bridge is shutting down".to_owned())
        } else {
            match tokio::time::timeout(answer_timeout, answered).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(_)) => Err("the bridge is shutting down".to_owned()),
                Err(_) => Err(
                    "the bridge did not answer in time; the call may or may not have taken effect".to_owned(),
                ),
            }
        };
        let label = if outcome.is_ok() { "ok" } else { "refused" };
        metrics::mcp_tool_call(tool, label);
        match outcome {
            Ok(said) => {
                tracing::info!(conversation = %self.conversation, tool, "MCP tool call done");
                CallToolResult::success(vec![ContentBlock::text(said)])
            }
            Err(why) => {
                tracing::info!(conversation = %self.conversation, tool, reason = %why, "MCP tool call refused");
                CallToolResult::error(vec![ContentBlock::text(why)])
            }
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for BridgeTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "Tools of the chat bridge that runs this session: they act on this conversation only.",
        )
    }
}
