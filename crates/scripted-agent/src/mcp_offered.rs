//! `[say-mcp-servers]`: the final message gets a line naming the MCP
//! servers the session was offered, so a test sees what reached the agent
//! without the agent ever repeating a secret: each server's name and
//! transport, a stdio server's command, and the names of its `env` (or
//! `headers`) with whether each value is empty, never the value.

use serde_json::Value;

/// `mcp servers: NAME (stdio COMMAND; env A=set B=empty), NAME (http; headers H=set)`,
/// or `mcp servers: none`.
pub(crate) fn summary(params: &Value) -> String {
    let servers: Vec<String> = params["mcpServers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(describe)
        .collect();
    if servers.is_empty() {
        return "mcp servers: none".to_owned();
    }
    format!("mcp servers: {}", servers.join(", "))
}

fn describe(entry: &Value) -> String {
    let name = entry["name"].as_str().unwrap_or("?");
    let (transport, pairs_key) = match entry["type"].as_str() {
        Some(kind) => (kind.to_owned(), "headers"),
        None => (
            format!("stdio {}", entry["command"].as_str().unwrap_or("?")),
            "env",
        ),
    };
    let pairs: Vec<String> = entry[pairs_key]
        .as_array()
        .into_iter()
        .flatten()
        .map(|pair| {
            let filled = pair["value"].as_str().is_some_and(|value| !value.is_empty());
            format!(
                "{}={}",
                pair["name"].as_str().unwrap_or("?"),
                if filled { "set" } else { "empty" }
            )
        })
        .collect();
    format!("{name} ({transport}; {pairs_key} {})", pairs.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_transports_and_variable_names_never_values() {
        let params = json!({"mcpServers": [
            {"name": "gh", "command": "/bin/gh", "args": [], "env": [
                {"name": "TOKEN", "value": "s3cret"}, {"name": "EMPTY", "value": ""}]},
            {"type": "http", "name": "docs", "url": "http://x/", "headers": [{"name": "Authorization", "value": "Bearer s3cret"}]},
        ]});
        let line = summary(&params);
        assert_eq!(
            line,
            "mcp servers: gh (stdio /bin/gh; env TOKEN=set EMPTY=empty), docs (http; headers Authorization=set)"
        );
        assert!(!line.contains("s3cret"));
        assert_eq!(summary(&json!({"mcpServers": []})), "mcp servers: none");
    }
}
