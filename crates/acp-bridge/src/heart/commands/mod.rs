//! Owner commands, one room each (mini-redis's `cmd/`): every command is a
//! file here holding its word and help line, who may give it, its parser
//! and its work, and [`REGISTRY`] lists them, one line each.
//!
//! A command is a mention whose whole text, once references to people
//! (`nostr:npub…`, `@name`) are set aside, is the command word and what
//! that command takes after it. The screening recognises one with
//! [`recognise`] (only the owner's signed mentions are commands; from
//! anyone else the same text is an ordinary message) and journals it as a
//! [`CommandCall`]: the word and its arguments as written. The heart runs
//! it with [`apply`], which parses the arguments again and does the work
//! through the narrow [`Context`] the heart lends: the conversation's
//! mention, its live turn, and handles to what commands act on.
//!
//! A new command is one new file with a type implementing [`Command`] and
//! one line in [`REGISTRY`]; `!help` lists it from there.

mod agent;
mod agent_commands;
mod at;
mod budget;
mod cancel;
mod context;
mod control;
mod every;
mod fork;
mod help;
mod leave;
mod new;
mod options;
mod permissions;
mod resume;
mod rotate;
mod schedules;
mod sessions;
mod set;
mod status;
mod unschedule;
mod usage;
mod version;

pub(crate) use context::{Context, Later};
pub(crate) use status::{HereFacts, StatusFacts};

use acp_bridge_core::mention::{CommandCall, names_someone};

/// Who may give a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    /// The owner only (checked before the author gate: the owner's
    /// commands work even with `--respond-to nobody`).
    Owner,
}

impl Who {
    /// Whether the author of a mention (`from_owner`: the owner's signed
    /// one) may give the command.
    fn admits(self, from_owner: bool) -> bool {
        match self {
            Who::Owner => from_owner,
        }
    }
}

/// One owner command: a room of its own.
pub(crate) trait Command: Sized {
    /// The word that starts it (`!cancel`).
    const NAME: &'static str;
    /// Its line in `!help`.
    const HELP: &'static str;
    /// Who may give it.
    const WHO: Who;

    /// The command from what followed its word (trimmed, as written);
    /// `None` when that is not this command's shape. Pure: the screening
    /// recognises commands with it, and the heart parses again at apply.
    fn parse(args: &str) -> Option<Self>;

    /// Does the work; the reply to the owner.
    fn apply(self, context: &mut dyn Context) -> String;
}

/// A command as the registry holds it.
struct Entry {
    name: &'static str,
    help: &'static str,
    who: Who,
    parses: fn(&str) -> bool,
    apply: fn(&str, &mut dyn Context) -> Option<String>,
}

const fn entry<C: Command>() -> Entry {
    Entry {
        name: C::NAME,
        help: C::HELP,
        who: C::WHO,
        parses: parses::<C>,
        apply: parse_and_apply::<C>,
    }
}

fn parses<C: Command>(args: &str) -> bool {
    C::parse(args).is_some()
}

fn parse_and_apply<C: Command>(args: &str, context: &mut dyn Context) -> Option<String> {
    Some(C::parse(args)?.apply(context))
}

/// Every command, in `!help`'s order: one line each.
const REGISTRY: &[Entry] = &[
    entry::<cancel::Cancel>(),
    entry::<status::Status>(),
    entry::<new::New>(),
    entry::<rotate::Rotate>(),
    entry::<leave::Leave>(),
    entry::<sessions::Sessions>(),
    entry::<resume::Resume>(),
    entry::<fork::Fork>(),
    entry::<control::Model>(),
    entry::<control::Mode>(),
    entry::<options::Options>(),
    entry::<set::Set>(),
    entry::<agent_commands::Commands>(),
    entry::<agent::Agent>(),
    entry::<permissions::Permissions>(),
    entry::<schedules::Schedules>(),
    entry::<every::Every>(),
    entry::<at::At>(),
    entry::<unschedule::Unschedule>(),
    entry::<usage::Usage>(),
    entry::<budget::Budget>(),
    entry::<version::Version>(),
    entry::<help::Help>(),
];

/// The command `content` is, if it is exactly one that its author
/// (`from_owner`: the owner) may give.
pub(crate) fn recognise(content: &str, from_owner: bool) -> Option<CommandCall> {
    let word = content.split_whitespace().find(|word| !names_someone(word))?;
    let entry = REGISTRY.iter().find(|entry| entry.name == word)?;
    let args = rest_after(content, word);
    (entry.who.admits(from_owner) && (entry.parses)(args)).then(|| CommandCall {
        name: word.to_owned(),
        args: args.to_owned(),
    })
}

/// Runs `call` (recognised when its mention was taken) in `context`; the
/// reply to the owner.
pub(crate) fn apply(call: &CommandCall, context: &mut dyn Context) -> String {
    REGISTRY
        .iter()
        .find(|entry| entry.name == call.name)
        .and_then(|entry| (entry.apply)(&call.args, context))
        .unwrap_or_else(|| {
            format!(
                "`{} {}` is not a command this daemon knows; !help lists them.",
                call.name, call.args
            )
        })
}

/// What `!help` answers: every command of the registry, one line each.
fn help_text() -> String {
    std::iter::once("Commands (the owner's, sent as the whole message):")
        .chain(REGISTRY.iter().map(|entry| entry.help))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The words of a command's arguments, references to people set aside.
fn words(args: &str) -> impl Iterator<Item = &str> {
    args.split_whitespace().filter(|word| !names_someone(word))
}

/// Whether a command that takes nothing got nothing.
fn no_args(args: &str) -> bool {
    words(args).next().is_none()
}

/// The one word a command takes if any (`Some(None)`: none given; `None`:
/// more than one).
fn at_most_one_word(args: &str) -> Option<Option<String>> {
    let mut words = words(args);
    let first = words.next().map(str::to_owned);
    words.next().is_none().then_some(first)
}

/// The text of `content` after `word`, one of its own words, as written
/// (line breaks kept): a schedule's prompt.
fn rest_after<'a>(content: &'a str, word: &str) -> &'a str {
    let start = word.as_ptr() as usize - content.as_ptr() as usize + word.len();
    content[start..].trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> Option<CommandCall> {
        Some(CommandCall {
            name: name.to_owned(),
            args: args.to_owned(),
        })
    }

    #[test]
    fn a_command_is_the_whole_text_besides_mentions() {
        let owner = |content| recognise(content, true);
        assert_eq!(owner("!cancel"), call("!cancel", ""));
        assert_eq!(owner("nostr:npub1xyz  !status "), call("!status", ""));
        assert_eq!(owner("@bot !rotate"), call("!rotate", ""));
        assert_eq!(owner("!help"), call("!help", ""));
        assert_eq!(owner("!version"), call("!version", ""));
        assert_eq!(owner("!version please"), None);
        assert_eq!(owner("!schedules"), call("!schedules", ""));
        assert_eq!(
            owner("nostr:npub1xyz !every 1h  sum up\nthe day "),
            call("!every", "1h  sum up\nthe day")
        );
        assert_eq!(owner("!at +5m ping"), call("!at", "+5m ping"));
        assert_eq!(owner("!unschedule c2"), call("!unschedule", "c2"));
        assert_eq!(owner("!unschedule c2 c3"), None);
        assert_eq!(owner("every day !every 1h x"), None);
        assert_eq!(owner("@bot !usage"), call("!usage", ""));
        assert_eq!(owner("!usage today"), None);
        assert_eq!(owner("!budget"), call("!budget", ""));
        assert_eq!(
            owner("@bot !budget bot  day 5 USD, 50 turns"),
            call("!budget", "bot  day 5 USD, 50 turns")
        );
        assert_eq!(owner("please !cancel"), None);
        assert_eq!(owner("!cancel now"), None);
        assert_eq!(owner("!cancel @bot"), call("!cancel", "@bot"));
        assert_eq!(owner("!cancelled"), None);
        assert_eq!(owner("@bot !model"), call("!model", ""));
        assert_eq!(owner("!mode code"), call("!mode", "code"));
        assert_eq!(owner("!agent codex"), call("!agent", "codex"));
        assert_eq!(owner("!agent"), call("!agent", ""));
        assert_eq!(owner("!agent codex now"), None);
        assert_eq!(owner("!model deep please"), None);
        assert_eq!(owner("!status now"), None);
        assert_eq!(owner("@bot !new"), call("!new", ""));
        assert_eq!(owner("!new please"), None);
        assert_eq!(owner("!sessions"), call("!sessions", ""));
        assert_eq!(owner("!resume 0fea55e9"), call("!resume", "0fea55e9"));
        assert_eq!(owner("!resume"), None);
        assert_eq!(owner("!resume a b"), None);
        assert_eq!(
            owner("!fork what did we decide?"),
            call("!fork", "what did we decide?")
        );
        assert_eq!(owner("!fork @bot"), None);
        assert_eq!(owner("!options"), call("!options", ""));
        assert_eq!(owner("!set effort high"), call("!set", "effort high"));
        assert_eq!(owner("!set"), call("!set", ""));
        assert_eq!(owner("!commands"), call("!commands", ""));
        assert_eq!(owner("!commands all"), None);
        assert_eq!(owner(""), None);
    }

    #[test]
    fn anyone_else_gives_no_command() {
        assert_eq!(recognise("!cancel", false), None);
        assert_eq!(recognise("!version", false), None);
        assert_eq!(recognise("!help", false), None);
    }

    #[test]
    fn each_command_parses_its_arguments_as_before() {
        assert_eq!(
            budget::Budget::parse("bot  day @bot 5 USD, 50 turns").map(|b| b.setting),
            Some(Some("bot day 5 USD, 50 turns".to_owned()))
        );
        assert_eq!(budget::Budget::parse("").map(|b| b.setting), Some(None));
        assert_eq!(
            unschedule::Unschedule::parse("").map(|u| u.id),
            Some(String::new())
        );
        assert_eq!(
            every::Every::parse("1h x @bob").map(|e| e.spec),
            Some("1h x @bob".to_owned())
        );
        assert_eq!(
            control::Model::parse("nostr:npub1x deep").map(|m| m.0.choice),
            Some(Some("deep".to_owned()))
        );
    }

    #[test]
    fn help_lists_every_command_of_the_registry_once() {
        let help = help_text();
        for entry in REGISTRY {
            assert!(help.contains(&format!("\n{}", entry.help)), "{help}");
            assert!(entry.help.starts_with(entry.name), "{}", entry.help);
        }
        let names: std::collections::BTreeSet<&str> = REGISTRY.iter().map(|entry| entry.name).collect();
        assert_eq!(names.len(), REGISTRY.len(), "one entry per word");
    }
}
