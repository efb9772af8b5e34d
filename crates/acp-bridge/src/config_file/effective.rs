//! `acp-bridge config`: the configuration in effect, one line per setting
//! in the config file's tables, each value followed by where it came from
//! (`# default`, `# file`, `# env ACP_BRIDGE_…`, `# flag`).
//!
//! The printout is TOML, so that it can be pasted into a config file: an
//! unset setting is a commented line, and so is a secret, whose value is
//! never shown (the file does not take secrets). It shows what clap
//! parsed, before validation: `acp-bridge check` says whether it runs.

use std::fmt::Write;

use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

use super::keys::{self, Key, keys_of};
use super::{ConfigFile, Shape, daemon_flags};
use crate::edge::signer::args::SECRET_KEY_ENV;

/// The flag of the secret key's file, beside which the key is shown.
const KEY_FILE_FLAG: &str = "secret-key-file";
/// What a secret's value is shown as.
const REDACTED: &str = "<redacted>";

/// The settings of `matches` (a command that takes the daemon's flags,
/// parsed with `file`'s values as defaults) as TOML with their sources.
/// `env` reads the environment, for the secret key that has no flag.
pub fn effective_configuration(
    matches: &ArgMatches,
    file: Option<&ConfigFile>,
    env: &dyn Fn(&str) -> Option<String>,
) -> String {
    let mut out = String::from(
        "# acp-bridge: the settings in effect, each with where it came from (default < file < env < flag)\n",
    );
    match file {
        Some(file) => writeln!(out, "# config file: {}", file.path().display()),
        None => writeln!(out, "# config file: none (--config, ACP_BRIDGE_CONFIG)"),
    }
    .expect("writing to a String");
    let flags = daemon_flags();
    // The secret key has no flag (only a file's or the environment's): it
    // is shown, redacted, with its file's flag.
    let key_file = keys::key_of_flag(KEY_FILE_FLAG).expect("a flag");
    for table in keys::tables() {
        writeln!(out, "\n[{table}]").expect("writing to a String");
        if *table == key_file.table && env(SECRET_KEY_ENV).is_some() {
            writeln!(
                out,
                "# secret key = \"{REDACTED}\"  # env {SECRET_KEY_ENV} (environment only)"
            )
            .expect("writing to a String");
        }
        for key in keys_of(table) {
            out.push_str(&setting_line(key, &flags, matches, file));
        }
    }
    out
}

/// One setting's line, ending in a newline.
fn setting_line(key: &Key, flags: &Command, matches: &ArgMatches, file: Option<&ConfigFile>) -> String {
    let arg = flags
        .get_arguments()
        .find(|arg| arg.get_long() == Some(key.flag.as_str()))
        .expect("every key is a flag (keys::tests)");
    let id = arg.get_id().as_str();
    let source = match matches.value_source(id) {
        Some(ValueSource::CommandLine) => "flag".to_owned(),
        Some(ValueSource::EnvVariable) => format!(
            "env {}",
            arg.get_env()
                .map(|name| name.to_string_lossy())
                .unwrap_or_default()
        ),
        Some(ValueSource::DefaultValue) if file.and_then(|file| file.key_of(&key.flag)).is_some() => {
            "file".to_owned()
        }
        Some(ValueSource::DefaultValue) => "default".to_owned(),
        _ => return format!("# {} =  # default: unset\n", key.name),
    };
    if key.secret.is_some() {
        return format!(
            "# {} = \"{REDACTED}\"  # {source} (a secret: not taken from the file)\n",
            key.name
        );
    }
    let raw: Vec<String> = matches
        .get_raw(id)
        .map(|values| values.map(|value| value.to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    let value = match Shape::of(arg) {
        Shape::Switch => (raw.first().map(String::as_str) == Some("true")).to_string(),
        Shape::List => format!(
            "[{}]",
            raw.iter()
                .map(|one| toml_value(one))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Shape::One => toml_value(raw.first().map_or("", String::as_str)),
    };
    format!("{} = {value}  # {source}\n", key.name)
}

/// `text` as a TOML value: an integer when it reads back the same, else a
/// basic string.
pub(super) fn toml_value(text: &str) -> String {
    if text.parse::<i64>().is_ok_and(|number| number.to_string() == text) {
        return text.to_owned();
    }
    let mut quoted = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '\r' => quoted.push_str("\\r"),
            c if c.is_control() => {
                write!(quoted, "\\u{:04X}", u32::from(c)).expect("writing to a String");
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_toml_that_reads_back_the_same() {
        for text in [
            "9",
            "0",
            "-3",
            "007",
            "wss://relay.example",
            "a \"quoted\" \\ word\n",
            "",
        ] {
            let line = format!("value = {}", toml_value(text));
            let table: toml::Table = line.parse().expect(&line);
            let back = match &table["value"] {
                toml::Value::Integer(number) => number.to_string(),
                toml::Value::String(text) => text.clone(),
                other => panic!("{other:?}"),
            };
            assert_eq!(back, text, "{line}");
        }
    }
}
