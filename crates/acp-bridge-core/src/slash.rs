//! The agent's own slash commands, given from chat.
//!
//! A mention whose text (people's references before it, such as the bot's
//! own `nostr:npub1…` or an `@name`, set aside) starts with `/name`, the
//! name being `[A-Za-z0-9][A-Za-z0-9_:.-]*` followed by a space or the
//! end, is a command for the agent, not a message: ACP runs a command as a
//! prompt whose text is exactly `/name args` (claude-agent-acp takes a
//! prompt as a command only when its text starts with `/`), so it goes
//! without any of the bridge's framing. `/etc/hosts is broken` is a
//! message (the name runs into a `/`). Our own `!` commands stay ours: the
//! screening takes them before any of this.
//!
//! What this module decides, pure:
//! - which mention is a command ([`SlashCommand::of`]: only a person's
//!   mention; a schedule's or a task's prompt is never one);
//! - that a command is a turn of its own: it starts its own batch, alone
//!   ([`batch_len`]), and never joins or steers a live turn (the mode gate
//!   queues it, the turn machine defers it), whatever
//!   `--multiple-event-handling` says, since a command's text must reach
//!   the agent as the whole prompt;
//! - whether the session offers it ([`SlashCommand::check`]), and the
//!   notice when it does not. The session's list is known only once the
//!   session is leased, so the driver asks at prompt time.
//!
//! A command's images are not sent (the prompt is its text alone).

use acp_protocol::AvailableCommand;

use crate::mention::{Intent, Mention, names_someone};

/// A `/name args` mention, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlashCommand {
    /// The name, without the `/`.
    pub name: String,
    /// What followed the name, trimmed (line breaks kept).
    pub args: String,
}

impl SlashCommand {
    /// The command `mention` is, if it is a person's `/name` mention.
    pub fn of(mention: &Mention) -> Option<Self> {
        match mention.intent {
            Intent::Turn => Self::parse(&mention.content),
            _ => None,
        }
    }

    /// The command `content` starts with, people's references before it
    /// set aside.
    pub fn parse(content: &str) -> Option<Self> {
        let mut rest = content.trim_start();
        while let Some(word) = rest.split_whitespace().next()
            && names_someone(word)
        {
            rest = rest[word.len()..].trim_start();
        }
        let after_slash = rest.strip_prefix('/')?;
        let end = after_slash
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '.' | '-')))
            .unwrap_or(after_slash.len());
        let (name, args) = after_slash.split_at(end);
        let starts_well = name.starts_with(|c: char| c.is_ascii_alphanumeric());
        let ends_well = args.is_empty() || args.starts_with(char::is_whitespace);
        (starts_well && ends_well).then(|| SlashCommand {
            name: name.to_owned(),
            args: args.trim().to_owned(),
        })
    }

    /// The prompt's whole text: `/name args`.
    pub fn prompt(&self) -> String {
        if self.args.is_empty() {
            format!("/{}", self.name)
        } else {
            format!("/{} {}", self.name, self.args)
        }
    }

    /// `Ok` when the session offers the command (`known`: what the agent
    /// advertised, `None` if nothing), else the notice its author is given.
    pub fn check(&self, known: Option<&[AvailableCommand]>) -> Result<(), String> {
        let known = known.unwrap_or_default();
        if known.iter().any(|command| command.name == self.name) {
            return Ok(());
        }
        if known.is_empty() {
            return Err(format!(
                "`/{}` was not sent: this agent offers no slash commands (it has advertised none to this session).",
                self.name
            ));
        }
        Err(format!(
            "`/{}` is not a command this agent offers, so it was not sent. Its commands:\n{}",
            self.name,
            listing(known)
        ))
    }
}

/// A description's bound in a listing: some agents describe a command
/// in paragraphs.
const DESCRIPTION_CHARS: usize = 160;

/// The commands, one line each: `/compact — Clear conversation history …`
/// (a description's first line, cut at [`DESCRIPTION_CHARS`] with `…`).
pub fn listing(commands: &[AvailableCommand]) -> String {
    commands
        .iter()
        .map(|command| {
            let first_line = command.description.lines().next().unwrap_or_default().trim();
            let description = match first_line.char_indices().nth(DESCRIPTION_CHARS) {
                Some((cut, _)) => format!("{}…", &first_line[..cut]),
                None => first_line.to_owned(),
            };
            let hint = command
                .hint
                .as_deref()
                .map(|hint| format!(" <{hint}>"))
                .unwrap_or_default();
            if description.is_empty() {
                format!("/{}{hint}", command.name)
            } else {
                format!("/{}{hint} — {description}", command.name)
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `mention` is a slash command.
pub fn is_command(mention: &Mention) -> bool {
    SlashCommand::of(mention).is_some()
}

/// How many of the waiting `mentions` (oldest first) the next batch takes,
/// before any cap: a command alone, else every mention up to the next
/// command.
pub fn batch_len<'a>(mentions: impl IntoIterator<Item = &'a Mention>) -> usize {
    let mut taken = 0;
    for mention in mentions {
        if is_command(mention) {
            return taken.max(1);
        }
        taken += 1;
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mention::test_mention;

    fn parsed(content: &str) -> Option<(String, String)> {
        SlashCommand::parse(content).map(|command| (command.name, command.args))
    }

    fn pair(name: &str, args: &str) -> Option<(String, String)> {
        Some((name.to_owned(), args.to_owned()))
    }

    #[test]
    fn a_command_is_a_name_after_a_slash_and_references_are_set_aside() {
        assert_eq!(parsed("/compact"), pair("compact", ""));
        assert_eq!(
            parsed("nostr:npub1bot  /echo hi there "),
            pair("echo", "hi there")
        );
        assert_eq!(
            parsed("@bot /review src/a.rs\nand b"),
            pair("review", "src/a.rs\nand b")
        );
        assert_eq!(parsed("/mcp:server.tool-1 x"), pair("mcp:server.tool-1", "x"));
        assert_eq!(parsed("/etc/hosts is broken"), None);
        assert_eq!(parsed("/-x"), None);
        assert_eq!(parsed("/ compact"), None);
        assert_eq!(parsed("please /compact"), None);
        assert_eq!(parsed("/compact!"), None);
        assert_eq!(parsed(""), None);
        assert_eq!(
            SlashCommand::parse("nostr:npub1bot /echo  a  b")
                .unwrap()
                .prompt(),
            "/echo a  b"
        );
        assert_eq!(SlashCommand::parse("/compact").unwrap().prompt(), "/compact");
    }

    #[test]
    fn an_unknown_command_is_refused_with_the_known_ones() {
        let known = [
            AvailableCommand {
                name: "compact".into(),
                description: "Clear conversation history but keep a summary".into(),
                hint: None,
            },
            AvailableCommand {
                name: "review".into(),
                description: String::new(),
                hint: Some("what".into()),
            },
        ];
        let nope = SlashCommand::parse("/nope").unwrap();
        assert_eq!(
            nope.check(Some(&known)).unwrap_err(),
            "`/nope` is not a command this agent offers, so it was not sent. Its commands:\n\
             /compact — Clear conversation history but keep a summary\n/review <what>"
        );
        assert!(nope.check(None).unwrap_err().contains("offers no slash commands"));
        assert_eq!(
            SlashCommand::parse("/compact now").unwrap().check(Some(&known)),
            Ok(())
        );
    }

    #[test]
    fn a_command_is_a_batch_of_its_own() {
        let at = |seq, text: &str| test_mention("room", seq, text, false);
        let waiting = [at(1, "hi"), at(2, "there"), at(3, "/compact"), at(4, "after")];
        assert_eq!(batch_len(&waiting), 2);
        assert_eq!(batch_len(&waiting[2..]), 1);
        assert_eq!(batch_len(&waiting[3..]), 1);
        assert_eq!(batch_len(&waiting[..0]), 0);
    }
}
