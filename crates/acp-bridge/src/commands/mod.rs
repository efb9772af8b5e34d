//! Owner commands: `!cancel`, `!status`, `!rotate`, `!model`, `!mode`,
//! `!agent`, `!schedules`, `!usage`, `!budget`, `!help`.
//!
//! A command is a mention whose whole text, once references to people
//! (`nostr:npub…`, `@name`) are set aside, is the command word; `!model`,
//! `!mode` and `!agent` alone take one more word, the choice, and `!budget`
//! the rest of the message (a setting whose amounts hold spaces). Only the
//! owner's signed mentions are parsed as commands; from anyone else the
//! same text is an ordinary message. What each command does lives with the
//! heart, which owns the state they act on.

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
    /// List the commands.
    Help,
}

impl OwnerCommand {
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
            "!usage: what the turns spent today and this month (UTC); sent in a DM, the top authors too.",
            "!budget [SCOPE PERIOD AMOUNTS|off|default]: the budget's limits, or override one (SCOPE bot, author or conversation; PERIOD day or month).",
            "!help: this list.",
        ]
        .join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
