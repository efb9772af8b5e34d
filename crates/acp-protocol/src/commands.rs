//! The agent's own slash commands (`available_commands_update`).
//!
//! Agents advertise commands such as `/compact` or `/review` with a
//! `session/update` whose `sessionUpdate` is `available_commands_update`:
//! `{availableCommands: [{name, description, input?: {hint}}]}`, often
//! right after `session/new` and outside any turn, and again whenever the
//! list changes (each update replaces the list). ACP runs a command as an
//! ordinary prompt whose text is `/name args`; nothing else is needed on
//! the wire. This module only reads the list: which mention is a command,
//! and whether it is sent, is the daemon's decision.
//!
//! Parsing is lenient: an entry without a name is skipped, unknown fields
//! are ignored.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One command the agent advertises.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AvailableCommand {
    /// Its name, without the `/`.
    pub name: String,
    /// What it does, as the agent says.
    #[serde(default)]
    pub description: String,
    /// What its input is, when it takes one (`input.hint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// The commands an `available_commands_update` carries; `None` for any
/// other update.
pub fn available_commands(update: &Value) -> Option<Vec<AvailableCommand>> {
    if update.get("sessionUpdate").and_then(Value::as_str) != Some("available_commands_update") {
        return None;
    }
    let listed = update
        .get("availableCommands")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    Some(listed.iter().filter_map(command).collect())
}

fn command(entry: &Value) -> Option<AvailableCommand> {
    let name = entry.get("name")?.as_str()?.trim_start_matches('/');
    if name.is_empty() {
        return None;
    }
    let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
    Some(AvailableCommand {
        name: name.to_owned(),
        description: text(entry.get("description")).unwrap_or_default(),
        hint: text(entry.get("input").and_then(|input| input.get("hint"))),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_update_is_read_leniently_and_others_are_not_commands() {
        let update = json!({"sessionUpdate": "available_commands_update", "availableCommands": [
            {"name": "compact", "description": "Clear conversation history but keep a summary"},
            {"name": "review", "description": "Review", "input": {"hint": "what to review"}, "extra": 1},
            {"description": "no name"},
            {"name": ""}
        ]});
        let commands = available_commands(&update).unwrap();
        assert_eq!(commands.len(), 2);
        assert_eq!(commands[0].name, "compact");
        assert_eq!(commands[0].hint, None);
        assert_eq!(commands[1].hint.as_deref(), Some("what to review"));
        assert_eq!(
            available_commands(&json!({"sessionUpdate": "available_commands_update"})),
            Some(vec![])
        );
        assert_eq!(
            available_commands(&json!({"sessionUpdate": "agent_message_chunk"})),
            None
        );
    }
}
