//! What the pool asks of the MCP servers its sessions are offered. A
//! trait on the pool's side, implemented by `mcp` and handed in by
//! `daemon`, so that the agents' wing does not import the tools' wing
//! (the tools may import the agents', as `send_file` reads workspaces).

use acp_client::AgentInfo;
use serde_json::Value;

use acp_bridge_core::mention::ConversationKey;

/// The `mcpServers` a profile's sessions are offered, and the tokens
/// behind them.
pub(crate) trait McpOffer: std::fmt::Debug + Send + Sync {
    /// The `mcpServers` of the conversation's session on the agent `info`
    /// describes, running as `agent_uid`; `http`: whether the bridge's own
    /// server may be offered over HTTP (else over stdio).
    fn servers(
        &self,
        info: Option<&AgentInfo>,
        conversation: &ConversationKey,
        agent_uid_and_http: (u32, bool),
    ) -> Vec<Value>;

    /// The conversation's session is forgotten or closed: what it was
    /// offered stops working (its token is revoked).
    fn revoke(&self, conversation: &ConversationKey);
}
