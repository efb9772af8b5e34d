//! The HTTP half of the agent's MCP client: an rmcp client transport
//! that POSTs each JSON-RPC message to the offered URL with the offer's
//! headers and hands the JSON answer back to rmcp. Plain HTTP/1.0 over a
//! `TcpStream`, one connection per message: the answer ends when the
//! server closes, with no chunked encoding, which is all the bridge's
//! loopback server (stateless, JSON answers) needs, and no HTTP client
//! crate. A refused POST (`HTTP 401`) is the transport's error. Once the
//! server has answered `initialize`, each request names the protocol
//! version it chose in `MCP-Protocol-Version`, as the spec asks.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};

use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// The largest answer read from the server.
const MAX_ANSWER_BYTES: u64 = 1024 * 1024;

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
    pub(crate) fn from_entry(entry: &Value) -> Option<HttpServer> {
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

    /// The same server, presented with `token` instead of its own.
    pub(crate) fn with_token(mut self, token: &str) -> HttpServer {
        for (name, value) in &mut self.headers {
            if name.eq_ignore_ascii_case("authorization") {
                *value = format!("Bearer {token}");
            }
        }
        self
    }
}

/// Why a message did not get through: `HTTP 401`, `cannot connect: …`.
#[derive(Debug)]
pub(crate) struct PostError(String);

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PostError {}

/// rmcp's client transport over [`post`]: what the server answers to a
/// POST is what rmcp receives next.
pub(crate) struct PostTransport {
    server: Arc<HttpServer>,
    /// The protocol version the server's `initialize` answer chose.
    version: Arc<Mutex<Option<String>>>,
    answered: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    answers: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
}

impl PostTransport {
    pub(crate) fn new(server: HttpServer) -> PostTransport {
        let (answered, answers) = mpsc::unbounded_channel();
        PostTransport {
            server: Arc::new(server),
            version: Arc::default(),
            answered,
            answers,
        }
    }
}

impl Transport<RoleClient> for PostTransport {
    type Error = PostError;

    fn send(
        &mut self,
        message: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), PostError>> + Send + 'static {
        let server = Arc::clone(&self.server);
        let version = Arc::clone(&self.version);
        let answered = self.answered.clone();
        async move {
            let body = serde_json::to_string(&message).map_err(|error| PostError(error.to_string()))?;
            let chosen = version.lock().expect("version lock").clone();
            if let Some(answer) = post(&server, &body, chosen.as_deref()).await? {
                let answer: Value = serde_json::from_str(&answer)
                    .map_err(|error| PostError(format!("bad JSON answer: {error}")))?;
                if let Some(chosen) = answer["result"]["protocolVersion"].as_str() {
                    *version.lock().expect("version lock") = Some(chosen.to_owned());
                }
                let answer = serde_json::from_value(answer)
                    .map_err(|error| PostError(format!("not an MCP message: {error}")))?;
                let _ = answered.send(answer);
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.answers.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), PostError>> + Send {
        self.answers.close();
        std::future::ready(Ok(()))
    }
}

/// POSTs one JSON-RPC message, naming the protocol `version` once one is
/// chosen; the answer's body (`None` for a 202), or why there is none.
async fn post(server: &HttpServer, body: &str, version: Option<&str>) -> Result<Option<String>, PostError> {
    let mut request = format!(
        "POST {} HTTP/1.0\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        server.path,
        server.authority,
        body.len()
    );
    if let Some(version) = version {
        request.push_str(&format!("MCP-Protocol-Version: {version}\r\n"));
    }
    for (name, value) in &server.headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let mut stream = TcpStream::connect(&server.authority)
        .await
        .map_err(|error| PostError(format!("cannot connect: {error}")))?;
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|error| PostError(format!("cannot send: {error}")))?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER_BYTES)
        .read_to_end(&mut answer)
        .await
        .map_err(|error| PostError(format!("cannot read: {error}")))?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    match head.split(' ').nth(1).unwrap_or_default() {
        "200" => Ok(Some(body.trim().to_owned())),
        "202" => Ok(None),
        other => Err(PostError(format!("HTTP {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use crate::mcp_client::McpServer;
    use serde_json::json;

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
        let McpServer::Http(spoiled) = McpServer::Http(server).with_wrong_token() else {
            panic!("still an http entry");
        };
        assert_eq!(spoiled.headers[0].1, format!("Bearer {}", "0".repeat(64)));
        assert_eq!(McpServer::offered(&json!({"mcpServers": []})), None);
    }
}
