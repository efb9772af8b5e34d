//! `--config FILE`: the daemon's flags as a TOML file, one table per help
//! heading (`[relays]`, `[agent]`, …, `[budget.author]`: see [`keys`]),
//! each key a flag's long name.
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
/// Writes the reference pages: run by its test (`ACP_BRIDGE_REGENERATE=1`).
#[cfg(test)]
mod reference;
mod reload;
mod schedules;

use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, Args, Command};

use crate::config::RunArgs;
use crate::heart::profiles::ProfileTable;
use crate::telemetry::LogArgs;
pub use effective::effective_configuration;
use keys::Key;
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
    schedules: Vec<crate::heart::schedule::Schedule>,
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
        instead: String,
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
            read_table(&shown, section_name, entries, &flags, &mut values)?;
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
    pub fn schedules(&self) -> &[crate::heart::schedule::Schedule] {
        &self.schedules
    }

    /// The raw values the file gives flag `--long`, if any.
    fn raw(&self, long: &str) -> Option<&[String]> {
        self.values
            .iter()
            .find(|(key, _)| key.flag == long)
            .map(|(_, values)| values.as_slice())
    }

    /// `table.key` of flag `--long` when the file sets it.
    pub fn key_of(&self, long: &str) -> Option<String> {
        self.values
            .iter()
            .find(|(key, _)| key.flag == long)
            .map(|(key, _)| key.path())
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
            .and_then(|long| self.values.iter().find(|(key, _)| key.flag == long));
        match set {
            Some((_, values)) => arg.default_values(values.clone()),
            None => arg,
        }
    }
}

/// Reads table `table` (dotted: `budget.author`) of the file into
/// `values`, and the tables nested in it.
fn read_table(
    path: &str,
    table: &str,
    value: &toml::Value,
    flags: &Command,
    values: &mut Vec<(&'static Key, Vec<String>)>,
) -> Result<(), ConfigFileError> {
    let toml::Value::Table(entries) = value else {
        return Err(outside_a_table(path, table, value));
    };
    if !is_a_table(table) {
        return Err(outside_a_table(path, table, value));
    }
    for (name, value) in entries {
        let nested = format!("{table}.{name}");
        if matches!(value, toml::Value::Table(_)) {
            read_table(path, &nested, value, flags, values)?;
            continue;
        }
        let key = keys::keys_of(table)
            .find(|key| key.name == *name)
            .ok_or_else(|| ConfigFileError::UnknownKey {
                path: path.to_owned(),
                key: nested.clone(),
                hint: unknown_key_hint(name),
            })?;
        if let Some(instead) = &key.secret {
            return Err(ConfigFileError::Secret {
                path: path.to_owned(),
                key: nested,
                instead: instead.clone(),
            });
        }
        let arg = flags
            .get_arguments()
            .find(|arg| arg.get_long() == Some(key.flag.as_str()))
            .expect("every key is a flag (keys::tests)");
        let shape = Shape::of(arg);
        let raw = raw_values(value, shape).ok_or_else(|| ConfigFileError::WrongType {
            path: path.to_owned(),
            key: nested.clone(),
            expected: shape.expected(),
            found: a_type(value),
        })?;
        values.push((key, raw));
    }
    Ok(())
}

/// Whether `name` is a table of the file, or holds some (`budget`).
fn is_a_table(name: &str) -> bool {
    keys::tables()
        .iter()
        .any(|table| table == name || table.starts_with(&format!("{name}.")))
}

/// The refusal of an entry that is not one of the tables: a key written
/// outside its table, or an unknown table.
fn outside_a_table(path: &str, name: &str, value: &toml::Value) -> ConfigFileError {
    let known = || keys::tables().join(", ");
    match (value, places_of(name).first()) {
        (toml::Value::Table(_), _) => ConfigFileError::UnknownSection {
            path: path.to_owned(),
            section: name.to_owned(),
            known: known(),
        },
        (_, Some(key)) if !name.contains('.') => ConfigFileError::UnknownKey {
            path: path.to_owned(),
            key: name.to_owned(),
            hint: format!(" outside a section: write it under [{}]", key.table),
        },
        _ => ConfigFileError::UnknownKey {
            path: path.to_owned(),
            key: name.to_owned(),
            hint: unknown_key_hint(name),
        },
    }
}

/// The keys named `name`, or whose flag is `--name` (the form budget keys
/// had before they were tables).
fn places_of(name: &str) -> Vec<&'static Key> {
    let mut places: Vec<&'static Key> = keys::keys_named(name).collect();
    places.extend(keys::key_of_flag(name).filter(|key| key.name != name));
    places
}

/// What to write instead of unknown key `name`.
fn unknown_key_hint(name: &str) -> String {
    let tables = |keys: &[&Key]| {
        keys.iter()
            .map(|key| format!("[{}]", key.table))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    let places = places_of(name);
    if let Some(key) = places.first() {
        if key.name != name {
            return format!(" (write it as `{}` in [{}])", key.name, key.table);
        }
        return format!(" (it belongs in {})", tables(&places));
    }
    match places_of(&name.replace('_', "-")).first() {
        Some(key) => format!(
            " (keys are spelt as the flags are: `{}` in [{}])",
            key.name, key.table
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

    use super::*;

    fn parse(text: &str) -> Result<ConfigFile, ConfigFileError> {
        ConfigFile::parse(Path::new("/etc/acp-bridge.toml"), text)
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
            .map(|(key, values)| (key.flag.as_str(), values.clone()))
            .collect();
        assert_eq!(raw["relay"], ["wss://a.example", "wss://b.example"]);
        assert_eq!(raw["kinds"], ["9", "1"]);
        assert_eq!(raw["max-content-bytes"], ["1024"]);
        assert_eq!(raw["no-reactions"], ["true"]);
        assert_eq!(file.key_of("respond-to").as_deref(), Some("gate.respond-to"));
    }

    /// Budgets read as tables of their scope: `[budget.author] per-day`
    /// is `--budget-author-per-day`.
    #[test]
    fn budget_tables_are_the_budget_flags() {
        let file = parse(
            "[budget]\nturn-cap = \"1 USD\"\nwarn-at = 50\n\
             [budget.author]\nper-day = [\"2 USD\", \"40 turns\"]\n\
             [budget.conversation]\nper-month = \"9 USD\"\n",
        )
        .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(
            file.raw("budget-author-per-day"),
            Some(&["2 USD".to_owned(), "40 turns".to_owned()][..])
        );
        assert_eq!(
            file.raw("budget-conversation-per-month"),
            Some(&["9 USD".to_owned()][..])
        );
        assert_eq!(file.raw("budget-turn-cap"), Some(&["1 USD".to_owned()][..]));
        assert_eq!(file.raw("budget-warn-at"), Some(&["50".to_owned()][..]));
        assert_eq!(
            file.key_of("budget-author-per-day").as_deref(),
            Some("budget.author.per-day")
        );
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
            (
                "[budget]\nbudget-author-per-day = [\"1 USD\"]\n",
                "unknown key `budget.budget-author-per-day` (write it as `per-day` in [budget.author])",
            ),
            (
                "[budget]\nper-day = [\"1 USD\"]\n",
                "unknown key `budget.per-day` (it belongs in [budget.bot] or [budget.author] or [budget.stranger] or [budget.conversation])",
            ),
            (
                "[budget.weekly]\nper-day = [\"1 USD\"]\n",
                "unknown section `[budget.weekly]`",
            ),
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
        let set: Vec<&str> = file.values.iter().map(|(key, _)| key.flag.as_str()).collect();
        let missing: Vec<&str> = keys::all()
            .iter()
            .filter(|key| key.secret.is_none() && !set.contains(&key.flag.as_str()))
            .map(|key| key.flag.as_str())
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
