//! `[mcp-post=TEXT]`: the agent calls the `post_message` tool of the HTTP
//! MCP server its client offered in `session/new` (or `session/load`,
//! `session/resume`), as a real agent's MCP client would: `initialize`,
//! `notifications/initialized`, then `tools/call`, each a JSON-RPC POST
//! carrying the headers the offer gave. `[mcp-wrong-token]` sends a bearer
//! token that was never minted instead.
//!
//! Plain HTTP/1.0 over a `TcpStream`, one connection per request: the
//! answer ends when the server closes, with no chunked encoding, which is
//! all a loopback test server needs and no HTTP client crate. What the
//! final message says: `mcp post_message: ok: …`, `… error: …` (the tool
//! refused) or `… HTTP 401` (the server did).

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest answer read from the server.
const MAX_ANSWER_BYTES: u64 = 1024 * 1024;
/// The MCP protocol version the client asks for.
const PROTOCOL_VERSION: &str = "2025-06-18";

/// An HTTP MCP server a session was offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpServer {
    /// `host:port` of an `http://` URL.
    authority: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl HttpServer {
    /// The first `type: http` entry of a session's `mcpServers`.
    pub(crate) fn offered(params: &Value) -> Option<HttpServer> {
        let entry = params["mcpServers"]
            .as_array()?
            .iter()
            .find(|entry| entry["type"] == "http")?;
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
                *value = format!("Bearer {}", "0".repeat(64));
            }
        }
        self
    }
}

/// Calls `tool` with `arguments` and says how it went, in one line.
pub(crate) async fn call_tool(server: &HttpServer, tool: &str, arguments: Value) -> String {
    let outcome = async {
        let initialize = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "scripted-agent", "version": env!("CARGO_PKG_VERSION")},
            },
        });
        post(server, &initialize).await?;
        post(
            server,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await?;
        let call = json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        });
        post(server, &call).await
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
        let server = HttpServer::offered(&params).expect("an http entry");
        assert_eq!(server.authority, "127.0.0.1:4000");
        assert_eq!(server.path, "/mcp");
        assert_eq!(
            server.headers,
            vec![("Authorization".to_owned(), "Bearer abc".to_owned())]
        );
        let spoiled = server.with_wrong_token();
        assert_eq!(spoiled.headers[0].1, format!("Bearer {}", "0".repeat(64)));
        assert_eq!(HttpServer::offered(&json!({"mcpServers": []})), None);
    }
}
