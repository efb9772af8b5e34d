//! The MCP servers' flags: the bridge's own (`--mcp`) and the operator's
//! (`--mcp-servers`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use super::operator::{self, OperatorServer};
use crate::base::flags::{ConfigError, flag_defaults, refuse};

/// Whether sessions are offered the bridge's own MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum McpMode {
    /// Offer none: agents get an empty `mcpServers`, as before issue 24.
    Off,
    /// Offer it over loopback HTTP to agents that advertise
    /// `mcpCapabilities.http`, over stdio (`acp-bridge mcp`) to the others.
    Auto,
}

/// The MCP servers' flags.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "MCP")]
pub struct McpArgs {
    /// The bridge's own MCP server for sessions: auto or off
    ///
    /// The bridge's own MCP server (`post_message`, `react`), offered to
    /// each session: `auto` over loopback HTTP to agents that advertise
    /// it and over stdio (`acp-bridge mcp`) to the others, `off` to none.
    #[arg(long, env = "ACP_BRIDGE_MCP", value_enum, default_value = "auto")]
    pub mcp: McpMode,

    /// A JSON file of MCP servers offered to every session
    ///
    /// A JSON file of MCP servers to offer every session beside the
    /// bridge's own (`{"mcpServers": {NAME: {command, args, env} | {type:
    /// http|sse, url, headers}}}`); secrets as `${VARIABLE}`, resolved
    /// from the daemon's environment at start. Read once (not on SIGHUP).
    #[arg(long, env = "ACP_BRIDGE_MCP_SERVERS", value_name = "FILE")]
    pub mcp_servers: Option<PathBuf>,
}

impl Default for McpArgs {
    fn default() -> Self {
        flag_defaults()
    }
}

/// The MCP servers' settings, the operator's file read and resolved.
#[derive(Debug, Clone)]
pub struct McpSettings {
    pub mode: McpMode,
    /// `--mcp-servers`, resolved (its values may be secrets: `Debug`
    /// shows names only).
    pub(crate) operator: Arc<[OperatorServer]>,
}

impl McpSettings {
    /// `mode`, with no operator servers (runs without a command line).
    pub fn without_operator_servers(mode: McpMode) -> McpSettings {
        McpSettings {
            mode,
            operator: Arc::new([]),
        }
    }
}

impl McpArgs {
    /// The flags an `[agents.NAME]` profile may set (see
    /// [`crate::agents::pool::args::AgentArgs::PROFILE_FLAGS`]): its agents may be
    /// offered servers of their own.
    pub(crate) const PROFILE_FLAGS: &[&str] = &["mcp-servers"];

    /// Reads `--mcp-servers`; `env` reads the daemon's environment.
    pub fn validate(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<McpSettings, ConfigError> {
        let operator = match &self.mcp_servers {
            Some(path) => {
                operator::read(path, env).map_err(|error| refuse("--mcp-servers", error.to_string()))?
            }
            None => Vec::new(),
        };
        Ok(McpSettings {
            mode: self.mcp,
            operator: operator.into(),
        })
    }
}
