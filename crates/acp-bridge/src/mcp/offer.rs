//! The `mcpServers` entry each session is offered: the shape the ACP
//! schema gives an HTTP server, and the agents read (see
//! notes/research-24.md §2): `{"type":"http","name","url","headers":[{name,value}]}`,
//! with `headers` an array (gemini maps over it; a missing one crashes it).
//! Offered only to agents whose `initialize` says `mcpCapabilities.http`
//! ([`acp_client::AgentInfo::mcp_http`]);
//! `sse` is never offered (codex refuses a whole `session/new` over it).

use serde_json::{Value, json};

use super::tokens::Token;

/// The server's name as the agents show it (claude: `mcp__acp_bridge__post_message`).
/// Letters, digits and `_` only: codex checks server names.
pub(crate) const SERVER_NAME: &str = "acp_bridge";

/// The entry for the server at `url`, authorised by `token`.
pub(crate) fn http_entry(url: &str, token: &Token) -> Value {
    json!({
        "type": "http",
        "name": SERVER_NAME,
        "url": url,
        "headers": [{"name": "Authorization", "value": format!("Bearer {}", token.expose())}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tokens::TokenRegistry;
    use crate::mention::ConversationKey;

    #[test]
    fn the_http_entry_has_the_acp_schema_shape() {
        let registry = TokenRegistry::default();
        let token = registry
            .token_for(&ConversationKey::from_journal("c"))
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
}
