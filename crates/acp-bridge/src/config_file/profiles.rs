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

use nostr_sdk::PublicKey;

use super::{ConfigFileError, Shape, a_type, scalar};
use crate::heart::profiles::ProfileTable;
use crate::heart::profiles::flags::{self as profile_flags, FlagKey};

/// The table that holds the profiles (`[agents.claude]`, `[agents.codex]`).
pub(crate) const AGENTS_TABLE: &str = "agents";

/// The keys only a profile has (its others are flags: see
/// [`crate::heart::profiles::flags`]), each with what it means.
pub(crate) const PROFILE_ONLY_KEYS: &[(&str, &str)] = &[
    (
        "default",
        "`true`: the profile a conversation uses when no rule picks another (needed when there are several)",
    ),
    (
        "channels",
        "Routing: conversations, as the bridge writes them (a NIP-29 group is `RELAY'ID`), that use this profile",
    ),
    (
        "authors",
        "Routing: authors (npub or hex) whose mention starts a conversation on this profile",
    ),
];

/// The flag a profile must set: which agent it runs.
const REQUIRED_FLAG: &str = "agent-command";
/// The flag whose key also takes an array: the agent's arguments, word by
/// word.
const WORDS_FLAG: &str = "agent-args";

/// Every key a profile may set, its flags' first.
pub(crate) fn profile_keys() -> Vec<&'static str> {
    let flags = profile_flags::keys().iter().map(|flag| flag.key.as_str());
    flags
        .chain(PROFILE_ONLY_KEYS.iter().map(|(key, _)| *key))
        .collect()
}

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
    let toml::Value::Table(entries) = table else {
        return Err(ConfigFileError::WrongType {
            path: path.to_owned(),
            key: format!("{AGENTS_TABLE}.{name}"),
            expected: "a table ([agents.NAME] with the profile's keys)",
            found: a_type(table),
        });
    };
    let table = Table { path, name, entries };
    if !is_a_name(name) {
        return Err(table.problem(format!(
            "`[{AGENTS_TABLE}.{name}]`: a profile's name is lowercase letters, digits, `-` and `_` (it is typed in `!agent NAME`)"
        )));
    }
    let known = profile_keys();
    if let Some(unknown) = entries.keys().find(|key| !known.contains(&key.as_str())) {
        return Err(ConfigFileError::UnknownKey {
            path: path.to_owned(),
            key: table.key(unknown),
            hint: format!(" (a profile's keys: {})", known.join(", ")),
        });
    }
    let flags = table.flags()?;
    let default = match entries.get("default") {
        None => false,
        Some(toml::Value::Boolean(on)) => *on,
        Some(_) => return Err(table.wrong("default", "a boolean (true or false)")),
    };
    let authors = table
        .strings("authors")?
        .unwrap_or_default()
        .iter()
        .map(|author| {
            PublicKey::parse(author).map_err(|_| {
                table.problem(format!(
                    "`{}`: `{author}` is not a public key: give an npub1… or 64 hex characters",
                    table.key("authors")
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ProfileTable {
        name: name.to_owned(),
        flags,
        default,
        channels: table.strings("channels")?.unwrap_or_default(),
        authors,
    })
}

/// One `[agents.NAME]` table being read: its refusals name its keys.
struct Table<'a> {
    path: &'a str,
    name: &'a str,
    entries: &'a toml::Table,
}

impl Table<'_> {
    /// `agents.NAME.key`, as refusals name it.
    fn key(&self, key: &str) -> String {
        format!("{AGENTS_TABLE}.{}.{key}", self.name)
    }

    fn problem(&self, problem: String) -> ConfigFileError {
        ConfigFileError::Profiles {
            path: self.path.to_owned(),
            problem,
        }
    }

    fn wrong(&self, key: &str, expected: &'static str) -> ConfigFileError {
        ConfigFileError::WrongType {
            path: self.path.to_owned(),
            key: self.key(key),
            expected,
            found: a_type(&self.entries[key]),
        }
    }

    /// Key `key`'s array of strings, if set.
    fn strings(&self, key: &str) -> Result<Option<Vec<String>>, ConfigFileError> {
        let Some(value) = self.entries.get(key) else {
            return Ok(None);
        };
        let items = value
            .as_array()
            .ok_or_else(|| self.wrong(key, "an array of strings"))?;
        items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| self.wrong(key, "an array of strings"))
    }

    /// Its keys that are flags as a command line of those flags, which
    /// parses as the daemon's flags do (so each value meets its flag's
    /// bounds); `command` is required.
    fn flags(&self) -> Result<Vec<String>, ConfigFileError> {
        let mut flags = Vec::new();
        let mut given = Vec::new();
        for flag in profile_flags::keys() {
            let Some(value) = self.entries.get(&flag.key) else {
                continue;
            };
            let values = self.values(flag, value)?;
            if !values.is_empty() {
                given.push(flag.long());
            }
            flags.extend(values.iter().map(|value| flag.argument(value)));
        }
        if !given.contains(&REQUIRED_FLAG) {
            let command = profile_flags::keys()
                .iter()
                .find(|flag| flag.long() == REQUIRED_FLAG);
            let command = command.expect("--agent-command is a profile's flag");
            return Err(self.problem(format!(
                "`{}` is missing: name the agent's program",
                self.key(&command.key)
            )));
        }
        profile_flags::parse(&flags).map_err(|error| {
            let key = profile_flags::refused_key(&error).map_or_else(
                || format!("[{AGENTS_TABLE}.{}]", self.name),
                |flag| self.key(&flag.key),
            );
            self.problem(format!("`{key}`: {}", profile_flags::one_line(&error)))
        })?;
        Ok(flags)
    }

    /// Flag `flag`'s raw values from its key's `value`: an array for a
    /// repeatable flag, else a string or an integer (a blank one is the key
    /// left unset: the flag's value applies). `args` also takes an array of
    /// words, which becomes the one string `--agent-args` splits.
    fn values(&self, flag: &FlagKey, value: &toml::Value) -> Result<Vec<String>, ConfigFileError> {
        let key = &flag.key;
        match (flag.long(), Shape::of(&flag.arg), value) {
            (WORDS_FLAG, _, toml::Value::String(words)) if shlex::split(words).is_none() => {
                Err(self.problem(format!(
                    "`{}` has an unbalanced quote or ends in a backslash (one string is split into words as a shell splits them)",
                    self.key(key)
                )))
            }
            (WORDS_FLAG, _, toml::Value::Array(_)) => {
                let words = self.strings(key)?.unwrap_or_default();
                let line = shlex::try_join(words.iter().map(String::as_str)).map_err(|_| {
                    self.problem(format!("`{}`: an argument holds a NUL character", self.key(key)))
                })?;
                Ok(vec![line])
            }
            (WORDS_FLAG, _, toml::Value::String(words)) => Ok(vec![words.clone()]),
            (WORDS_FLAG, _, _) => Err(self.wrong(key, "an array of strings, or one string")),
            (_, Shape::List, _) => Ok(self.strings(key)?.unwrap_or_default()),
            (_, _, value) => match scalar(value) {
                Some(one) if one.trim().is_empty() => Ok(Vec::new()),
                Some(one) => Ok(vec![one]),
                None => Err(self.wrong(key, "a string or an integer")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::agents::pool::args::AgentArgs;
    use crate::tools::mcp::args::McpArgs;

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
        let layered = |profile: &ProfileTable| {
            profile_flags::layered(&profile.flags, &AgentArgs::default(), &McpArgs::default())
                .expect("parsed")
        };
        let codex = &profiles[0];
        let (agent, mcp) = layered(codex);
        assert_eq!(codex.name, "codex");
        assert_eq!(agent.agent_command, "codex-acp");
        assert_eq!(
            agent.agent_args.as_deref().and_then(shlex::split),
            Some(vec!["--model".to_owned(), "o 3".to_owned()])
        );
        assert_eq!(agent.agent_env, ["OPENAI_API_KEY"]);
        assert_eq!(agent.agent_auth_method.as_deref(), Some("openai-api-key"));
        assert_eq!((agent.agents, agent.turns_per_agent), (2, 8));
        assert_eq!(mcp.mcp_servers, Some(PathBuf::from("/etc/mcp.json")));
        assert!(codex.default);
        assert_eq!(codex.channels, ["wss://relay.example'abc"]);
        assert_eq!(codex.authors, [PublicKey::parse(AUTHOR_HEX).expect("key")]);
        let goose = &profiles[1];
        let (agent, _) = layered(goose);
        assert_eq!(
            agent
                .agent_args
                .as_deref()
                .and_then(shlex::split)
                .map(|words| words.len()),
            Some(3),
            "an array of words is the agent's arguments"
        );
        assert_eq!(
            (goose.flags.len(), goose.default),
            (2, false),
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
                "`agents.a.agents`: invalid value '0' for '--agents <AGENTS>': 0 is not in 1..=64",
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
            (
                "[agents.a]\ncommand = \"a\"\nagents = [2]\n",
                "`agents.a.agents` must be a string or an integer, not an array",
            ),
        ] {
            let error = read(text).expect_err(text).to_string();
            assert!(error.contains(says), "{text:?}: {error}");
            assert!(error.starts_with("--config /etc/acp-bridge.toml: "), "{error}");
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }

    /// A profile's key refuses what its flag refuses, in the flag's words:
    /// its bounds are the flag's, not a copy of them.
    #[test]
    fn a_profiles_value_is_refused_as_its_flag_refuses_it() {
        for (key, value) in [("agents", "65"), ("agents", "0"), ("turns-per-agent", "1025")] {
            let flag = format!("--{key}");
            let flag_says = super::super::daemon_flags()
                .try_get_matches_from(["acp-bridge", &flag, value])
                .expect_err(&flag);
            let error = read(&format!("[agents.a]\ncommand = \"a\"\n{key} = {value}\n"))
                .expect_err(key)
                .to_string();
            println!("{flag} {value}: {error}");
            assert_eq!(
                error,
                format!(
                    "--config /etc/acp-bridge.toml: `agents.a.{key}`: {}",
                    profile_flags::one_line(&flag_says)
                )
            );
        }
    }
}
