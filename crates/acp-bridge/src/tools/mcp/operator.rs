//! The operator's MCP servers (`--mcp-servers FILE`): read once at start,
//! offered to every session beside the bridge's own.
//!
//! The file has the shape Claude Desktop and Cursor use:
//! `{"mcpServers": {"NAME": {"command", "args", "env": {K: V}}}}` for a
//! stdio server (`"type": "stdio"` may be given), and
//! `{"type": "http" | "sse", "url", "headers": {K: V}}` for the others.
//! A secret is written as `${VARIABLE}` inside a string of `args`, `env`,
//! `url` or `headers`, and taken from the daemon's environment at start;
//! a variable that is not set refuses the start, naming the server and the
//! variable, never a value. Resolved values are never logged: `Debug`
//! shows names and transports only.
//!
//! Each session gets the servers converted into the ACP shape (stdio:
//! `{name, command, args, env: [{name, value}]}` with no `type`; http and
//! sse: `{type, name, url, headers: [{name, value}]}`), filtered by what
//! the agent advertises: http only with `mcpCapabilities.http`, sse only
//! with `mcpCapabilities.sse` (codex refuses a whole `session/new` over an
//! sse entry), stdio always.
//!
//! Names are letters, digits, `_` and `-` (codex checks them); the bridge's
//! own `acp_bridge` is reserved.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use acp_client::AgentInfo;
use serde::Deserialize;
use serde_json::Value;

use super::offer::{self, SERVER_NAME};

/// The largest file read (a list of servers, not data).
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// The longest server name (codex and claude put it in tool names).
const MAX_NAME_CHARS: usize = 64;

/// Why the file was refused, in one line (no resolved value in it).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum OperatorServersError {
    #[error("cannot read {path}: {why}")]
    Unreadable { path: String, why: String },
    #[error("{path} is not a valid MCP servers file: {why}")]
    Invalid { path: String, why: String },
}

/// One operator server, its secrets resolved.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct OperatorServer {
    name: String,
    transport: Transport,
}

#[derive(Clone, PartialEq, Eq)]
enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    Sse {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl Transport {
    fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
            Transport::Sse { .. } => "sse",
        }
    }
}

impl fmt::Debug for OperatorServer {
    /// Name and transport only: the rest may hold resolved secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.transport.kind())
    }
}

impl OperatorServer {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// `stdio`, `http` or `sse`.
    pub(crate) fn kind(&self) -> &'static str {
        self.transport.kind()
    }

    /// Whether the agent `info` describes takes this server's transport.
    pub(crate) fn offered_to(&self, info: Option<&AgentInfo>) -> bool {
        match self.transport {
            Transport::Stdio { .. } => true,
            Transport::Http { .. } => info.is_some_and(|info| info.mcp_http),
            Transport::Sse { .. } => info.is_some_and(|info| info.mcp_sse),
        }
    }

    /// The `mcpServers` entry, in the ACP shape (see `offer`).
    pub(crate) fn entry(&self) -> Value {
        match &self.transport {
            Transport::Stdio { command, args, env } => {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                offer::command_entry(&self.name, command, &args, &borrowed(env))
            }
            Transport::Http { url, headers } => {
                offer::remote_entry("http", &self.name, url, &borrowed(headers))
            }
            Transport::Sse { url, headers } => {
                offer::remote_entry("sse", &self.name, url, &borrowed(headers))
            }
        }
    }
}

/// The file's shape.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    mcp_servers: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// Reads and resolves the file at `path`; `env` reads the daemon's
/// environment.
pub(crate) fn read(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<OperatorServer>, OperatorServersError> {
    let shown = path.display().to_string();
    let unreadable = |why: String| OperatorServersError::Unreadable {
        path: shown.clone(),
        why,
    };
    let metadata = std::fs::metadata(path).map_err(|error| unreadable(error.to_string()))?;
    if metadata.len() > MAX_FILE_BYTES {
        return Err(unreadable(format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    let text = std::fs::read_to_string(path).map_err(|error| unreadable(error.to_string()))?;
    parse(&text, env).map_err(|why| OperatorServersError::Invalid { path: shown, why })
}

/// The servers `text` describes, resolved; `Err` says why not in a phrase.
fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<OperatorServer>, String> {
    let file: File = serde_json::from_str(text).map_err(|error| error.to_string())?;
    file.mcp_servers
        .into_iter()
        .map(|(name, entry)| {
            check_name(&name)?;
            let transport = transport(entry, env).map_err(|why| format!("server `{name}`: {why}"))?;
            Ok(OperatorServer { name, transport })
        })
        .collect()
}

fn check_name(name: &str) -> Result<(), String> {
    if name == SERVER_NAME {
        return Err(format!("the name `{SERVER_NAME}` is the bridge's own server's"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS || !name.chars().all(allowed) {
        return Err(format!(
            "server name `{name}`: use 1 to {MAX_NAME_CHARS} letters, digits, `_` or `-`"
        ));
    }
    Ok(())
}

fn transport(entry: Entry, env: &dyn Fn(&str) -> Option<String>) -> Result<Transport, String> {
    let resolve = |value: &str| resolve(value, env);
    let pairs = |map: BTreeMap<String, String>| -> Result<Vec<(String, String)>, String> {
        map.into_iter()
            .map(|(key, value)| Ok((key, resolve(&value)?)))
            .collect()
    };
    match (entry.kind.as_deref(), entry.command, entry.url) {
        (None | Some("stdio"), Some(command), None) => {
            if !entry.headers.is_empty() {
                return Err("a stdio server takes `env`, not `headers`".to_owned());
            }
            Ok(Transport::Stdio {
                command,
                args: entry
                    .args
                    .iter()
                    .map(|arg| resolve(arg))
                    .collect::<Result<_, _>>()?,
                env: pairs(entry.env)?,
            })
        }
        (Some(kind @ ("http" | "sse")), None, Some(url)) => {
            if !entry.args.is_empty() || !entry.env.is_empty() {
                return Err(format!("an {kind} server takes `url` and `headers` only"));
            }
            let (url, headers) = (resolve(&url)?, pairs(entry.headers)?);
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err("`url` must be http:// or https://".to_owned());
            }
            Ok(if kind == "http" {
                Transport::Http { url, headers }
            } else {
                Transport::Sse { url, headers }
            })
        }
        (None | Some("stdio"), _, _) => Err("a stdio server needs `command` (and no `url`)".to_owned()),
        (Some(kind @ ("http" | "sse")), _, _) => {
            Err(format!("an {kind} server needs `url` (and no `command`)"))
        }
        (Some(other), _, _) => Err(format!("unknown type `{other}` (stdio, http or sse)")),
    }
}

/// `value` with each `${VARIABLE}` replaced by the variable's value.
fn resolve(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut resolved = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        resolved.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| "a `${` without its `}`".to_owned())?;
        let name = &after[..end];
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!("`${{{name}}}` is not a variable name"));
        }
        let found = env(name).ok_or_else(|| format!("${{{name}}} is not set in the daemon's environment"))?;
        resolved.push_str(&found);
        rest = &after[end + 1..];
    }
    resolved.push_str(rest);
    Ok(resolved)
}

/// `pairs` as the `(name, value)` slices `offer` takes.
fn borrowed(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(name: &str) -> Option<String> {
        (name == "GITHUB_TOKEN").then(|| "s3cret".to_owned())
    }

    fn info(capabilities: Value) -> AgentInfo {
        AgentInfo::from_initialize_result(
            &json!({"protocolVersion": 1, "agentCapabilities": {"mcpCapabilities": capabilities}}),
        )
    }

    #[test]
    fn each_shape_becomes_its_acp_entry_with_secrets_resolved() {
        let servers = parse(
            r#"{"mcpServers": {
                "github": {"command": "npx", "args": ["-y", "server-github"], "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}},
                "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}},
                "events": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
                "plain": {"type": "stdio", "command": "/bin/x"}
            }}"#,
            &env,
        )
        .expect("valid");
        let entries: Vec<Value> = servers.iter().map(OperatorServer::entry).collect();
        assert_eq!(
            entries,
            vec![
                json!({"type": "http", "name": "docs", "url": "https://docs.example/mcp",
                       "headers": [{"name": "Authorization", "value": "Bearer s3cret"}]}),
                json!({"type": "sse", "name": "events", "url": "http://127.0.0.1:9/sse", "headers": []}),
                json!({"name": "github", "command": "npx", "args": ["-y", "server-github"],
                       "env": [{"name": "GITHUB_TOKEN", "value": "s3cret"}]}),
                json!({"name": "plain", "command": "/bin/x", "args": [], "env": []}),
            ]
        );
        let shown = format!("{servers:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn servers_are_offered_by_what_the_agent_advertises() {
        let servers = parse(
            r#"{"mcpServers": {"h": {"type": "http", "url": "http://a/"}, "s": {"type": "sse", "url": "http://a/"}, "c": {"command": "x"}}}"#,
            &env,
        )
        .expect("valid");
        let offered = |info: Option<&AgentInfo>| -> Vec<&str> {
            servers
                .iter()
                .filter(|server| server.offered_to(info))
                .map(OperatorServer::name)
                .collect()
        };
        assert_eq!(
            offered(Some(&info(json!({"http": true, "sse": true})))),
            ["c", "h", "s"]
        );
        assert_eq!(offered(Some(&info(json!({"http": true})))), ["c", "h"]);
        assert_eq!(offered(Some(&info(json!({"sse": true})))), ["c", "s"]);
        assert_eq!(offered(None), ["c"]);
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let refused = |text: &str| parse(text, &env).expect_err(text);
        assert!(refused("{").contains("EOF"));
        assert!(refused(r#"{"servers": {}}"#).contains("unknown field"));
        assert!(refused(r#"{"mcpServers": {"acp_bridge": {"command": "x"}}}"#).contains("bridge's own"));
        assert!(refused(r#"{"mcpServers": {"a b": {"command": "x"}}}"#).contains("letters, digits"));
        assert!(
            refused(r#"{"mcpServers": {"a": {"command": "x", "cwd": "/"}}}"#).contains("unknown field `cwd`")
        );
        assert!(refused(r#"{"mcpServers": {"a": {"args": []}}}"#).contains("needs `command`"));
        assert!(
            refused(r#"{"mcpServers": {"a": {"type": "http", "command": "x"}}}"#).contains("needs `url`")
        );
        assert!(
            refused(r#"{"mcpServers": {"a": {"type": "ws", "url": "x"}}}"#).contains("unknown type `ws`")
        );
        assert!(refused(r#"{"mcpServers": {"a": {"type": "http", "url": "ftp://x"}}}"#).contains("http://"));
        assert!(
            refused(r#"{"mcpServers": {"a": {"type": "http", "url": "http://x", "env": {"A": "b"}}}}"#)
                .contains("`url` and `headers` only")
        );
    }

    #[test]
    fn variables_are_resolved_or_refused_by_name() {
        assert_eq!(resolve("a ${GITHUB_TOKEN} b", &env).as_deref(), Ok("a s3cret b"));
        assert_eq!(
            resolve("no variable $HOME", &env).as_deref(),
            Ok("no variable $HOME")
        );
        let missing = resolve("${MISSING}", &env).expect_err("missing");
        assert_eq!(missing, "${MISSING} is not set in the daemon's environment");
        assert!(
            resolve("${GITHUB_TOKEN", &env)
                .expect_err("open")
                .contains("without")
        );
        assert!(
            resolve("${1X}", &env)
                .expect_err("bad")
                .contains("not a variable name")
        );
        let refused = parse(
            r#"{"mcpServers": {"github": {"command": "x", "env": {"T": "${MISSING}"}}}}"#,
            &env,
        )
        .expect_err("missing");
        assert_eq!(
            refused,
            "server `github`: ${MISSING} is not set in the daemon's environment"
        );
    }

    #[test]
    fn an_unreadable_file_is_named() {
        let error = read(Path::new("/nonexistent/servers.json"), &env).expect_err("missing");
        assert!(
            error
                .to_string()
                .starts_with("cannot read /nonexistent/servers.json: ")
        );
    }
}
