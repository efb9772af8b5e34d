//! The reference pages written from the daemon's `Command`: the flag
//! tables of `docs/flags.md`, the table of a profile's keys in
//! `docs/several-agents.md` and the tables of
//! `deploy/config/acp-bridge.toml.example`, each between two marker lines
//! of its file (the prose around them is written by hand).
//!
//! A flag's doc comment is the one source: its first line is the short
//! help (`--help`, the example's comment), the rest its meaning (`--help-long`,
//! the page's table). A unit test fails when a committed page differs
//! from what the flags make, and rewrites it with `ACP_BRIDGE_REGENERATE=1`.

use std::fmt::Write;

use clap::{Arg, Command};

use super::keys::{self, Key};
use super::{Shape, daemon_flags};
use crate::base::flags::{shown_default, shown_values};

/// What regenerates the pages, as their marker lines say.
pub(crate) const REGENERATE: &str =
    "ACP_BRIDGE_REGENERATE=1 cargo test -p acp-bridge --lib --locked config_file::reference";

/// The header row of a flag table, which is how `tests/e2e/docs.rs` finds
/// them.
const FLAG_TABLE_HEADER: &str = "| Flag | Environment | Default | Meaning |";

/// `docs/flags.md`'s tables: one per heading (table of the config file),
/// in the file's order, `--config` first.
pub(crate) fn flags_markdown() -> String {
    let flags = daemon_flags();
    let mut out = String::new();
    let config = flags
        .get_arguments()
        .find(|arg| arg.get_long() == Some("config"))
        .expect("--config");
    flag_table(&mut out, "The config file", &[(config, None)]);
    let mut done: Vec<&str> = Vec::new();
    for key in keys::all() {
        let heading = heading_of(&flags, key);
        if done.contains(&heading) {
            continue;
        }
        done.push(heading);
        let rows: Vec<(&Arg, Option<&Key>)> = keys::all()
            .iter()
            .filter(|other| heading_of(&flags, other) == heading)
            .map(|other| (arg_of(&flags, &other.flag), Some(other)))
            .collect();
        let mut tables: Vec<String> = Vec::new();
        for (_, key) in &rows {
            let table = key.map(|key| format!("`[{}]`", key.table)).unwrap_or_default();
            if !tables.contains(&table) {
                tables.push(table);
            }
        }
        flag_table(&mut out, &format!("{heading} ({})", tables.join(", ")), &rows);
    }
    out
}

fn flag_table(out: &mut String, heading: &str, rows: &[(&Arg, Option<&Key>)]) {
    writeln!(
        out,
        "\n## {heading}\n\n{FLAG_TABLE_HEADER}\n| --- | --- | --- | --- |"
    )
    .expect("writing to a String");
    for (arg, key) in rows {
        let env = arg
            .get_env()
            .map_or_else(|| "—".to_owned(), |env| format!("`{}`", env.to_string_lossy()));
        let default = match shown_default(arg) {
            Some(default) => format!("`{default}`"),
            None if Shape::of(arg) == Shape::Switch => "off".to_owned(),
            None => "—".to_owned(),
        };
        // A key named otherwise than its flag says where it sits.
        let place = key
            .filter(|key| key.name != key.flag)
            .map(|key| format!("In the file: `{}` in `[{}]`. ", key.name, key.table))
            .unwrap_or_default();
        writeln!(
            out,
            "| `--{}` | {env} | {default} | {place}{} |",
            arg.get_long().unwrap_or_default(),
            cell(&meaning(arg))
        )
        .expect("writing to a String");
    }
}

/// A flag's meaning: its long help but the short line that heads it (or
/// its help, when that is all), and its possible values with theirs.
fn meaning(arg: &Arg) -> String {
    let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
    let long = arg.get_long_help().map(ToString::to_string);
    let mut text = match long.as_deref().and_then(|long| long.split_once("\n\n")) {
        Some((_, rest)) => rest.to_owned(),
        None => long.unwrap_or(help),
    };
    let values: Vec<String> = shown_values(arg)
        .iter()
        .filter_map(|value| Some(format!("`{}`: {}", value.get_name(), value.get_help()?)))
        .collect();
    if !values.is_empty() {
        let sentence = text.trim_end().trim_end_matches('.').len();
        text.truncate(sentence);
        write!(text, ". Values: {}.", values.join("; ")).expect("writing to a String");
    }
    text
}

/// `text` as one cell of a Markdown table.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// `docs/several-agents.md`'s table of a profile's keys: the flags a
/// profile may set (named as the flag without `agent-`, meaning what its
/// short help says), then the profile's own keys.
pub(crate) fn profile_keys_markdown() -> String {
    let mut out = String::from("\n| Key | Flag | Meaning |\n| --- | --- | --- |\n");
    for flag in crate::heart::profiles::flags::keys() {
        let help = flag.arg.get_help().map(ToString::to_string).unwrap_or_default();
        writeln!(out, "| `{}` | `--{}` | {} |", flag.key, flag.long(), cell(&help))
            .expect("writing to a String");
    }
    for (key, meaning) in super::profiles::PROFILE_ONLY_KEYS {
        writeln!(out, "| `{key}` | — | {} |", cell(meaning)).expect("writing to a String");
    }
    out
}

/// The example file's tables: every key but the secrets, commented out at
/// its default (or a `<PLACEHOLDER>` of its value), under its short help.
pub(crate) fn example_tables() -> String {
    let flags = daemon_flags();
    let mut out = String::new();
    for table in keys::tables() {
        writeln!(out, "\n[{table}]").expect("writing to a String");
        for key in keys::keys_of(table) {
            let arg = arg_of(&flags, &key.flag);
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            // A key named otherwise than its flag says its flag.
            let flag = if key.name == key.flag {
                String::new()
            } else {
                format!(" (--{})", key.flag)
            };
            match &key.secret {
                Some(instead) => writeln!(out, "\n# {} is a secret, never in this file: {instead}", key.name),
                None => writeln!(out, "\n# {help}{flag}\n#{} = {}", key.name, example_value(arg)),
            }
            .expect("writing to a String");
        }
    }
    out
}

/// A key's value in the example: its default, else a placeholder named
/// after the flag's value.
fn example_value(arg: &Arg) -> String {
    let placeholder = || {
        let values: Vec<String> = shown_values(arg)
            .iter()
            .map(|value| value.get_name().to_owned())
            .collect();
        let name = match arg.get_value_names().and_then(|names| names.first()) {
            _ if !values.is_empty() => values.join("|"),
            Some(name) => name.to_string(),
            None => "VALUE".to_owned(),
        };
        format!("\"<{name}>\"")
    };
    match Shape::of(arg) {
        Shape::Switch => "false".to_owned(),
        Shape::List => match shown_default(arg) {
            Some(default) => format!(
                "[{}]",
                default
                    .split(',')
                    .map(|one| super::effective::toml_value(one.trim()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => format!("[{}]", placeholder()),
        },
        Shape::One => {
            shown_default(arg).map_or_else(placeholder, |default| super::effective::toml_value(&default))
        }
    }
}

fn heading_of<'a>(flags: &'a Command, key: &Key) -> &'a str {
    arg_of(flags, &key.flag)
        .get_help_heading()
        .expect("every key has a heading (keys::tests)")
}

fn arg_of<'a>(flags: &'a Command, long: &str) -> &'a Arg {
    flags
        .get_arguments()
        .find(|arg| arg.get_long() == Some(long))
        .expect("every key is a flag (keys::tests)")
}

/// `text` with the part between its lines starting with `begin` and `end`
/// replaced by `generated`; `None` without both lines.
fn spliced(text: &str, begin: &str, end: &str, generated: &str) -> Option<String> {
    let start = text.find(begin)?;
    let start = start + text[start..].find('\n')? + 1;
    let stop = start + text[start..].find(end)?;
    Some(format!("{}{generated}\n{}", &text[..start], &text[stop..]))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The marker lines around the generated part of each page.
    const PAGES: [(&str, &str, &str); 3] = [
        (
            "docs/flags.md",
            "<!-- generated from the flags' doc comments",
            "<!-- end of the generated tables -->",
        ),
        (
            "docs/several-agents.md",
            "<!-- generated from the flags' doc comments",
            "<!-- end of the generated table -->",
        ),
        (
            "deploy/config/acp-bridge.toml.example",
            "# ---- generated from the flags' doc comments",
            "# ---- end of the generated tables",
        ),
    ];

    /// `docs/flags.md` and the example file are what the flags make; with
    /// `ACP_BRIDGE_REGENERATE=1`, they are rewritten so.
    #[test]
    fn the_committed_reference_is_generated_from_the_flags() {
        let regenerate = std::env::var_os("ACP_BRIDGE_REGENERATE").is_some();
        let mut stale = Vec::new();
        for ((page, begin, end), generated) in
            PAGES
                .iter()
                .zip([flags_markdown(), profile_keys_markdown(), example_tables()])
        {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(page);
            let committed = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{page}: {error}"));
            let fresh = spliced(&committed, begin, end, &generated)
                .unwrap_or_else(|| panic!("{page} has lines starting with {begin:?} and {end:?}"));
            if fresh == committed {
                continue;
            }
            if regenerate {
                std::fs::write(&path, fresh).unwrap_or_else(|error| panic!("{page}: {error}"));
            } else {
                stale.push(*page);
            }
        }
        assert!(
            stale.is_empty(),
            "{stale:?} differ from the flags' doc comments: run {REGENERATE}"
        );
    }

    #[test]
    fn a_page_is_spliced_between_its_markers() {
        let page = "intro\n<!-- begin x -->\nold\nrows\n<!-- end -->\nafter\n";
        assert_eq!(
            spliced(page, "<!-- begin", "<!-- end", "new").as_deref(),
            Some("intro\n<!-- begin x -->\nnew\n<!-- end -->\nafter\n")
        );
        assert_eq!(spliced("no markers", "<!-- begin", "<!-- end", "new"), None);
    }
}
