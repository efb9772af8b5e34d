//! `--commands`: slash commands advertised the way agents do, and run
//! visibly, so a client's `/name args` from chat can be tested end to end.
//!
//! `--commands 'compact:Summarise the session|echo:Echo what follows'`
//! advertises those commands with an `available_commands_update` right
//! after every `session/new` and `session/resume` answer (as
//! claude-agent-acp does, outside any turn). A prompt whose whole text
//! starts with `/` is then taken as a command (claude-agent-acp's rule):
//! an advertised one is answered `ran /NAME with args: ARGS` (`(none)`
//! without), anything else `unknown command /NAME`, at once and without
//! a run, so a test sees it ran as a command and reached the agent
//! without any framing before it.

use serde_json::{Value, json};

/// The commands of a `--commands` spec: `name:description` entries
/// separated by `|` (a description may be empty).
fn listed(spec: &str) -> Vec<(&str, &str)> {
    spec.split('|')
        .filter_map(|entry| {
            let (name, description) = entry.split_once(':').unwrap_or((entry, ""));
            let name = name.trim();
            (!name.is_empty()).then_some((name, description.trim()))
        })
        .collect()
}

/// The `available_commands_update` advertising `spec`'s commands.
pub(crate) fn advertised(spec: &str) -> Value {
    let commands: Vec<Value> = listed(spec)
        .into_iter()
        .map(|(name, description)| json!({"name": name, "description": description}))
        .collect();
    json!({"sessionUpdate": "available_commands_update", "availableCommands": commands})
}

/// The answer to `prompt_text` when it is a command (it starts with `/`).
pub(crate) fn answer(spec: &str, prompt_text: &str) -> Option<String> {
    let command = prompt_text.strip_prefix('/')?;
    let (name, args) = command.split_once(char::is_whitespace).unwrap_or((command, ""));
    if !listed(spec).iter().any(|(known, _)| *known == name) {
        return Some(format!("unknown command /{name}"));
    }
    let args = match args.trim() {
        "" => "(none)",
        args => args,
    };
    Some(format!("ran /{name} with args: {args}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_advertised_and_run_by_name() {
        let spec = "compact:Summarise the session| echo : Echo |";
        let update = advertised(spec);
        assert_eq!(update["availableCommands"][1]["name"], "echo");
        assert_eq!(update["availableCommands"].as_array().unwrap().len(), 2);
        assert_eq!(
            answer(spec, "/echo hi  there").as_deref(),
            Some("ran /echo with args: hi  there")
        );
        assert_eq!(
            answer(spec, "/compact").as_deref(),
            Some("ran /compact with args: (none)")
        );
        assert_eq!(answer(spec, "/nope x").as_deref(), Some("unknown command /nope"));
        assert_eq!(answer(spec, "[acp-bridge] /echo hi"), None);
    }
}
