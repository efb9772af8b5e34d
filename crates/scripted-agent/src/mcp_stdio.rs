//! The stdio half of the agent's MCP client: a stdio entry's command run
//! with its args and env (on top of the agent's own environment, as real
//! agents do), one process per tool call, whose stdout and stdin rmcp's
//! client speaks newline-delimited JSON-RPC on. `[mcp-wrong-token]`
//! replaces the entry's `ACP_BRIDGE_MCP_TOKEN` with a token nobody minted.

use std::process::Stdio;

use serde_json::Value;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The variable the bridge's stdio entry carries its token in.
const TOKEN_ENV: &str = "ACP_BRIDGE_MCP_TOKEN";

/// A stdio MCP server a session was offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StdioServer {
    command: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl StdioServer {
    /// The server of a stdio entry (`command`, `args`, `env: [{name, value}]`).
    pub(crate) fn from_entry(entry: &Value) -> Option<StdioServer> {
        let strings = |key: &str| -> Option<Vec<String>> {
            entry[key]
                .as_array()?
                .iter()
                .map(|value| value.as_str().map(str::to_owned))
                .collect()
        };
        let env = entry["env"]
            .as_array()?
            .iter()
            .map(|pair| {
                Some((
                    pair["name"].as_str()?.to_owned(),
                    pair["value"].as_str()?.to_owned(),
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(StdioServer {
            command: entry["command"].as_str()?.to_owned(),
            args: strings("args")?,
            env,
        })
    }

    /// The same server, presented with `token` instead of its own.
    pub(crate) fn with_token(mut self, token: &str) -> StdioServer {
        for (name, value) in &mut self.env {
            if name == TOKEN_ENV {
                *value = token.to_owned();
            }
        }
        self
    }

    /// Starts the command for one tool call: the process (killed when
    /// dropped) and its stdout and stdin, for rmcp.
    pub(crate) fn spawn(&self) -> Result<(Child, (ChildStdout, ChildStdin)), String> {
        let mut child = Command::new(&self.command)
            .args(&self.args)
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| format!("cannot start {}: {error}", self.command))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        Ok((child, (stdout, stdin)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp_client::McpServer;
    use serde_json::json;

    #[test]
    fn a_stdio_entry_is_read_and_its_token_can_be_spoiled() {
        let entry = json!({"name": "acp_bridge", "command": "/bin/acp-bridge", "args": ["mcp"],
            "env": [{"name": TOKEN_ENV, "value": "abc"}, {"name": "ACP_BRIDGE_MCP_SOCKET", "value": "s"}]});
        let server = StdioServer::from_entry(&entry).expect("a stdio entry");
        assert_eq!(server.command, "/bin/acp-bridge");
        assert_eq!(server.args, vec!["mcp".to_owned()]);
        let McpServer::Stdio(spoiled) = McpServer::Stdio(server).with_wrong_token() else {
            panic!("still a stdio entry");
        };
        assert_eq!(spoiled.env[0], (TOKEN_ENV.to_owned(), "0".repeat(64)));
        assert_eq!(spoiled.env[1].1, "s");
        assert_eq!(
            StdioServer::from_entry(&json!({"name": "x", "command": "/bin/x"})),
            None
        );
    }
}
