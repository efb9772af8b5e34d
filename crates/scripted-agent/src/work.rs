//! The visible work of a turn, as a real agent streams it: a plan that
//! advances with the rounds (`[plan=read|edit|test]`), an edit with its
//! diff (`[tool-edit=PATH|OLD|NEW]`) and a shell command with its terminal
//! (`[tool-exec=COMMAND]`). Only the updates are sent: no file is touched
//! and no command runs.

use serde_json::{Value, json};

use crate::acp;
use crate::directives::Edit;
use crate::shared::Agent;
use crate::wire::ClientGone;

/// The plan's update once `done` entries are completed; the next one is in
/// progress, the rest pending.
pub(crate) fn plan_update(entries: &[String], done: usize) -> Value {
    let entries: Vec<Value> = entries
        .iter()
        .enumerate()
        .map(|(index, content)| {
            let status = match index.cmp(&done) {
                std::cmp::Ordering::Less => "completed",
                std::cmp::Ordering::Equal => "in_progress",
                std::cmp::Ordering::Greater => "pending",
            };
            json!({"content": content, "priority": "medium", "status": status})
        })
        .collect();
    json!({"sessionUpdate": "plan", "entries": entries})
}

/// Sends the plan with `done` entries completed, if the turn has one.
pub(crate) async fn send_plan(
    agent: &Agent,
    session_id: &str,
    plan: Option<&[String]>,
    done: usize,
) -> Result<(), ClientGone> {
    match plan {
        Some(entries) => acp::send_update(&agent.outbox, session_id, plan_update(entries, done)).await,
        None => Ok(()),
    }
}

/// Reports each edit, then each command: a tool call in progress with its
/// content, then its completion.
pub(crate) async fn run_tools(
    agent: &Agent,
    session_id: &str,
    edits: &[Edit],
    commands: &[String],
) -> Result<(), ClientGone> {
    for edit in edits {
        let diff =
            json!({"type": "diff", "path": edit.path, "oldText": edit.old_text, "newText": edit.new_text});
        let call = json!({"title": format!("Edit {}", edit.path), "kind": "edit",
            "rawInput": {"file_path": edit.path}, "content": [diff]});
        report(agent, session_id, call).await?;
    }
    for command in commands {
        let id = agent.ids.tool_call();
        let call = json!({"title": command, "kind": "execute", "rawInput": {"command": command},
            "content": [{"type": "terminal", "terminalId": format!("term_{id}")}]});
        report(agent, session_id, call).await?;
    }
    Ok(())
}

/// `call` (title, kind, input, content) as a tool call in progress, then
/// completed.
async fn report(agent: &Agent, session_id: &str, mut call: Value) -> Result<(), ClientGone> {
    let id = agent.ids.tool_call();
    call["sessionUpdate"] = json!("tool_call");
    call["toolCallId"] = json!(id);
    call["status"] = json!("in_progress");
    acp::send_update(&agent.outbox, session_id, call).await?;
    let done = acp::update::tool_call_update(&id, "completed");
    acp::send_update(&agent.outbox, session_id, done).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_advances_entry_by_entry() {
        let plan = ["read".to_owned(), "edit".to_owned()];
        let statuses = |done| {
            plan_update(&plan, done)["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|entry| entry["status"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(statuses(0), ["in_progress", "pending"]);
        assert_eq!(statuses(1), ["completed", "in_progress"]);
        assert_eq!(statuses(2), ["completed", "completed"]);
    }
}
