//! A profile's keys that are flags: read off clap's declaration of the
//! `[agent]` and `[mcp]` flags ([`AgentArgs::PROFILE_FLAGS`],
//! [`McpArgs::PROFILE_FLAGS`]), each value parsed by its flag's own
//! parser and layered over the flags' values by clap, so that a profile's
//! bounds, values and refusals are the flag's and none is copied here.

use std::sync::LazyLock;

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};

use crate::agents::pool::args::AgentArgs;
use crate::tools::mcp::args::McpArgs;

/// What a profile's key drops from its flag's name: `--agent-command` is
/// `command`.
const FLAG_PREFIX: &str = "agent-";

/// One key of a profile that is a flag.
#[derive(Debug, Clone)]
pub(crate) struct FlagKey {
    /// Its name in `[agents.NAME]`.
    pub(crate) key: String,
    /// The flag, as clap declares it.
    pub(crate) arg: Arg,
}

impl FlagKey {
    /// The flag's long name, without `--`.
    pub(crate) fn long(&self) -> &str {
        self.arg.get_long().expect("a profile's flags are long flags")
    }

    /// This key's `value` as a profile's command line takes it.
    pub(crate) fn argument(&self, value: &str) -> String {
        format!("--{}={value}", self.long())
    }
}

/// The command that parses a profile's flags: the `[agent]` and `[mcp]`
/// flags without their environment variables and defaults, so that its
/// matches hold only what the table sets (a key left unset keeps the
/// flags' value when the matches are layered over them).
fn command() -> Command {
    McpArgs::augment_args(AgentArgs::augment_args(Command::new("profile")))
        .no_binary_name(true)
        .disable_help_flag(true)
        .mut_args(|arg| arg.env(None::<&'static str>).default_value(None::<&'static str>))
}

/// A profile's keys that are flags, in the flags' order.
pub(crate) fn keys() -> &'static [FlagKey] {
    static KEYS: LazyLock<Vec<FlagKey>> = LazyLock::new(|| {
        let listed = [AgentArgs::PROFILE_FLAGS, McpArgs::PROFILE_FLAGS].concat();
        command()
            .get_arguments()
            .filter_map(|arg| {
                let long = arg.get_long().filter(|long| listed.contains(long))?;
                Some(FlagKey {
                    key: long.strip_prefix(FLAG_PREFIX).unwrap_or(long).to_owned(),
                    arg: arg.clone(),
                })
            })
            .collect()
    });
    &KEYS
}

/// A profile's `flags` (`--agents=2`, …) parsed as the daemon's flags are.
pub(crate) fn parse(flags: &[String]) -> Result<ArgMatches, clap::Error> {
    command().try_get_matches_from(flags)
}

/// `agent` and `mcp` with a profile's `flags` over them: what it sets
/// replaces the flags' value, what it leaves unset keeps it.
pub(crate) fn layered(
    flags: &[String],
    agent: &AgentArgs,
    mcp: &McpArgs,
) -> Result<(AgentArgs, McpArgs), clap::Error> {
    let matches = parse(flags)?;
    let (mut agent, mut mcp) = (agent.clone(), mcp.clone());
    agent.update_from_arg_matches(&matches)?;
    mcp.update_from_arg_matches(&matches)?;
    Ok((agent, mcp))
}

/// The key whose value clap refused in `error`, if it names one.
pub(crate) fn refused_key(error: &clap::Error) -> Option<&'static FlagKey> {
    let clap::error::ContextValue::String(arg) = error.get(clap::error::ContextKind::InvalidArg)? else {
        return None;
    };
    let long = arg.split_whitespace().next()?.strip_prefix("--")?;
    keys().iter().find(|key| key.long() == long)
}

/// Clap's refusal in one line, as the daemon words a flag's: its first
/// paragraph, without `error: `.
pub(crate) fn one_line(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let first = rendered.split("\n\n").next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    first.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed flag is a key: a misspelt one would be silently no
    /// key at all.
    #[test]
    fn every_listed_flag_is_a_key_named_as_today() {
        let names: Vec<&str> = keys().iter().map(|key| key.key.as_str()).collect();
        assert_eq!(
            names,
            [
                "command",
                "args",
                "env",
                "auth-method",
                "agents",
                "turns-per-agent",
                "mcp-servers"
            ]
        );
    }

    /// What a profile sets replaces the flag's value; what it leaves unset
    /// keeps it, the daemon's environment and defaults notwithstanding.
    #[test]
    fn a_profile_layers_only_what_it_sets() {
        let agent = AgentArgs {
            agent_env: vec!["HTTPS_PROXY".to_owned()],
            agent_auth_method: Some("flag-method".to_owned()),
            turns_per_agent: 7,
            ..AgentArgs::default()
        };
        let mcp = McpArgs {
            mcp_servers: Some("/etc/mcp.json".into()),
            ..McpArgs::default()
        };
        let flags = ["--agent-command=codex-acp", "--agents=3", "--agent-env=A,B"].map(str::to_owned);
        let (agent, mcp) = layered(&flags, &agent, &mcp).expect("valid");
        assert_eq!(
            (
                agent.agent_command.as_str(),
                agent.agents,
                agent.agent_env.as_slice()
            ),
            ("codex-acp", 3, &["A".to_owned(), "B".to_owned()][..])
        );
        assert_eq!(
            (agent.agent_auth_method.as_deref(), agent.turns_per_agent),
            (Some("flag-method"), 7)
        );
        assert_eq!(mcp.mcp_servers, Some("/etc/mcp.json".into()));
    }
}
