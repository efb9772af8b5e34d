//! Owner commands: `!cancel`, `!status`, `!rotate`, `!model`, `!mode`,
//! `!agent`, `!schedules`, `!every`, `!at`, `!unschedule`, `!usage`,
//! `!budget`, `!help`.
//!
//! A command is a mention whose whole text, once references to people
//! (`nostr:npub…`, `@name`) are set aside, is the command word; `!model`,
//! `!mode` and `!agent` alone take one more word, the choice, and `!budget`
//! the rest of the message (a setting whose amounts hold spaces), as do
//! `!every` and `!at` (a prompt, kept as written). Only the
//! owner's signed mentions are parsed as commands; from anyone else the
//! same text is an ordinary message. What each command does lives with the
//! heart, which owns the state they act on.

use acp_bridge_core::mention::CommandCall;
use acp_client::ControlKind;

/// A command the owner can give in any conversation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnerCommand {
    /// Cancel this conversation's turn in flight.
    Cancel,
    /// Reply with turns in flight, queue depths, agents alive, steer counts.
    Status,
    /// Start a fresh agent session for this conversation.
    Rotate,
    /// List the conversation's models (or modes), or choose one.
    Control {
        kind: ControlKind,
        choice: Option<String>,
    },
    /// List the agent profiles, or switch the conversation to one.
    Agent { name: Option<String> },
    /// List the schedules and their next runs.
    Schedules,
    /// Reply with what the turns spent today and this month.
    Usage,
    /// Reply with the budget's limits, or override one (the rest of the
    /// message: `SCOPE PERIOD AMOUNTS|off|default`).
    Budget { setting: Option<String> },
    /// Run a prompt here every interval (`<interval> <prompt>`, as written).
    Every { spec: String },
    /// Run a prompt here once (`<time> <prompt>`, as written).
    At { spec: String },
    /// Stop a schedule set from chat.
    Unschedule { id: String },
    /// List the commands.
    Help,
}

impl OwnerCommand {
    /// The call `content` makes when it is exactly a command, as the
    /// mention's intent carries it: the command's word (the first word
    /// past the references to people) and the text after it, trimmed.
    pub fn call(content: &str) -> Option<CommandCall> {
        Self::parse(content)?;
        let name = content.split_whitespace().find(|word| word.starts_with('!'))?;
        Some(CommandCall {
            name: name.to_owned(),
            args: rest_after(content, name).to_owned(),
        })
    }

    /// The command a call (journaled with its mention) names; `None` when
    /// it names none.
    pub fn of_call(call: &CommandCall) -> Option<Self> {
        Self::parse(&format!("{} {}", call.name, call.args))
    }

    /// Parses `content`; `None` when it is not exactly a command.
    pub fn parse(content: &str) -> Option<Self> {
        let mut words = content
            .split_whitespace()
            .filter(|word| !word.starts_with("nostr:") && !word.starts_with('@'));
        let command = match words.next()? {
            "!cancel" => OwnerCommand::Cancel,
            "!status" => OwnerCommand::Status,
            "!rotate" => OwnerCommand::Rotate,
            "!help" => OwnerCommand::Help,
            "!schedules" => OwnerCommand::Schedules,
            "!usage" => OwnerCommand::Usage,
            "!budget" => {
                let rest: Vec<&str> = words.by_ref().collect();
                OwnerCommand::Budget {
                    setting: (!rest.is_empty()).then(|| rest.join(" ")),
                }
            }
            "!model" => Self::control(ControlKind::Model, words.next()),
            "!mode" => Self::control(ControlKind::Mode, words.next()),
            "!agent" => OwnerCommand::Agent {
                name: words.next().map(str::to_owned),
            },
            "!unschedule" => OwnerCommand::Unschedule {
                id: words.next().unwrap_or_default().to_owned(),
            },
            word @ ("!every" | "!at") => {
                let spec = rest_after(content, word).to_owned();
                return Some(if word == "!every" {
                    OwnerCommand::Every { spec }
                } else {
                    OwnerCommand::At { spec }
                });
            }
            _ => return None,
        };
        words.next().is_none().then_some(command)
    }

    fn control(kind: ControlKind, choice: Option<&str>) -> Self {
        OwnerCommand::Control {
            kind,
            choice: choice.map(str::to_owned),
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            OwnerCommand::Cancel => "!cancel",
            OwnerCommand::Status => "!status",
            OwnerCommand::Rotate => "!rotate",
            OwnerCommand::Control {
                kind: ControlKind::Model,
                ..
            } => "!model",
            OwnerCommand::Control {
                kind: ControlKind::Mode,
                ..
            } => "!mode",
            OwnerCommand::Agent { .. } => "!agent",
            OwnerCommand::Schedules => "!schedules",
            OwnerCommand::Usage => "!usage",
            OwnerCommand::Budget { .. } => "!budget",
            OwnerCommand::Every { .. } => "!every",
            OwnerCommand::At { .. } => "!at",
            OwnerCommand::Unschedule { .. } => "!unschedule",
            OwnerCommand::Help => "!help",
        }
    }

    /// What `!help` answers: every command, one line each.
    pub fn help_text() -> String {
        [
            "Commands (the owner's, sent as the whole message):",
            "!cancel: cancel this conversation's turn in flight.",
            "!status: turns, queues, agents and steers; sent in a DM, the details too.",
            "!rotate: a fresh agent session for this conversation (its model and mode stay).",
            "!model [ID]: this conversation's models (the current one marked), or choose one for its next turns.",
            "!mode [ID]: the same for the agent's modes.",
            "!agent [NAME]: the agent profiles (this conversation's marked), or switch this conversation to one (a fresh session).",
            "!schedules: the schedules this daemon runs, with their next runs.",
            "!every INTERVAL PROMPT: run PROMPT here every INTERVAL (30m, 1h, 1d).",
            "!at TIME PROMPT: run PROMPT here once, at TIME (HH:MM UTC, an RFC 3339 instant, or +90m).",
            "!unschedule ID: stop a schedule set with !every or !at.",
            "!usage: what the turns spent today and this month (UTC); sent in a DM, the top authors too.",
            "!budget [SCOPE PERIOD AMOUNTS|off|default]: the budget's limits, or override one (SCOPE bot, author, stranger or conversation; PERIOD day or month).",
            "!help: this list.",
        ]
        .join("\n")
    }
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

    #[test]
    fn a_call_carries_the_command_it_was_made_from() {
        for content in [
            "!cancel",
            "nostr:npub1xyz  !status ",
            "@bot !model deep",
            "!budget bot day 5 USD, 50 turns",
            "nostr:npub1xyz !every 1h  sum up\nthe day ",
            "!unschedule c2",
        ] {
            let call = OwnerCommand::call(content).expect(content);
            assert!(call.name.starts_with('!'), "{call:?}");
            assert_eq!(
                OwnerCommand::of_call(&call),
                OwnerCommand::parse(content),
                "{content}"
            );
        }
        assert_eq!(OwnerCommand::call("please !cancel"), None);
        let unknown = CommandCall {
            name: "!dance".to_owned(),
            args: String::new(),
        };
        assert_eq!(OwnerCommand::of_call(&unknown), None);
    }

    #[test]
    fn a_command_is_the_whole_text_besides_mentions() {
        assert_eq!(OwnerCommand::parse("!cancel"), Some(OwnerCommand::Cancel));
        assert_eq!(
            OwnerCommand::parse("nostr:npub1xyz  !status "),
            Some(OwnerCommand::Status)
        );
        assert_eq!(OwnerCommand::parse("@bot !rotate"), Some(OwnerCommand::Rotate));
        assert_eq!(OwnerCommand::parse("!help"), Some(OwnerCommand::Help));
        assert_eq!(OwnerCommand::parse("!schedules"), Some(OwnerCommand::Schedules));
        assert_eq!(
            OwnerCommand::parse("nostr:npub1xyz !every 1h  sum up\nthe day "),
            Some(OwnerCommand::Every {
                spec: "1h  sum up\nthe day".to_owned()
            })
        );
        assert_eq!(
            OwnerCommand::parse("!at +5m ping"),
            Some(OwnerCommand::At {
                spec: "+5m ping".to_owned()
            })
        );
        assert_eq!(
            OwnerCommand::parse("!unschedule c2"),
            Some(OwnerCommand::Unschedule { id: "c2".to_owned() })
        );
        assert_eq!(OwnerCommand::parse("!unschedule c2 c3"), None);
        assert_eq!(OwnerCommand::parse("every day !every 1h x"), None);
        assert_eq!(OwnerCommand::parse("@bot !usage"), Some(OwnerCommand::Usage));
        assert_eq!(OwnerCommand::parse("!usage today"), None);
        assert_eq!(
            OwnerCommand::parse("!budget"),
            Some(OwnerCommand::Budget { setting: None })
        );
        assert_eq!(
            OwnerCommand::parse("@bot !budget bot  day 5 USD, 50 turns"),
            Some(OwnerCommand::Budget {
                setting: Some("bot day 5 USD, 50 turns".to_owned())
            })
        );
        assert_eq!(OwnerCommand::parse("please !cancel"), None);
        assert_eq!(OwnerCommand::parse("!cancel now"), None);
        assert_eq!(OwnerCommand::parse("!cancelled"), None);
        assert_eq!(
            OwnerCommand::parse("@bot !model"),
            Some(OwnerCommand::control(ControlKind::Model, None))
        );
        assert_eq!(
            OwnerCommand::parse("!mode code"),
            Some(OwnerCommand::control(ControlKind::Mode, Some("code")))
        );
        assert_eq!(
            OwnerCommand::parse("!agent codex"),
            Some(OwnerCommand::Agent {
                name: Some("codex".to_owned())
            })
        );
        assert_eq!(
            OwnerCommand::parse("!agent"),
            Some(OwnerCommand::Agent { name: None })
        );
        assert_eq!(OwnerCommand::parse("!agent codex now"), None);
        assert_eq!(OwnerCommand::parse("!model deep please"), None);
        assert_eq!(OwnerCommand::parse("!status now"), None);
        assert_eq!(OwnerCommand::parse(""), None);
    }
}
