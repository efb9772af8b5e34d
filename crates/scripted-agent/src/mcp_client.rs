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

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest answer read from the server.
const MAX_ANSWER_BYTES: u64 = 1024 * 1024;
/// The MCP protocol version the client asks for.
const PROTOCOL_VERSION: &str = "2025-06-18";

use crate::mcp_stdio::StdioServer;

/// The name the bridge's own MCP server is offered under.
const BRIDGE_SERVER_NAME: &str = "acp_bridge";
/// A token nobody minted (`[mcp-wrong-token]`).
pub(crate) fn wrong_token() -> String {
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
            McpServer::Http(server) => McpServer::Http(server.with_wrong_token()),
            McpServer::Stdio(server) => McpServer::Stdio(server.with_wrong_token()),
        }
    }
}

/// An HTTP MCP server a session was offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpServer {
    /// `host:port` of an `http://` URL.
    authority: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl HttpServer {
    /// The server of a `type: http` entry.
    fn from_entry(entry: &Value) -> Option<HttpServer> {
        let rest = entry["url"].as_str()?.strip_prefix("http://")?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let headers = entry["headers"]
            .as_array()?
            .iter()
            .filter_map(|header| {
                Some((
                    header["name"].as_str()?.to_owned(),
                    header["value"].as_str()?.to_owned(),
                ))
            })
            .collect();
        Some(HttpServer {
            authority: authority.to_owned(),
            path: format!("/{path}"),
            headers,
        })
    }

    /// The same server, presented with a token nobody minted.
    pub(crate) fn with_wrong_token(mut self) -> HttpServer {
        for (name, value) in &mut self.headers {
            if name.eq_ignore_ascii_case("authorization") {
                *value = format!("Bearer {}", wrong_token());
            }
        }
        self
    }
}

/// Calls `tool` with `arguments` and says how it went, in one line.
pub(crate) async fn call_tool(server: &McpServer, tool: &str, arguments: Value) -> String {
    let outcome = async {
        let mut connection = match server {
            McpServer::Http(server) => Connection::Http(server),
            McpServer::Stdio(server) => Connection::Stdio(Box::new(server.spawn()?)),
        };
        let initialize = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "scripted-agent", "version": env!("CARGO_PKG_VERSION")},
            },
        });
        connection.send(&initialize).await?;
        connection
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        let call = json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        });
        connection.send(&call).await
    };
    let line = match outcome.await {
        Ok(answer) => {
            let result = &answer["result"];
            let text = result["content"][0]["text"].as_str().unwrap_or_default();
            match (result.is_object(), result["isError"] == true) {
                (true, false) => format!("ok: {text}"),
                (true, true) => format!("error: {text}"),
                (false, _) => format!("protocol error: {}", answer["error"]),
            }
        }
        Err(why) => why,
    };
    format!("mcp {tool}: {line}")
}

/// Where the messages of one tool call go.
enum Connection<'a> {
    Http(&'a HttpServer),
    Stdio(Box<crate::mcp_stdio::StdioConnection>),
}

impl Connection<'_> {
    /// Sends one JSON-RPC message; the answer to a request, `null` for a
    /// notification, or why there is none.
    async fn send(&mut self, message: &Value) -> Result<Value, String> {
        match self {
            Connection::Http(server) => post(server, message).await,
            Connection::Stdio(connection) => connection.send(message).await,
        }
    }
}

/// POSTs one JSON-RPC message; the answer's JSON (`null` for a 202), or
/// why there is none.
async fn post(server: &HttpServer, message: &Value) -> Result<Value, String> {
    let body = message.to_string();
    let mut request = format!(
        "POST {} HTTP/1.0\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL_VERSION}\r\nContent-Length: {}\r\n",
        server.path,
        server.authority,
        body.len()
    );
    for (name, value) in &server.headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut stream = TcpStream::connect(&server.authority)
        .await
        .map_err(|error| format!("cannot connect: {error}"))?;
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|error| format!("cannot send: {error}"))?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER_BYTES)
        .read_to_end(&mut answer)
        .await
        .map_err(|error| format!("cannot read: {error}"))?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split(' ').nth(1).unwrap_or_default();
    match status {
        "200" => serde_json::from_str(body.trim()).map_err(|error| format!("bad JSON answer: {error}")),
        "202" => Ok(Value::Null),
        other => Err(format!("HTTP {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_http_entry_of_an_offer_is_read_and_its_token_can_be_spoiled() {
        let params = json!({"mcpServers": [
            {"name": "other", "command": "/bin/x", "args": [], "env": []},
            {"type": "http", "name": "acp_bridge", "url": "http://127.0.0.1:4000/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer abc"}]},
        ]});
        let Some(McpServer::Http(server)) = McpServer::offered(&params) else {
            panic!("an http entry");
        };
        assert_eq!(server.authority, "127.0.0.1:4000");
        assert_eq!(server.path, "/mcp");
        assert_eq!(
            server.headers,
            vec![("Authorization".to_owned(), "Bearer abc".to_owned())]
        );
        let spoiled = server.with_wrong_token();
        assert_eq!(spoiled.headers[0].1, format!("Bearer {}", "0".repeat(64)));
        assert_eq!(McpServer::offered(&json!({"mcpServers": []})), None);
    }
}
