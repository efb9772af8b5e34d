//! The bridge's own MCP server, offered to every session (issue 24 §1).
//!
//! Owns the server's transport (loopback HTTP, [`http`]), its tokens
//! ([`tokens`]: one per conversation's session, bound to that conversation
//! only), the `mcpServers` entry each session is offered ([`offer`]) and
//! the tools ([`tools`]). It does not own what the tools do: each call
//! becomes a [`ToolRequest`] to the heart, which owns turns and replies.
//! The pool asks [`McpOffers`] for a session's entry on `session/new`,
//! `session/load` and `session/resume`, and revokes the token when it
//! forgets the session.
//!
//! Offered over HTTP only, to agents whose `initialize` advertises
//! `mcpCapabilities.http` (all the real agents do); the stdio transport
//! (`acp-bridge mcp`) is not built yet, so other agents are offered none.

pub(crate) mod args;
mod http;
mod offer;
mod tokens;
mod tools;

use std::sync::Arc;

use acp_client::AgentInfo;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use args::McpMode;
pub(crate) use offer::SERVER_NAME;
pub(crate) use tools::{DelegateCall, FOREGROUND_WAIT, ToolAction, ToolRequest};

use crate::mention::ConversationKey;
use tokens::TokenRegistry;

/// Tool calls waiting for the heart; a tool waits when it is full.
pub(crate) const TOOL_REQUEST_QUEUE: usize = 256;

/// What the pool offers each session: the server's address and the
/// conversations' tokens. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct McpOffers {
    tokens: Arc<TokenRegistry>,
    url: Arc<str>,
}

impl McpOffers {
    /// The `mcpServers` of the conversation's session on the agent `info`
    /// describes: the bridge's server when the agent takes HTTP, else none.
    pub(crate) fn servers(&self, info: Option<&AgentInfo>, conversation: &ConversationKey) -> Vec<Value> {
        if !info.is_some_and(|info| info.mcp_http) {
            return Vec::new();
        }
        match self.tokens.token_for(conversation) {
            Ok(token) => vec![offer::http_entry(&self.url, &token)],
            Err(error) => {
                tracing::error!(%conversation, %error, "the session is opened without the bridge's MCP server");
                Vec::new()
            }
        }
    }

    /// The conversation's session is forgotten: its token stops working.
    pub(crate) fn revoke(&self, conversation: &ConversationKey) {
        self.tokens.revoke(conversation);
    }
}

/// Starts the server as `mode` says: binds its loopback listener now and
/// serves until `stop`; tool calls go to `heart`. `None` when off.
pub(crate) async fn start(
    mode: McpMode,
    heart: mpsc::Sender<ToolRequest>,
    stop: CancellationToken,
) -> std::io::Result<Option<McpOffers>> {
    if mode == McpMode::Off {
        return Ok(None);
    }
    let tokens = Arc::new(TokenRegistry::default());
    let addr = http::bind(Arc::clone(&tokens), heart, stop).await?;
    Ok(Some(McpOffers {
        tokens,
        url: format!("http://{addr}{}", http::PATH).into(),
    }))
}
