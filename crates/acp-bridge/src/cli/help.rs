//! `--help` is a page, `--help-long` the reference.
//!
//! A flag's doc comment is written once, beside the flag: its first line is
//! the short help, the whole its long help (clap's derive splits them at
//! the first blank line). `-h`/`--help` print the short help, one line per
//! flag under its heading, without variables and defaults (they would wrap
//! every line); `--help-long` prints the long help with them, as
//! `docs/flags.md` does (generated from the same `Command`).
//!
//! A tuning flag (one a newcomer never needs: runtime threads, fetch
//! timeouts, byte limits with sane defaults) is declared with
//! `hide_short_help = true`: the page leaves it out to stay one screen
//! (`tests/e2e/cli.rs` holds it to a bound), `--help-long` and
//! `docs/flags.md` list it.

use clap::builder::PossibleValue;
use clap::{Arg, ArgAction, Command};

use crate::base::flags::{shown_default, shown_values};

/// The footer of a page whose flags have more to say than one line.
pub const DETAIL_POINTER: &str =
    "Every flag in detail, tuning flags too (variable, default, meaning): --help-long, or docs/flags.md.";

/// The footer of the binary's own page, whose daemon flags `run` lists.
pub const RUN_POINTER: &str =
    "Without a command, acp-bridge runs the daemon: its flags are on acp-bridge run --help.";

/// The binary's `command` with every (sub)command's help arranged so, and
/// the flags it shares with a subcommand (the daemon's: `acp-bridge
/// --relay …` runs it) listed on the subcommand's page only.
pub fn arranged(command: Command) -> Command {
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    let shared: Vec<String> = command
        .get_subcommands()
        .flat_map(Command::get_arguments)
        .filter_map(|arg| arg.get_long().map(str::to_owned))
        .collect();
    let command = arrange_one(command);
    let command = if shared.is_empty() {
        command
    } else {
        command
            .mut_args(|arg| {
                let listed_below = !arg.is_global_set()
                    && arg
                        .get_long()
                        .is_some_and(|long| shared.iter().any(|one| one == long));
                if listed_below { arg.hide(true) } else { arg }
            })
            .after_help(RUN_POINTER)
    };
    names
        .iter()
        .fold(command, |command, name| command.mut_subcommand(name, arranged))
}

fn arrange_one(command: Command) -> Command {
    let has_details = command.get_arguments().any(|arg| arg.get_long_help().is_some());
    let command = command
        // One line per flag, however long: nothing wraps without clap's
        // `wrap_help`, and a heading would otherwise turn to two lines a flag.
        .term_width(0)
        .disable_help_flag(true)
        .mut_args(detailed_in_long_help)
        .arg(
            Arg::new("help")
                .short('h')
                .long("help")
                .action(ArgAction::HelpShort)
                .help("Print this page")
                .help_heading(None::<&str>),
        )
        .arg(
            Arg::new("help-long")
                .long("help-long")
                .action(ArgAction::HelpLong)
                .help("Print every flag in detail, with its variable and default")
                .help_heading(None::<&str>)
                // The footer names it, a line saved on a page kept short.
                .hide(has_details),
        );
    if has_details {
        command.after_help(DETAIL_POINTER)
    } else {
        command
    }
}

/// `arg` with its variable, default and possible values in its long help
/// only.
fn detailed_in_long_help(arg: Arg) -> Arg {
    let details = details(&arg);
    if details.is_empty() {
        return arg;
    }
    let text = arg
        .get_long_help()
        .or_else(|| arg.get_help())
        .map(ToString::to_string)
        .unwrap_or_default();
    let long = format!("{text}\n\n{}", details.join("\n"));
    let takes_values = arg.get_action().takes_values();
    arg.long_help(long)
        .hide_env(true)
        .hide_default_value(takes_values)
        .hide_possible_values(takes_values)
}

/// The lines clap would add to `arg`'s help: its possible values, its
/// variable, its default.
fn details(arg: &Arg) -> Vec<String> {
    let mut lines = Vec::new();
    let values = shown_values(arg);
    if values.iter().any(|value| value.get_help().is_some()) {
        lines.push("Possible values:".to_owned());
        for value in &values {
            match value.get_help() {
                Some(help) => lines.push(format!("- {}: {help}", value.get_name())),
                None => lines.push(format!("- {}", value.get_name())),
            }
        }
    } else if !values.is_empty() {
        let names: Vec<&str> = values.iter().map(PossibleValue::get_name).collect();
        lines.push(format!("[possible values: {}]", names.join(", ")));
    }
    if let Some(env) = arg.get_env() {
        // As clap shows an unset variable: `deploy/verify.sh` reads it so.
        lines.push(format!("[env: {}=]", env.to_string_lossy()));
    }
    if let Some(default) = shown_default(arg) {
        lines.push(format!("[default: {default}]"));
    }
    lines
}
