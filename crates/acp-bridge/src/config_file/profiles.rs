//! `[agents.NAME]` tables: the agent profiles the config file names.
//!
//! Owns reading the tables and refusing what cannot be a profile (an
//! unknown key, a value of the wrong type, a missing `command`, two
//! defaults, a name that cannot be typed in `!agent NAME`), each in one
//! line naming the key. It does not own what a profile's values mean: the
//! [`crate::heart::profiles`] module layers each table over the `[agent]` flags
//! and checks the result as it checks the flags.
//!
//! Values are never secrets: `env` names variables passed through from the
//! daemon's environment, as `--agent-env` does.

use std::path::PathBuf;

use nostr_sdk::PublicKey;

use super::{ConfigFileError, a_type};
use crate::heart::profiles::ProfileTable;

/// The table that holds the profiles (`[agents.claude]`, `[agents.codex]`).
pub(crate) const AGENTS_TABLE: &str = "agents";

/// The keys a profile may set.
const PROFILE_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "auth-method",
    "agents",
    "turns-per-agent",
    "mcp-servers",
    "default",
    "channels",
    "authors",
];

/// `--agents`' bounds, which a profile's `agents` shares.
const PROCESSES_RANGE: std::ops::RangeInclusive<i64> = 1..=64;
/// `--turns-per-agent`'s bounds, which a profile's `turns-per-agent` shares.
const TURNS_PER_AGENT_RANGE: std::ops::RangeInclusive<i64> = 1..=1024;

/// The `[agents]` table's profiles, checked: each table's keys, and
/// exactly one default when there are several.
pub(crate) fn read_profiles(path: &str, agents: &toml::Value) -> Result<Vec<ProfileTable>, ConfigFileError> {
    let toml::Value::Table(tables) = agents else {
        return Err(ConfigFileError::WrongType {
            path: path.to_owned(),
            key: AGENTS_TABLE.to_owned(),
            expected: "tables of profiles ([agents.NAME])",
            found: a_type(agents),
        });
    };
    let profiles = tables
        .iter()
        .map(|(name, table)| read_profile(path, name, table))
        .collect::<Result<Vec<_>, _>>()?;
    let defaults: Vec<&str> = profiles
        .iter()
        .filter(|profile| profile.default)
        .map(|profile| profile.name.as_str())
        .collect();
    match defaults.as_slice() {
        [_] => Ok(profiles),
        [] if profiles.len() <= 1 => Ok(profiles),
        [] => Err(ConfigFileError::Profiles {
            path: path.to_owned(),
            problem: format!(
                "no profile is the default: set `default = true` in one of [{}]",
                names(&profiles)
            ),
        }),
        [first, second, ..] => Err(ConfigFileError::Profiles {
            path: path.to_owned(),
            problem: format!(
                "`agents.{first}.default` and `agents.{second}.default` are both true: exactly one profile is the default"
            ),
        }),
    }
}

/// The profiles' table names, as `[agents.a], [agents.b]` shows them.
fn names(profiles: &[ProfileTable]) -> String {
    profiles
        .iter()
        .map(|profile| format!("{AGENTS_TABLE}.{}", profile.name))
        .collect::<Vec<_>>()
        .join("], [")
}

/// Whether `name` can be a profile's name: typed in `!agent NAME`, shown
/// as a metric label.
fn is_a_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn read_profile(path: &str, name: &str, table: &toml::Value) -> Result<ProfileTable, ConfigFileError> {
    let key_of = |key: &str| format!("{AGENTS_TABLE}.{name}.{key}");
    let toml::Value::Table(entries) = table else {
        return Err(ConfigFileError::WrongType {
            path: path.to_owned(),
            key: format!("{AGENTS_TABLE}.{name}"),
            expected: "a table ([agents.NAME] with the profile's keys)",
            found: a_type(table),
        });
    };
    if !is_a_name(name) {
        return Err(ConfigFileError::Profiles {
            path: path.to_owned(),
            problem: format!(
                "`[{AGENTS_TABLE}.{name}]`: a profile's name is lowercase letters, digits, `-` and `_` (it is typed in `!agent NAME`)"
            ),
        });
    }
    if let Some(unknown) = entries.keys().find(|key| !PROFILE_KEYS.contains(&key.as_str())) {
        return Err(ConfigFileError::UnknownKey {
            path: path.to_owned(),
            key: key_of(unknown),
            hint: format!(" (a profile's keys: {})", PROFILE_KEYS.join(", ")),
        });
    }
    let wrong = |key: &str, expected: &'static str| ConfigFileError::WrongType {
        path: path.to_owned(),
        key: key_of(key),
        expected,
        found: a_type(&entries[key]),
    };
    let text = |key: &str| -> Result<Option<String>, ConfigFileError> {
        match entries.get(key) {
            None => Ok(None),
            Some(toml::Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(wrong(key, "a string")),
        }
    };
    let strings = |key: &str| -> Result<Option<Vec<String>>, ConfigFileError> {
        match entries.get(key) {
            None => Ok(None),
            Some(toml::Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| wrong(key, "an array of strings")),
            Some(_) => Err(wrong(key, "an array of strings")),
        }
    };
    let count =
        |key: &str, range: std::ops::RangeInclusive<i64>, expected: &'static str| match entries.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(number)) if range.contains(number) => {
                Ok(Some(u32::try_from(*number).expect("within the range")))
            }
            Some(_) => Err(wrong(key, expected)),
        };
    let command = text("command")?
        .filter(|command| !command.trim().is_empty())
        .ok_or_else(|| ConfigFileError::Profiles {
            path: path.to_owned(),
            problem: format!("`{}` is missing: name the agent's program", key_of("command")),
        })?;
    let args = match entries.get("args") {
        Some(toml::Value::String(words)) => Some(shlex::split(words).ok_or_else(|| ConfigFileError::Profiles {
            path: path.to_owned(),
            problem: format!(
                "`{}` has an unbalanced quote or ends in a backslash (one string is split into words as a shell splits them)",
                key_of("args")
            ),
        })?),
        Some(toml::Value::Array(_)) => strings("args")?,
        Some(_) => return Err(wrong("args", "an array of strings, or one string")),
        None => None,
    };
    let default = match entries.get("default") {
        None => false,
        Some(toml::Value::Boolean(on)) => *on,
        Some(_) => return Err(wrong("default", "a boolean (true or false)")),
    };
    let authors = strings("authors")?
        .unwrap_or_default()
        .iter()
        .map(|author| {
            PublicKey::parse(author).map_err(|_| ConfigFileError::Profiles {
                path: path.to_owned(),
                problem: format!(
                    "`{}`: `{author}` is not a public key: give an npub1… or 64 hex characters",
                    key_of("authors")
                ),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ProfileTable {
        name: name.to_owned(),
        command,
        args,
        env: strings("env")?,
        auth_method: text("auth-method")?.filter(|method| !method.is_empty()),
        processes: count("agents", PROCESSES_RANGE, "an integer from 1 to 64")?,
        turns_per_agent: count(
            "turns-per-agent",
            TURNS_PER_AGENT_RANGE,
            "an integer from 1 to 1024",
        )?,
        mcp_servers: text("mcp-servers")?
            .filter(|file| !file.is_empty())
            .map(PathBuf::from),
        default,
        channels: strings("channels")?.unwrap_or_default(),
        authors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<ProfileTable>, ConfigFileError> {
        let table: toml::Table = text.parse().expect("TOML");
        read_profiles("/etc/acp-bridge.toml", &table[AGENTS_TABLE])
    }

    const AUTHOR_HEX: &str = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";

    #[test]
    fn a_profile_reads_every_key() {
        let profiles = read(&format!(
            "[agents.codex]\ncommand = \"codex-acp\"\nargs = \"--model 'o 3'\"\nenv = [\"OPENAI_API_KEY\"]\n\
             auth-method = \"openai-api-key\"\nagents = 2\nturns-per-agent = 8\nmcp-servers = \"/etc/mcp.json\"\n\
             default = true\nchannels = [\"wss://relay.example'abc\"]\nauthors = [\"{AUTHOR_HEX}\"]\n\
             [agents.goose]\ncommand = \"goose\"\nargs = [\"acp\", \"--with-builtin\", \"developer\"]\n"
        ))
        .expect("valid");
        let codex = &profiles[0];
        assert_eq!(codex.name, "codex");
        assert_eq!(codex.command, "codex-acp");
        assert_eq!(
            codex.args.as_deref(),
            Some(&["--model".to_owned(), "o 3".to_owned()][..])
        );
        assert_eq!(codex.env.as_deref(), Some(&["OPENAI_API_KEY".to_owned()][..]));
        assert_eq!(codex.auth_method.as_deref(), Some("openai-api-key"));
        assert_eq!((codex.processes, codex.turns_per_agent), (Some(2), Some(8)));
        assert_eq!(codex.mcp_servers, Some(PathBuf::from("/etc/mcp.json")));
        assert!(codex.default);
        assert_eq!(codex.channels, ["wss://relay.example'abc"]);
        assert_eq!(codex.authors, [PublicKey::parse(AUTHOR_HEX).expect("key")]);
        let goose = &profiles[1];
        assert_eq!(
            (
                goose.args.as_ref().map(Vec::len),
                goose.env.as_ref(),
                goose.default
            ),
            (Some(3), None, false),
            "unset keys stay unset: the flags' values apply"
        );
    }

    /// The commented `[agents.*]` block at the end of
    /// `deploy/config/acp-bridge.toml.example`, uncommented, is valid.
    #[test]
    fn the_example_files_profiles_are_valid() {
        let block = super::super::example_block("# [agents.");
        let profiles = read(&block).unwrap_or_else(|error| panic!("{error}"));
        let names: Vec<&str> = profiles.iter().map(|profile| profile.name.as_str()).collect();
        assert_eq!(names, ["claude", "codex"]);
    }

    #[test]
    fn one_profile_is_the_default_without_saying_so() {
        let profiles = read("[agents.only]\ncommand = \"goose\"\n").expect("valid");
        assert_eq!(profiles.len(), 1);
    }

    #[test]
    fn refusals_are_one_line_naming_the_key() {
        for (text, says) in [
            (
                "[agents.codex]\ncommand = \"codex-acp\"\nmodel = \"o3\"\n",
                "unknown key `agents.codex.model` (a profile's keys: command, args,",
            ),
            (
                "[agents.codex]\nargs = [\"x\"]\n",
                "`agents.codex.command` is missing",
            ),
            (
                "[agents.a]\ncommand = \"a\"\ndefault = true\n[agents.b]\ncommand = \"b\"\ndefault = true\n",
                "`agents.a.default` and `agents.b.default` are both true",
            ),
            (
                "[agents.a]\ncommand = \"a\"\n[agents.b]\ncommand = \"b\"\n",
                "no profile is the default: set `default = true` in one of [agents.a], [agents.b]",
            ),
            (
                "[agents.a]\ncommand = \"a\"\nagents = 0\n",
                "`agents.a.agents` must be an integer from 1 to 64, not an integer",
            ),
            (
                "[agents.a]\ncommand = \"a\"\nenv = \"KEY\"\n",
                "`agents.a.env` must be an array of strings, not a string",
            ),
            (
                "[agents.a]\ncommand = \"a\"\nargs = \"'open\"\n",
                "`agents.a.args` has an unbalanced quote",
            ),
            (
                "[agents.a]\ncommand = \"a\"\nauthors = [\"bob\"]\n",
                "`agents.a.authors`: `bob` is not a public key",
            ),
            (
                "[agents.Big]\ncommand = \"a\"\n",
                "`[agents.Big]`: a profile's name is lowercase",
            ),
            ("[agents]\ncommand = \"a\"\n", "`agents.command` must be a table"),
        ] {
            let error = read(text).expect_err(text).to_string();
            assert!(error.contains(says), "{text:?}: {error}");
            assert!(error.starts_with("--config /etc/acp-bridge.toml: "), "{error}");
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }
}
