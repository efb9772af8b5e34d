//! The `mcpServers` entry each session is offered: the shape the ACP
//! schema gives an HTTP server, and the agents read (see
//! notes/research-24.md §2): `{"type":"http","name","url","headers":[{name,value}]}`,
//! with `headers` an array (gemini maps over it; a missing one crashes it).
//! Offered only to agents whose `initialize` says `mcpCapabilities.http`
//! ([`acp_client::AgentInfo::mcp_http`]);
//! `sse` is never offered (codex refuses a whole `session/new` over it).
//! Other agents get the stdio entry: `acp-bridge mcp` (this very
//! executable), which carries the session's stdio to the server's local
//! socket: `{"name","command","args":["mcp"],"env":[{name,value}]}`, with
//! no `type` (claude-agent-acp drops an entry typed `stdio`) and `args`
//! and `env` always present (qwen-code ignores a stdio entry without
//! them). The token goes in `env`, never in `args`: any local user can
//! read a process's argv.

use serde_json::{Value, json};

use super::socket::{SOCKET_ENV, TOKEN_ENV};
use super::tokens::Token;

/// The server's name as the agents show it (claude: `mcp__acp_bridge__post_message`).
/// Letters, digits and `_` only: codex checks server names.
pub(crate) const SERVER_NAME: &str = "acp_bridge";

/// The entry for the server at `url`, authorised by `token`.
pub(crate) fn http_entry(url: &str, token: &Token) -> Value {
    remote_entry(
        "http",
        SERVER_NAME,
        url,
        &[("Authorization", &format!("Bearer {}", token.expose()))],
    )
}

/// The stdio entry: `command mcp`, told the socket's name and the token
/// in its environment.
pub(crate) fn stdio_entry(command: &str, socket: &str, token: &Token) -> Value {
    command_entry(
        SERVER_NAME,
        command,
        &["mcp"],
        &[(TOKEN_ENV, token.expose()), (SOCKET_ENV, socket)],
    )
}

/// An entry of a server over `kind` (`http` or `sse`) at `url`: the
/// headers as an array of `{name, value}`, present even when empty.
pub(crate) fn remote_entry(kind: &str, name: &str, url: &str, headers: &[(&str, &str)]) -> Value {
    json!({"type": kind, "name": name, "url": url, "headers": pairs(headers)})
}

/// An entry of a server the agent runs: no `type`, `args` and `env` (an
/// array of `{name, value}`) present even when empty.
pub(crate) fn command_entry(name: &str, command: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    json!({"name": name, "command": command, "args": args, "env": pairs(env)})
}

fn pairs(pairs: &[(&str, &str)]) -> Vec<Value> {
    pairs
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect()
}

#[cfg(test)]
mod tests {

    use acp_bridge_core::mention::ConversationKey;

    use super::*;
    use crate::tools::mcp::tokens::TokenRegistry;

    #[test]
    fn the_http_entry_has_the_acp_schema_shape() {
        let registry = TokenRegistry::default();
        let token = registry
            .token_for(&ConversationKey::from_journal("c"), 0)
            .expect("token");
        let entry = http_entry("http://127.0.0.1:4000/mcp", &token);
        assert_eq!(
            entry,
            json!({
                "type": "http",
                "name": "acp_bridge",
                "url": "http://127.0.0.1:4000/mcp",
                "headers": [{"name": "Authorization", "value": format!("Bearer {}", token.expose())}],
            })
        );
    }

    #[test]
    fn the_stdio_entry_has_no_type_and_keeps_the_token_out_of_argv() {
        let registry = TokenRegistry::default();
        let token = registry
            .token_for(&ConversationKey::from_journal("c"), 0)
            .expect("token");
        let entry = stdio_entry("/usr/bin/acp-bridge", "acp-bridge-mcp-00", &token);
        assert_eq!(
            entry,
            json!({
                "name": "acp_bridge",
                "command": "/usr/bin/acp-bridge",
                "args": ["mcp"],
                "env": [
                    {"name": "ACP_BRIDGE_MCP_TOKEN", "value": token.expose()},
                    {"name": "ACP_BRIDGE_MCP_SOCKET", "value": "acp-bridge-mcp-00"},
                ],
            })
        );
    }
}
