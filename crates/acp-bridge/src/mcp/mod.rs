//! The bridge's own MCP server, offered to every session (issue 24 §1).
//!
//! Owns the server's transports (loopback HTTP, [`http`]; a local socket
//! that `acp-bridge mcp` carries an agent's stdio to, [`socket`]), its tokens
//! ([`tokens`]: one per conversation's session, bound to that conversation
//! only), the `mcpServers` entry each session is offered ([`offer`]) and
//! the tools ([`tools`]). It does not own what the tools do: each call
//! becomes a [`ToolRequest`] to the heart, which owns turns and replies.
//! The pool asks [`McpOffers`] for a session's entry on `session/new`,
//! `session/load` and `session/resume`, and revokes the token when it
//! forgets the session.
//!
//! Offered over HTTP to agents whose `initialize` advertises
//! `mcpCapabilities.http` (all the real agents do), else as a stdio entry
//! (`acp-bridge mcp`, the transport every ACP agent must take). Both serve
//! the same tools, bound the same way to the token's conversation.

pub(crate) mod args;
mod http;
mod offer;
mod socket;
mod tokens;
mod tools;

use std::sync::Arc;

use acp_client::AgentInfo;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use args::McpMode;
pub(crate) use offer::SERVER_NAME;
pub(crate) use socket::{SOCKET_ENV, TOKEN_ENV, abstract_address};
pub(crate) use tools::{ToolAction, ToolRequest};

use crate::mention::ConversationKey;
use tokens::TokenRegistry;

/// Tool calls waiting for the heart; a tool waits when it is full.
pub(crate) const TOOL_REQUEST_QUEUE: usize = 256;

/// What the pool offers each session: the server's addresses and the
/// conversations' tokens. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct McpOffers {
    tokens: Arc<TokenRegistry>,
    url: Arc<str>,
    /// `None` when this executable's path is unknown: agents without
    /// HTTP are then offered nothing.
    stdio: Option<StdioOffer>,
}

/// What a stdio entry names: this executable and the local socket.
#[derive(Debug, Clone)]
struct StdioOffer {
    command: Arc<str>,
    socket: Arc<str>,
}

impl McpOffers {
    /// The `mcpServers` of the conversation's session on the agent `info`
    /// describes: the bridge's server, over HTTP when the agent takes it,
    /// else over stdio.
    pub(crate) fn servers(&self, info: Option<&AgentInfo>, conversation: &ConversationKey) -> Vec<Value> {
        let http = info.is_some_and(|info| info.mcp_http);
        if !http && self.stdio.is_none() {
            return Vec::new();
        }
        match self.tokens.token_for(conversation) {
            Ok(token) => match (&self.stdio, http) {
                (Some(stdio), false) => vec![offer::stdio_entry(&stdio.command, &stdio.socket, &token)],
                _ => vec![offer::http_entry(&self.url, &token)],
            },
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

/// Starts the server as `mode` says: binds its loopback listener and its
/// local socket now and serves until `stop`; tool calls go to `heart`.
/// `None` when off.
pub(crate) async fn start(
    mode: McpMode,
    heart: mpsc::Sender<ToolRequest>,
    stop: CancellationToken,
) -> std::io::Result<Option<McpOffers>> {
    if mode == McpMode::Off {
        return Ok(None);
    }
    let tokens = Arc::new(TokenRegistry::default());
    let addr = http::bind(Arc::clone(&tokens), heart.clone(), stop.clone()).await?;
    let socket = socket::bind(Arc::clone(&tokens), heart, stop)?;
    let stdio = match std::env::current_exe() {
        Ok(command) => Some(StdioOffer {
            command: command.to_string_lossy().into(),
            socket: socket.into(),
        }),
        Err(error) => {
            tracing::warn!(%error, "this executable's path is unknown: agents without MCP over HTTP get no MCP server");
            None
        }
    };
    Ok(Some(McpOffers {
        tokens,
        url: format!("http://{addr}{}", http::PATH).into(),
        stdio,
    }))
}
