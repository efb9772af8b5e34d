//! The bridge's own MCP server, offered to every session (issue 24 §1).
//!
//! Owns the server's transports (loopback HTTP, [`http`]; a local socket
//! that `acp-bridge mcp` carries an agent's stdio to, [`socket`]), its tokens
//! ([`tokens`]: one per conversation's session, bound to that conversation
//! only), the `mcpServers` entry each session is offered ([`offer`]), and
//! the operator's servers offered beside it ([`operator`],
//! `--mcp-servers`). It serves the tools but does not own them: they are
//! [`crate::tools`], one file each, and each call
//! becomes a [`ToolRequest`] to the heart, which owns turns and replies.
//! The pool asks [`McpOffers`] (through its `pool::McpOffer` trait, which
//! `daemon` hands it) for a session's entry on `session/new`,
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
mod operator;
mod socket;
mod tcp_owner;
mod tokens;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use acp_bridge_core::mention::ConversationKey;
use acp_client::AgentInfo;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::tools::ToolRequest;
use args::{McpMode, McpSettings};
pub(crate) use offer::SERVER_NAME;
use operator::OperatorServer;
pub(crate) use socket::{SOCKET_ENV, TOKEN_ENV, abstract_address};

use crate::agents::pool::McpOffer;
use tokens::TokenRegistry;

/// Tool calls waiting for the heart; a tool waits when it is full.
pub(crate) const TOOL_REQUEST_QUEUE: usize = 256;

/// What the pool offers each session: the bridge's own server (its
/// addresses and the conversations' tokens) and the operator's servers.
/// Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct McpOffers {
    /// `None` with `--mcp off`.
    own: Option<OwnServer>,
    /// `--mcp-servers`.
    operator: Arc<[OperatorServer]>,
    /// (agent, server) pairs already logged as left out.
    left_out: Arc<Mutex<HashSet<(String, String)>>>,
}

/// The bridge's own server, as sessions are offered it.
#[derive(Debug, Clone)]
struct OwnServer {
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
    /// What a profile's sessions are offered: the bridge's own server of
    /// `shared` (if any), and the profile's operator servers.
    pub(crate) fn for_profile(shared: Option<&McpOffers>, profile: &McpSettings) -> Option<McpOffers> {
        let own = shared.and_then(|offers| offers.own.clone());
        if own.is_none() && profile.operator.is_empty() {
            return None;
        }
        Some(McpOffers {
            own,
            operator: Arc::clone(&profile.operator),
            left_out: Arc::default(),
        })
    }

    /// Says once per agent that it is not offered `server`.
    fn log_left_out(&self, info: Option<&AgentInfo>, server: &OperatorServer) {
        let agent = info.and_then(|info| info.name.clone()).unwrap_or_default();
        let first = self
            .left_out
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert((agent.clone(), server.name().to_owned()));
        if first {
            tracing::info!(
                agent,
                server = server.name(),
                transport = server.kind(),
                "the agent does not advertise this MCP transport: the operator's server is left out of its sessions"
            );
        }
    }
}

impl McpOffer for McpOffers {
    /// The bridge's server (over HTTP when the agent takes it and `http`
    /// allows, else over stdio), then the operator's that the agent takes.
    fn servers(
        &self,
        info: Option<&AgentInfo>,
        conversation: &ConversationKey,
        (agent_uid, http): (u32, bool),
    ) -> Vec<Value> {
        let http = http && info.is_some_and(|info| info.mcp_http);
        let own = self
            .own
            .as_ref()
            .and_then(|own| own.entry(http, conversation, agent_uid));
        let operator = self.operator.iter().filter(|server| {
            let offered = server.offered_to(info);
            if !offered {
                self.log_left_out(info, server);
            }
            offered
        });
        own.into_iter()
            .chain(operator.map(OperatorServer::entry))
            .collect()
    }

    /// The conversation's session is forgotten: its token stops working.
    fn revoke(&self, conversation: &ConversationKey) {
        if let Some(own) = &self.own {
            own.tokens.revoke(conversation);
        }
    }
}

impl OwnServer {
    /// The conversation's entry: HTTP when `http`, else stdio.
    fn entry(&self, http: bool, conversation: &ConversationKey, agent_uid: u32) -> Option<Value> {
        if !http && self.stdio.is_none() {
            return None;
        }
        match self.tokens.token_for(conversation, agent_uid) {
            Ok(token) => Some(match (&self.stdio, http) {
                (Some(stdio), false) => offer::stdio_entry(&stdio.command, &stdio.socket, &token),
                _ => offer::http_entry(&self.url, &token),
            }),
            Err(error) => {
                tracing::error!(%conversation, %error, "the session is opened without the bridge's MCP server");
                None
            }
        }
    }

    /// Binds the loopback listener and the local socket now; serves the
    /// processes of `callers` until `stop`.
    async fn start(
        heart: mpsc::Sender<ToolRequest>,
        stop: CancellationToken,
        callers: Vec<u32>,
    ) -> std::io::Result<OwnServer> {
        let tokens = Arc::new(TokenRegistry::default());
        let addr = http::bind(Arc::clone(&tokens), heart.clone(), stop.clone(), callers).await?;
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
        Ok(OwnServer {
            tokens,
            url: format!("http://{addr}{}", http::PATH).into(),
            stdio,
        })
    }
}

/// Starts the bridge's own server unless `--mcp off` (its loopback
/// listener and local socket bound now, served until `stop`; tool calls go
/// to `heart`). Over HTTP only processes of the daemon's user and of
/// `agent_uids` are served. `None` when there is nothing to offer: `--mcp
/// off` and no operator servers.
pub(crate) async fn start(
    settings: McpSettings,
    agent_uids: impl IntoIterator<Item = u32>,
    heart: mpsc::Sender<ToolRequest>,
    stop: CancellationToken,
) -> std::io::Result<Option<McpOffers>> {
    let mut callers: Vec<u32> = agent_uids.into_iter().collect();
    callers.push(nix::unistd::geteuid().as_raw());
    callers.sort_unstable();
    callers.dedup();
    let own = match settings.mode {
        McpMode::Off => None,
        McpMode::Auto => Some(OwnServer::start(heart, stop, callers).await?),
    };
    if own.is_none() && settings.operator.is_empty() {
        return Ok(None);
    }
    Ok(Some(McpOffers {
        own,
        operator: settings.operator,
        left_out: Arc::default(),
    }))
}
