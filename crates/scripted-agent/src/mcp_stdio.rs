//! The stdio half of the agent's MCP client: a stdio entry's command run
//! with its args and env (on top of the agent's own environment, as real
//! agents do), spoken to in newline-delimited JSON-RPC, one process per
//! tool call. `[mcp-wrong-token]` replaces the entry's
//! `ACP_BRIDGE_MCP_TOKEN` with a token nobody minted.

use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::mcp_client::wrong_token;

/// The variable the bridge's stdio entry carries its token in.
const TOKEN_ENV: &str = "ACP_BRIDGE_MCP_TOKEN";
/// Lines read while waiting for an answer (notifications come between).
const MAX_LINES_PER_ANSWER: usize = 64;

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

    /// The same server, presented with a token nobody minted.
    pub(crate) fn with_wrong_token(mut self) -> StdioServer {
        for (name, value) in &mut self.env {
            if name == TOKEN_ENV {
                *value = wrong_token();
            }
        }
        self
    }

    /// Starts the command for one tool call.
    pub(crate) fn spawn(&self) -> Result<StdioConnection, String> {
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
        Ok(StdioConnection {
            _child: child,
            stdin,
            stdout: BufReader::new(stdout),
        })
    }
}

/// A running stdio server; killed when dropped.
pub(crate) struct StdioConnection {
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl StdioConnection {
    /// Writes `message` as one line; for a request, reads lines until its
    /// answer (`null` for a notification).
    pub(crate) async fn send(&mut self, message: &Value) -> Result<Value, String> {
        let line = format!("{message}\n");
        self.stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|error| format!("cannot send: {error}"))?;
        let Some(id) = message.get("id") else {
            return Ok(Value::Null);
        };
        for _ in 0..MAX_LINES_PER_ANSWER {
            let mut line = String::new();
            let read = self
                .stdout
                .read_line(&mut line)
                .await
                .map_err(|error| format!("cannot read: {error}"))?;
            if read == 0 {
                return Err("the server closed the connection".to_owned());
            }
            let answer: Value =
                serde_json::from_str(line.trim()).map_err(|error| format!("bad JSON answer: {error}"))?;
            if answer.get("id") == Some(id) {
                return Ok(answer);
            }
        }
        Err("no answer".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stdio_entry_is_read_and_its_token_can_be_spoiled() {
        let entry = json!({"name": "acp_bridge", "command": "/bin/acp-bridge", "args": ["mcp"],
            "env": [{"name": TOKEN_ENV, "value": "abc"}, {"name": "ACP_BRIDGE_MCP_SOCKET", "value": "s"}]});
        let server = StdioServer::from_entry(&entry).expect("a stdio entry");
        assert_eq!(server.command, "/bin/acp-bridge");
        assert_eq!(server.args, vec!["mcp".to_owned()]);
        let spoiled = server.with_wrong_token();
        assert_eq!(spoiled.env[0], (TOKEN_ENV.to_owned(), wrong_token()));
        assert_eq!(spoiled.env[1].1, "s");
        assert_eq!(
            StdioServer::from_entry(&json!({"name": "x", "command": "/bin/x"})),
            None
        );
    }
}
