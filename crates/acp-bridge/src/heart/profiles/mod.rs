//! Agent profiles: the named agents one bot runs (`[agents.NAME]` in the
//! config file, or the `[agent]` flags as the one profile `default`).
//!
//! Owns building each profile's settings (its table layered over the
//! `[agent]` flags, then checked as the flags are) and which profile a
//! conversation uses ([`resolve`]). It does not own running the agents:
//! the pool does, one per profile.

mod book;
pub(crate) mod flags;
mod resolve;

use nostr_sdk::PublicKey;

pub(crate) use book::ProfileBook;

use crate::agents::pool::AgentSettings;
use crate::agents::pool::args::AgentArgs;
use crate::base::flags::{ConfigError, refuse};
use crate::tools::mcp::args::{McpArgs, McpSettings};

/// The profile's name when the flags alone make the one profile; stored
/// sessions of a daemon without profiles are this profile's.
pub const DEFAULT_PROFILE: &str = "default";

/// One `[agents.NAME]` table as the file writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileTable {
    /// `NAME`: what `!agent NAME`, `!status` and the metrics call it.
    pub name: String,
    /// Its keys that are flags, as a command line of those flags
    /// (`--agents=2`; see [`flags`]); a key left unset is absent, and the
    /// `[agent]` (or `[mcp]`) flag's value applies.
    pub flags: Vec<String>,
    /// `default = true`.
    pub default: bool,
    /// Routing: conversations (as the bridge writes their keys) that use
    /// this profile.
    pub channels: Vec<String>,
    /// Routing: authors whose mention starts a conversation on this profile.
    pub authors: Vec<PublicKey>,
}

/// One agent profile, checked.
#[derive(Debug, Clone)]
pub struct Profile {
    /// What `!agent NAME`, `!status` and the metrics call it.
    pub name: String,
    /// How its agents run: its table over the `[agent]` flags.
    pub agent: AgentSettings,
    /// The MCP servers its sessions are offered (`mcp-servers`, else
    /// `--mcp-servers`).
    pub mcp: McpSettings,
    /// Routing: conversations (as the bridge writes their keys, or a
    /// group's channel) that use it.
    pub channels: Vec<String>,
    /// Routing: authors whose mention starts a conversation on it.
    pub authors: Vec<PublicKey>,
}

/// Every profile, and which one is the default.
#[derive(Debug, Clone)]
pub struct Profiles {
    profiles: Vec<Profile>,
    default: usize,
}

impl Profiles {
    /// The flags' one profile, named [`DEFAULT_PROFILE`]: a daemon
    /// without `[agents.*]` runs as it always has.
    pub fn single(agent: AgentSettings, mcp: McpSettings) -> Profiles {
        Profiles {
            profiles: vec![Profile {
                name: DEFAULT_PROFILE.to_owned(),
                agent,
                mcp,
                channels: Vec::new(),
                authors: Vec::new(),
            }],
            default: 0,
        }
    }

    /// The file's `tables` over the `[agent]` and `[mcp]` flags, each
    /// checked as the flags are (its program found, its MCP file read);
    /// `env` reads the daemon's environment. The tables are already
    /// checked for their keys and defaults by the config file.
    pub(crate) fn from_tables(
        tables: &[ProfileTable],
        agent: &AgentArgs,
        mcp: &McpArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Profiles, ConfigError> {
        let profiles = tables
            .iter()
            .map(|table| profile(table, agent, mcp, env))
            .collect::<Result<Vec<_>, _>>()?;
        let default = tables.iter().position(|table| table.default).unwrap_or(0);
        Ok(Profiles { profiles, default })
    }

    /// Every profile, in name order (the config file's tables are read
    /// sorted): the order their routing rules are tried in.
    pub fn all(&self) -> &[Profile] {
        &self.profiles
    }

    /// The profile a conversation uses when nothing picks another.
    pub fn default_profile(&self) -> &Profile {
        &self.profiles[self.default]
    }

    /// The turns all profiles may run at once: the heart's capacity.
    pub fn capacity(&self) -> usize {
        self.profiles
            .iter()
            .map(|profile| (profile.agent.processes * profile.agent.turns_per_agent) as usize)
            .sum()
    }

    /// The profile named `name`, if configured.
    pub fn named(&self, name: &str) -> Option<&Profile> {
        self.profiles.iter().find(|profile| profile.name == name)
    }
}

/// `table` over the flags, checked; a refusal names the profile.
fn profile(
    table: &ProfileTable,
    agent: &AgentArgs,
    mcp: &McpArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Profile, ConfigError> {
    let in_profile = |error: ConfigError| {
        refuse(
            "--config",
            format!("[agents.{}]: {}: {}", table.name, error.flag, error.problem),
        )
    };
    let (layered, mcp) = flags::layered(&table.flags, agent, mcp).map_err(|error| {
        refuse(
            "--config",
            format!("[agents.{}]: {}", table.name, flags::one_line(&error)),
        )
    })?;
    let settings = layered.validate(env).map_err(in_profile)?;
    settings.ensure_program_found().map_err(in_profile)?;
    let mcp = mcp.validate(env).map_err(in_profile)?;
    Ok(Profile {
        name: table.name.clone(),
        agent: settings,
        mcp,
        channels: table.channels.clone(),
        authors: table.authors.clone(),
    })
}
