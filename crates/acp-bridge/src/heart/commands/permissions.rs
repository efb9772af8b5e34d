//! `!permissions`: this conversation's remembered answers to the agent's
//! permission questions (an "always" answer, remembered per tool), and
//! their revocation: `!permissions forget TOOL|all`; or one given outright,
//! `!permissions allow|reject TOOL` (the way to make an "always" stick in
//! a conversation that is not the owner's, where answers are not
//! remembered on their own). TOOL is the key the question's log line and
//! the owner's notices name (see `acp_bridge_core::approvals`).

use acp_bridge_core::approvals::{MAX_TOOL_KEY_BYTES, Verdict};

use super::{Command, Context, Who, words};

pub(crate) enum Permissions {
    List,
    /// `None`: every one.
    Forget(Option<String>),
    Set(Verdict, String),
}

impl Command for Permissions {
    const NAME: &'static str = "!permissions";
    const HELP: &'static str = "!permissions [forget TOOL|all | allow TOOL | reject TOOL]: the agent's tools whose permission questions this conversation answers without asking (your \"always\" answers), or revoke or add one.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        let words: Vec<&str> = words(args).collect();
        let tool = || (words.len() > 1).then(|| words[1..].join(" "));
        match words.first().copied() {
            None => Some(Permissions::List),
            Some("forget") if words[1..] == ["all"] => Some(Permissions::Forget(None)),
            Some("forget") => Some(Permissions::Forget(Some(tool()?))),
            Some(word) => Some(Permissions::Set(Verdict::parse(word)?, tool()?)),
        }
    }

    fn apply(self, context: &mut dyn Context) -> String {
        let (approvals, key) = (context.approvals(), context.key());
        let done = match self {
            Permissions::List => approvals.list(key).map(|choices| listing(&choices)),
            Permissions::Forget(None) => approvals
                .forget(key, None)
                .map(|count| format!("Forgot {count} remembered permission answer(s) in this conversation: the agent's questions are asked again.")),
            Permissions::Forget(Some(tool)) => approvals.forget(key, Some(&tool)).map(|count| match count {
                0 => format!("No remembered answer for {tool} in this conversation; !permissions lists them."),
                _ => format!("Forgot the remembered answer for {tool}: the agent's next question about it is asked."),
            }),
            Permissions::Set(_, tool) if tool.len() > MAX_TOOL_KEY_BYTES => {
                return format!("A tool's name is at most {MAX_TOOL_KEY_BYTES} bytes.");
            }
            Permissions::Set(verdict, tool) => approvals.remember(key, &tool, verdict).map(|()| {
                format!("Remembered: the agent's permission questions about {tool} in this conversation are answered {verdict} without asking you. !permissions forget {tool} revokes it.")
            }),
        };
        done.unwrap_or_else(|error| format!("Cannot reach the remembered answers: {error}"))
    }
}

fn listing(choices: &[(String, Verdict)]) -> String {
    if choices.is_empty() {
        return "No remembered permission answers in this conversation. An \"always\" answer to the agent's question in your own turn is remembered; !permissions allow|reject TOOL adds one.".to_owned();
    }
    let lines: Vec<String> = choices
        .iter()
        .map(|(tool, verdict)| format!("- {tool}: {verdict}"))
        .collect();
    format!(
        "Remembered permission answers in this conversation (the agent's questions about these tools are answered without asking you):\n{}\n!permissions forget TOOL|all revokes.",
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shapes_it_takes() {
        assert!(matches!(Permissions::parse(""), Some(Permissions::List)));
        assert!(matches!(
            Permissions::parse("forget all"),
            Some(Permissions::Forget(None))
        ));
        assert!(
            matches!(Permissions::parse("forget scripted tool"), Some(Permissions::Forget(Some(tool))) if tool == "scripted tool")
        );
        assert!(
            matches!(Permissions::parse("nostr:npub1x reject Bash"), Some(Permissions::Set(Verdict::Reject, tool)) if tool == "Bash")
        );
        assert!(Permissions::parse("allow").is_none());
        assert!(Permissions::parse("forget").is_none());
        assert!(Permissions::parse("always Bash").is_none());
    }
}
