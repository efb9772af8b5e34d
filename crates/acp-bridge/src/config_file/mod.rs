//! `--config FILE`: the daemon's flags as a TOML file, one table per stage
//! (`[relays]`, `[agent]`, … see [`keys`]), each key a flag's long name.
//!
//! Owns reading the file, checking every key and value type against the
//! flags, and handing the values to clap as the flags' defaults. Clap then
//! layers them itself: defaults < file < `ACP_BRIDGE_*` environment <
//! flags, with one parser and one set of validations whatever a value's
//! source. It does not own what the values mean: `RunArgs::validate`
//! checks a value from the file as it checks a flag's.
//!
//! The file is meant to be shared (a ConfigMap, a world-readable file in
//! /etc), so a key whose value is a secret itself is refused: secrets come
//! only from files of their own or the environment.

mod effective;
pub(crate) mod keys;
mod profiles;
mod reload;
mod schedules;

use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, Args, Command};

use crate::config::RunArgs;
use crate::profiles::ProfileTable;
use crate::telemetry::LogArgs;
pub use effective::effective_configuration;
use keys::{Key, Section, key_named};
pub use reload::{Reload, reload_on_hangup};

/// A config file read and checked: each key's values, as clap takes them
/// from a command line.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    path: PathBuf,
    values: Vec<(&'static Key, Vec<String>)>,
    /// `[agents.NAME]` tables, in name order; empty without them.
    profiles: Vec<ProfileTable>,
    /// The `[[schedule]]` entries.
    schedules: Vec<crate::schedule::Schedule>,
}

/// Why a config file was refused: one line naming the file, and the key
/// (`section.key`) when one is at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigFileError {
    #[error(
        "--config {path}: cannot read it ({reason}); point --config or ACP_BRIDGE_CONFIG at a readable TOML file (see deploy/config/acp-bridge.toml.example)"
    )]
    Unreadable { path: String, reason: String },
    #[error("--config {path}: not TOML at line {line}: {message}")]
    NotToml {
        path: String,
        line: usize,
        message: String,
    },
    #[error("--config {path}: unknown section `[{section}]` (the sections: {known})")]
    UnknownSection {
        path: String,
        section: String,
        known: String,
    },
    #[error("--config {path}: unknown key `{key}`{hint}")]
    UnknownKey { path: String, key: String, hint: String },
    #[error("--config {path}: `{key}` must be {expected}, not {found}")]
    WrongType {
        path: String,
        key: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("--config {path}: [[schedule]] {entry}: `{key}` {reason}")]
    Schedule {
        path: String,
        entry: String,
        key: String,
        reason: String,
    },
    #[error("--config {path}: `{key}` is a secret, which the config file does not hold: {instead}")]
    Secret {
        path: String,
        key: String,
        instead: &'static str,
    },
    /// An `[agents.NAME]` profile that cannot be one (see [`profiles`]).
    #[error("--config {path}: {problem}")]
    Profiles { path: String, problem: String },
}

/// The command that holds every daemon flag, as `run` takes them: what
/// the file's keys are checked against.
pub(crate) fn daemon_flags() -> Command {
    LogArgs::augment_args(RunArgs::augment_args(Command::new("acp-bridge")))
}

/// How a flag takes its value, hence which TOML types its key takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A switch (`--no-reactions`): a boolean.
    Switch,
    /// A repeatable flag (`--relay`): an array, or one value.
    List,
    /// One value: a string, or an integer.
    One,
}

impl Shape {
    pub(crate) fn of(arg: &Arg) -> Shape {
        match arg.get_action() {
            ArgAction::SetTrue | ArgAction::SetFalse => Shape::Switch,
            ArgAction::Append => Shape::List,
            _ => Shape::One,
        }
    }

    fn expected(self) -> &'static str {
        match self {
            Shape::Switch => "a boolean (true or false)",
            Shape::List => "an array of strings or integers",
            Shape::One => "a string or an integer",
        }
    }
}

impl ConfigFile {
    /// Reads and checks the file at `path`.
    pub fn read(path: &Path) -> Result<ConfigFile, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigFileError::Unreadable {
            path: path.display().to_string(),
            reason: error.to_string(),
        })?;
        ConfigFile::parse(path, &text)
    }

    fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigFileError> {
        let shown = path.display().to_string();
        let table: toml::Table = text.parse().map_err(|error: toml::de::Error| {
            let at = error.span().map_or(0, |span| span.start);
            ConfigFileError::NotToml {
                path: shown.clone(),
                line: text[..at.min(text.len())].matches('\n').count() + 1,
                message: error.message().replace('\n', " "),
            }
        })?;
        let flags = daemon_flags();
        let mut values = Vec::new();
        let mut agent_profiles = Vec::new();
        let mut schedules = Vec::new();
        for (section_name, entries) in &table {
            if section_name == profiles::AGENTS_TABLE {
                agent_profiles = profiles::read_profiles(&shown, entries)?;
                continue;
            }
            if section_name == schedules::SCHEDULE_TABLE {
                schedules = schedules::parse(entries).map_err(|refusal| ConfigFileError::Schedule {
                    path: shown.clone(),
                    entry: refusal.entry,
                    key: refusal.key,
                    reason: refusal.reason,
                })?;
                continue;
            }
            let (Some(section), toml::Value::Table(entries)) = (Section::named(section_name), entries) else {
                return Err(outside_a_section(&shown, section_name, entries));
            };
            for (name, value) in entries {
                let key = key_named(name)
                    .filter(|key| key.section == section)
                    .ok_or_else(|| ConfigFileError::UnknownKey {
                        path: shown.clone(),
                        key: format!("{section_name}.{name}"),
                        hint: unknown_key_hint(name),
                    })?;
                if let Some(instead) = key.secret {
                    return Err(ConfigFileError::Secret {
                        path: shown.clone(),
                        key: format!("{section_name}.{name}"),
                        instead,
                    });
                }
                let arg = flags
                    .get_arguments()
                    .find(|arg| arg.get_long() == Some(key.name))
                    .expect("every key is a flag (keys::tests)");
                let shape = Shape::of(arg);
                let raw = raw_values(value, shape).ok_or_else(|| ConfigFileError::WrongType {
                    path: shown.clone(),
                    key: format!("{section_name}.{name}"),
                    expected: shape.expected(),
                    found: a_type(value),
                })?;
                values.push((key, raw));
            }
        }
        Ok(ConfigFile {
            path: path.to_owned(),
            values,
            profiles: agent_profiles,
            schedules,
        })
    }

    /// The file's `[agents.NAME]` profiles, in its order (none when it
    /// has no `[agents]` table: the flags make the one profile).
    pub fn profiles(&self) -> &[ProfileTable] {
        &self.profiles
    }

    /// The file's path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's `[[schedule]]` entries.
    pub fn schedules(&self) -> &[crate::schedule::Schedule] {
        &self.schedules
    }

    /// The raw values the file gives flag `--long`, if any.
    fn raw(&self, long: &str) -> Option<&[String]> {
        self.values
            .iter()
            .find(|(key, _)| key.name == long)
            .map(|(_, values)| values.as_slice())
    }

    /// `section.key` of flag `--long` when the file sets it.
    pub fn key_of(&self, long: &str) -> Option<String> {
        self.values
            .iter()
            .find(|(key, _)| key.name == long)
            .map(|(key, _)| format!("{}.{}", key.section.name(), key.name))
    }

    /// `command` with the file's values as the defaults of the flags they
    /// name, in the command itself and in each of its subcommands that
    /// takes the daemon's flags (`run`, `check`, `config`). An
    /// `ACP_BRIDGE_*` variable or a flag still wins over them, as over
    /// any default.
    pub fn as_defaults(&self, command: Command) -> Command {
        let takers: Vec<String> = command
            .get_subcommands()
            .filter(|sub| sub.get_arguments().any(|arg| arg.get_long() == Some("config")))
            .map(|sub| sub.get_name().to_owned())
            .collect();
        let command = command.mut_args(|arg| self.default_of(arg));
        takers.iter().fold(command, |command, name| {
            command.mut_subcommand(name, |sub| sub.mut_args(|arg| self.default_of(arg)))
        })
    }

    fn default_of(&self, arg: Arg) -> Arg {
        let set = arg
            .get_long()
            .and_then(|long| self.values.iter().find(|(key, _)| key.name == long));
        match set {
            Some((_, values)) => arg.default_values(values.clone()),
            None => arg,
        }
    }
}

/// The refusal of a top-level entry that is not one of the sections: a
/// key written outside its table, or an unknown table.
fn outside_a_section(path: &str, name: &str, value: &toml::Value) -> ConfigFileError {
    match (value, key_named(name)) {
        (toml::Value::Table(_), _) => ConfigFileError::UnknownSection {
            path: path.to_owned(),
            section: name.to_owned(),
            known: Section::ALL.map(Section::name).join(", "),
        },
        (_, Some(key)) => ConfigFileError::UnknownKey {
            path: path.to_owned(),
            key: name.to_owned(),
            hint: format!(" outside a section: write it under [{}]", key.section.name()),
        },
        (_, None) => ConfigFileError::UnknownKey {
            path: path.to_owned(),
            key: name.to_owned(),
            hint: unknown_key_hint(name),
        },
    }
}

/// What to write instead of unknown key `name`.
fn unknown_key_hint(name: &str) -> String {
    let kebab = name.replace('_', "-");
    match key_named(name).or_else(|| key_named(&kebab)) {
        Some(key) if key.name == name => format!(" (it belongs in [{}])", key.section.name()),
        Some(key) => format!(
            " (keys are spelt as the flags are: `{}` in [{}])",
            key.name,
            key.section.name()
        ),
        None => " (keys are the flags' long names without `--`: see acp-bridge --help)".to_owned(),
    }
}

/// `value` as the flag's raw values, or `None` when its type does not fit
/// a flag of `shape`.
fn raw_values(value: &toml::Value, shape: Shape) -> Option<Vec<String>> {
    match (shape, value) {
        (Shape::Switch, toml::Value::Boolean(on)) => Some(vec![on.to_string()]),
        (Shape::List, toml::Value::Array(items)) => items.iter().map(scalar).collect(),
        (Shape::List | Shape::One, value) => scalar(value).map(|one| vec![one]),
        (Shape::Switch, _) => None,
    }
}

/// A string or an integer as its text.
fn scalar(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(text) => Some(text.clone()),
        toml::Value::Integer(number) => Some(number.to_string()),
        _ => None,
    }
}

/// `value`'s type, with its article, for a refusal.
fn a_type(value: &toml::Value) -> &'static str {
    match value {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

/// The commented block of `deploy/config/acp-bridge.toml.example` that
/// starts at the line `marker` begins, up to the next empty line,
/// uncommented: what an operator gets by removing the `# `s, for the
/// tests that keep the example's commented tables valid.
#[cfg(test)]
fn example_block(marker: &str) -> String {
    let example = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/config/acp-bridge.toml.example"
    ));
    example
        .lines()
        .skip_while(|line| !line.starts_with(marker))
        .take_while(|line| !line.is_empty())
        .map(|line| {
            line.strip_prefix("# ")
                .or_else(|| line.strip_prefix('#'))
                .unwrap_or(line)
        })
        .flat_map(|line| [line, "\n"])
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::keys::KEYS;
    use super::*;

    fn parse(text: &str) -> Result<ConfigFile, ConfigFileError> {
        ConfigFile::parse(Path::new("/etc/acp-bridge.toml"), text)
    }

    #[test]
    fn every_flag_is_a_key_exactly_once_and_every_key_a_flag() {
        let flags: Vec<String> = daemon_flags()
            .get_arguments()
            .filter_map(|arg| arg.get_long())
            .filter(|long| *long != "config")
            .map(str::to_owned)
            .collect();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for key in KEYS {
            *counts.entry(key.name).or_default() += 1;
        }
        let twice: Vec<_> = counts.iter().filter(|(_, count)| **count > 1).collect();
        assert!(twice.is_empty(), "keys listed twice in KEYS: {twice:?}");
        let missing: Vec<&String> = flags
            .iter()
            .filter(|flag| !counts.contains_key(flag.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "flags without a key: add them to KEYS in config_file/keys.rs: {missing:?}"
        );
        let stale: Vec<&&str> = counts
            .keys()
            .filter(|name| !flags.iter().any(|flag| flag == *name))
            .collect();
        assert!(stale.is_empty(), "keys of flags that no longer exist: {stale:?}");
        let order: Vec<Section> = KEYS.iter().map(|key| key.section).collect();
        let mut grouped = order.clone();
        grouped.sort_by_key(|section| Section::ALL.iter().position(|each| each == section));
        assert_eq!(
            order, grouped,
            "KEYS is grouped by section, in Section::ALL's order"
        );
    }

    #[test]
    fn values_become_the_flags_raw_values() {
        let file = parse(
            "[relays]\nrelay = [\"wss://a.example\", \"wss://b.example\"]\nkinds = [9, 1]\n\
             [gate]\nmax-content-bytes = 1024\nrespond-to = \"anyone\"\n\
             [replies]\nno-reactions = true\n",
        )
        .expect("valid");
        let raw: BTreeMap<&str, Vec<String>> = file
            .values
            .iter()
            .map(|(key, values)| (key.name, values.clone()))
            .collect();
        assert_eq!(raw["relay"], ["wss://a.example", "wss://b.example"]);
        assert_eq!(raw["kinds"], ["9", "1"]);
        assert_eq!(raw["max-content-bytes"], ["1024"]);
        assert_eq!(raw["no-reactions"], ["true"]);
        assert_eq!(file.key_of("respond-to").as_deref(), Some("gate.respond-to"));
    }

    #[test]
    fn refusals_are_one_line_naming_the_file_and_the_key() {
        for (text, says) in [
            (
                "[gate]\nrespond_to = \"anyone\"\n",
                "`gate.respond_to` (keys are spelt as the flags are: `respond-to` in [gate])",
            ),
            (
                "[agent]\nrelay = \"wss://a\"\n",
                "`agent.relay` (it belongs in [relays])",
            ),
            ("[gate]\nbogus = 1\n", "unknown key `gate.bogus`"),
            (
                "relay = \"wss://a\"\n",
                "`relay` outside a section: write it under [relays]",
            ),
            ("[relayz]\nrelay = \"wss://a\"\n", "unknown section `[relayz]`"),
            (
                "[replies]\nno-reactions = \"yes\"\n",
                "`replies.no-reactions` must be a boolean (true or false), not a string",
            ),
            (
                "[gate]\nmax-content-bytes = 1.5\n",
                "`gate.max-content-bytes` must be a string or an integer, not a float",
            ),
            (
                "[gate]\nowner = true\n",
                "`gate.owner` must be a string or an integer, not a boolean",
            ),
            (
                "[signer]\nsigner = \"bunker://x\"\n",
                "`signer.signer` is a secret",
            ),
            (
                "[groups]\ngroup-invite-code = \"x\"\n",
                "`groups.group-invite-code` is a secret",
            ),
            ("[gate\n", "not TOML at line 1"),
        ] {
            let error = parse(text).expect_err(text).to_string();
            assert!(error.contains(says), "{text:?}: {error}");
            assert!(error.starts_with("--config /etc/acp-bridge.toml: "), "{error}");
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }

    /// `deploy/config/acp-bridge.toml.example` has a line for every key
    /// but the secrets, in its table, commented out; uncommented, it is a
    /// file the daemon takes.
    #[test]
    fn the_example_file_has_every_key_in_its_table() {
        let example = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/config/acp-bridge.toml.example"
        ));
        let uncommented: String = example
            .lines()
            .map(|line| match line.strip_prefix('#') {
                Some(setting) if setting.starts_with(|c: char| c.is_ascii_lowercase()) => setting,
                _ => line,
            })
            .flat_map(|line| [line, "\n"])
            .collect();
        let file = parse(&uncommented).unwrap_or_else(|error| panic!("{error}"));
        let set: Vec<&str> = file.values.iter().map(|(key, _)| key.name).collect();
        let missing: Vec<&str> = KEYS
            .iter()
            .filter(|key| key.secret.is_none() && !set.contains(&key.name))
            .map(|key| key.name)
            .collect();
        assert!(
            missing.is_empty(),
            "keys missing from the example file: {missing:?}"
        );
    }

    #[test]
    fn a_missing_file_says_what_to_do() {
        let error = ConfigFile::read(Path::new("/nonexistent/acp-bridge.toml")).expect_err("missing");
        let line = error.to_string();
        assert!(
            line.starts_with("--config /nonexistent/acp-bridge.toml: cannot read it ("),
            "{line}"
        );
        assert!(
            line.contains("point --config or ACP_BRIDGE_CONFIG at a readable TOML file"),
            "{line}"
        );
    }
}
