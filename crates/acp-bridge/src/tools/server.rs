//! The tools as the MCP server serves them: one [`BridgeTools`] per
//! request, bound to the conversation its token was minted for (the HTTP
//! layer resolved it before rmcp saw the request). A call becomes a
//! [`ToolRequest`] to the heart, and the heart's answer the tool's result;
//! the call is logged and counted here.

use acp_bridge_core::mention::ConversationKey;
use futures_util::future::BoxFuture;
use rmcp::handler::server::common::schema_for_input;
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, tool_handler};
use tokio::sync::{mpsc, oneshot};

use super::{Tool, ToolRequest, router};
use crate::telemetry::metrics;

/// The tools of one request, bound to the conversation of its token.
#[derive(Debug, Clone)]
pub(crate) struct BridgeTools {
    conversation: ConversationKey,
    heart: mpsc::Sender<ToolRequest>,
    tool_router: ToolRouter<Self>,
}

impl BridgeTools {
    pub(crate) fn new(conversation: ConversationKey, heart: mpsc::Sender<ToolRequest>) -> Self {
        BridgeTools {
            conversation,
            heart,
            tool_router: router(),
        }
    }

    /// Sends `call` to the heart and turns its answer into the tool's
    /// result; logs and counts the call.
    async fn ask<T: Tool>(&self, call: T) -> CallToolResult {
        let tool = T::NAME;
        let answer_timeout = call.answer_timeout();
        let (answer, answered) = oneshot::channel();
        let request = ToolRequest::new(self.conversation.clone(), call, answer);
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

/// The route of tool `T`: its name, description and input schema as the
/// `#[tool]` attribute would declare them, and its call sent to the heart.
pub(super) fn route<T: Tool>() -> ToolRoute<BridgeTools> {
    let schema = schema_for_input::<Parameters<T>>()
        .unwrap_or_else(|error| panic!("the input schema of {}: {error}", T::NAME));
    let attr = rmcp::model::Tool::new_with_raw(T::NAME, Some(T::DESCRIPTION.into()), schema);
    ToolRoute::new(attr, call::<T>)
}

fn call<T: Tool>(
    tools: &BridgeTools,
    Parameters(input): Parameters<T>,
) -> BoxFuture<'_, Result<CallToolResult, ErrorData>> {
    Box::pin(async move { Ok(tools.ask(input).await) })
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for BridgeTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "Tools of the chat bridge that runs this session: they act on this conversation only.",
        )
    }
}
