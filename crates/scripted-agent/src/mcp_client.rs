//! `[mcp-post=TEXT]`: the agent calls the `post_message` tool of the MCP
//! server its client offered in `session/new` (or `session/load`,
//! `session/resume`) as `acp_bridge`, as a real agent's MCP client would:
//! `initialize`, `notifications/initialized`, then `tools/call`. Over HTTP
//! each is a JSON-RPC POST carrying the headers the offer gave; over stdio
//! (a stdio entry: the agent was started with `--no-mcp-http`) each is a
//! line to the command the entry names (see `mcp_stdio`).
//! `[mcp-wrong-token]` presents a token that was never minted instead.
//!
//! Plain HTTP/1.0 over a `TcpStream`, one connection per request: the
//! answer ends when the server closes, with no chunked encoding, which is
//! all a loopback test server needs and no HTTP client crate. What the
//! final message says: `mcp post_message: ok: …`, `… error: …` (the tool
//! refused) or `… HTTP 401` (the server did; over stdio, `… the server
//! closed the connection`).

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::ClientInitializeError;
use serde_json::Value;

pub(crate) use crate::mcp_http::HttpServer;
use crate::mcp_http::PostTransport;
use crate::mcp_stdio::StdioServer;

/// The name the bridge's own MCP server is offered under.
const BRIDGE_SERVER_NAME: &str = "acp_bridge";
/// A token nobody minted (`[mcp-wrong-token]`).
fn wrong_token() -> String {
    "0".repeat(64)
}

/// The bridge's MCP server as a session was offered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum McpServer {
    Http(HttpServer),
    Stdio(StdioServer),
}

impl McpServer {
    /// The `acp_bridge` entry of a session's `mcpServers`: HTTP when it
    /// has a `type: http`, stdio when it names a `command`.
    pub(crate) fn offered(params: &Value) -> Option<McpServer> {
        let entry = params["mcpServers"]
            .as_array()?
            .iter()
            .find(|entry| entry["name"] == BRIDGE_SERVER_NAME)?;
        if entry["type"] == "http" {
            HttpServer::from_entry(entry).map(McpServer::Http)
        } else {
            StdioServer::from_entry(entry).map(McpServer::Stdio)
        }
    }

    /// The same server, presented with a token nobody minted.
    pub(crate) fn with_wrong_token(self) -> McpServer {
        match self {
            McpServer::Http(server) => McpServer::Http(server.with_token(&wrong_token())),
            McpServer::Stdio(server) => McpServer::Stdio(server.with_token(&wrong_token())),
        }
    }
}

/// Calls `tool` with `arguments` through rmcp's client (the official Rust
/// MCP SDK's: `initialize`, `notifications/initialized`, `tools/call`) and
/// says how it went, in one line.
pub(crate) async fn call_tool(server: &McpServer, tool: &str, arguments: Value) -> String {
    let line = match call(server, tool, arguments).await {
        Ok(result) => {
            let text = result
                .content
                .first()
                .and_then(|block| block.as_text())
                .map_or("", |text| text.text.as_str());
            if result.is_error == Some(true) {
                format!("error: {text}")
            } else {
                format!("ok: {text}")
            }
        }
        Err(why) => why,
    };
    format!("mcp {tool}: {line}")
}

/// One tool call on a connection of its own; why not, when the server
/// refused the connection or the call.
async fn call(server: &McpServer, tool: &str, arguments: Value) -> Result<CallToolResult, String> {
    // A stdio server's process lives as long as its connection.
    let mut _process = None;
    let connected = match server {
        McpServer::Http(server) => ().serve(PostTransport::new(server.clone())).await,
        McpServer::Stdio(server) => {
            let (process, stdio) = server.spawn()?;
            _process = Some(process);
            ().serve(stdio).await
        }
    };
    let client = connected.map_err(|error| match error {
        ClientInitializeError::TransportError { error, .. } => error.error.to_string(),
        ClientInitializeError::ConnectionClosed(_) => "the server closed the connection".to_owned(),
        other => format!("protocol error: {other}"),
    })?;
    let mut call = CallToolRequestParams::new(tool.to_owned());
    if let Value::Object(arguments) = arguments {
        call = call.with_arguments(arguments);
    }
    let result = client
        .call_tool(call)
        .await
        .map_err(|error| format!("protocol error: {error}"));
    let _ = client.cancel().await;
    result
}
