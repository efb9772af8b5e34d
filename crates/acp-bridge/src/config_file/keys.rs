//! The config file's keys, read off the daemon's clap `Command`: every
//! flag is a key, in the table its help heading names, so a flag is
//! declared once (beside the stage that reads it) and cannot be forgotten
//! here.
//!
//! - The table is the flag's help heading in lower case (`Relays` →
//!   `[relays]`), set by its group's `#[command(next_help_heading)]` or
//!   its own `help_heading`.
//! - The key is the flag's long name, but in `[budget]`, whose flags read
//!   as tables of their scope: `--budget-author-per-day` is `per-day` in
//!   `[budget.author]`, `--budget-turn-cap` is `turn-cap` in `[budget]`.
//! - A flag whose value is a secret itself (not a path to one) hides its
//!   environment value (`hide_env_values`): the file, which is meant to be
//!   shared (a ConfigMap, a world-readable /etc file), refuses it.

use std::sync::LazyLock;

use clap::Arg;

use super::daemon_flags;

/// The table whose flags nest by scope (see the module's doc).
const BUDGET: &str = "budget";

/// One key of the file: a flag, where it sits and whether it is a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    /// The flag's long name, without `--`.
    pub(crate) flag: String,
    /// The (dotted) table it sits in: `relays`, `budget.author`.
    pub(crate) table: String,
    /// Its name in that table.
    pub(crate) name: String,
    /// For a secret: what to do instead of writing it in the file.
    pub(crate) secret: Option<String>,
}

impl Key {
    /// `table.name`, as refusals and `acp-bridge config` name it.
    pub(crate) fn path(&self) -> String {
        format!("{}.{}", self.table, self.name)
    }
}

/// Every key (every daemon flag but `--config`), in the flags' order.
pub(crate) fn all() -> &'static [Key] {
    static KEYS: LazyLock<Vec<Key>> = LazyLock::new(|| {
        let flags = daemon_flags();
        flags
            .get_arguments()
            .filter_map(|arg| key_of(arg, &flags))
            .collect()
    });
    &KEYS
}

/// The tables, each once, in the order their first flags come: the path of
/// a mention, from the relays to the reply, then the daemon's own.
pub(crate) fn tables() -> &'static [String] {
    static TABLES: LazyLock<Vec<String>> = LazyLock::new(|| {
        let mut tables: Vec<String> = Vec::new();
        for key in all() {
            if !tables.contains(&key.table) {
                tables.push(key.table.clone());
            }
        }
        tables
    });
    &TABLES
}

/// The key of flag `--flag`.
pub(crate) fn key_of_flag(flag: &str) -> Option<&'static Key> {
    all().iter().find(|key| key.flag == flag)
}

/// The keys named `name`, in whichever table.
pub(crate) fn keys_named(name: &str) -> impl Iterator<Item = &'static Key> {
    all().iter().filter(move |key| key.name == name)
}

/// The keys of `table`, in the flags' order.
pub(crate) fn keys_of(table: &str) -> impl Iterator<Item = &'static Key> {
    all().iter().filter(move |key| key.table == table)
}

fn key_of(arg: &Arg, flags: &clap::Command) -> Option<Key> {
    let flag = arg.get_long().filter(|long| *long != "config")?;
    let heading = arg.get_help_heading()?.to_lowercase();
    let (table, name) = match flag.strip_prefix(&format!("{BUDGET}-")) {
        Some(rest) if heading == BUDGET => match rest.split_once("-per-") {
            Some((scope, period)) => (format!("{BUDGET}.{scope}"), format!("per-{period}")),
            None => (heading, rest.to_owned()),
        },
        _ => (heading, flag.to_owned()),
    };
    let secret = arg
        .is_hide_env_values_set()
        .then(|| instead_of_secret(flag, arg, flags));
    Some(Key {
        flag: flag.to_owned(),
        table,
        name,
        secret,
    })
}

/// Where secret flag `--flag` is set instead of the file: a file of its own
/// when it has a `--flag-file`, and its variable.
fn instead_of_secret(flag: &str, arg: &Arg, flags: &clap::Command) -> String {
    let variable = arg
        .get_env()
        .map_or_else(String::new, |env| env.to_string_lossy().into_owned());
    let file_flag = format!("{flag}-file");
    if flags
        .get_arguments()
        .any(|other| other.get_long() == Some(&file_flag))
    {
        format!("put it in a file of its own (chmod 600) and name it with {file_flag}, or set {variable}")
    } else {
        format!("set {variable}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every daemon flag but `--config` is a key, in a table, each at one
    /// place of the file.
    #[test]
    fn every_flag_is_a_key_in_a_table_at_one_place() {
        let flags = daemon_flags();
        let longs: Vec<&str> = flags
            .get_arguments()
            .filter_map(Arg::get_long)
            .filter(|long| *long != "config")
            .collect();
        let keyed: Vec<&str> = all().iter().map(|key| key.flag.as_str()).collect();
        assert_eq!(keyed, longs, "a flag without a help heading has no table");
        let mut paths: Vec<String> = all().iter().map(Key::path).collect();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), all().len(), "two flags at one place of the file");
    }

    #[test]
    fn budget_flags_sit_in_the_tables_of_their_scope() {
        let place = |flag: &str| key_of_flag(flag).map(Key::path);
        assert_eq!(
            place("budget-author-per-day").as_deref(),
            Some("budget.author.per-day")
        );
        assert_eq!(
            place("budget-bot-per-month").as_deref(),
            Some("budget.bot.per-month")
        );
        assert_eq!(place("budget-turn-cap").as_deref(), Some("budget.turn-cap"));
        assert_eq!(place("relay").as_deref(), Some("relays.relay"));
        assert_eq!(
            place("max-content-bytes").as_deref(),
            Some("gate.max-content-bytes")
        );
    }

    #[test]
    fn secrets_are_the_flags_that_hide_their_values() {
        let secrets: Vec<(&str, &str)> = all()
            .iter()
            .filter_map(|key| Some((key.flag.as_str(), key.secret.as_deref()?)))
            .collect();
        assert_eq!(
            secrets,
            [
                (
                    "signer",
                    "put it in a file of its own (chmod 600) and name it with signer-file, or set ACP_BRIDGE_SIGNER"
                ),
                ("group-invite-code", "set ACP_BRIDGE_GROUP_INVITE_CODE"),
            ]
        );
    }
}
