//! The bridge's own MCP server's flag (`--mcp`).

use clap::{Args, ValueEnum};

use crate::flags::flag_defaults;

/// Whether sessions are offered the bridge's own MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum McpMode {
    /// Offer none: agents get an empty `mcpServers`, as before issue 24.
    Off,
    /// Offer it over loopback HTTP to agents that advertise
    /// `mcpCapabilities.http`, over stdio (`acp-bridge mcp`) to the others.
    Auto,
}

/// The MCP server's flags.
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// The bridge's own MCP server (`post_message`, `react`), offered to
    /// each session: `auto` over loopback HTTP to agents that advertise
    /// it and over stdio (`acp-bridge mcp`) to the others, `off` to none.
    #[arg(long, env = "ACP_BRIDGE_MCP", value_enum, default_value = "auto")]
    pub mcp: McpMode,
}

impl Default for McpArgs {
    fn default() -> Self {
        flag_defaults()
    }
}
