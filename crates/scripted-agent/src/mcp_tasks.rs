//! `[mcp-delegate=TEXT]`, `[mcp-task-status]`, `[mcp-task-stop]`: the
//! agent delegates a task through the offered MCP server's `delegate`
//! tool, then asks after it or stops it, each by the id `delegate`
//! answered (`task <id> …`), or by the id the directive names
//! (`[mcp-task-stop=ID]`). In TEXT, `{` and `}` stand for `[` and `]`, so
//! the task's own prompt can carry directives (`[mcp-delegate=go {rounds=9}]`).
//! `[mcp-delegate-wait]` asks for `background: false`,
//! `[mcp-delegate-to=WHO]` names who does it. Each call is one line of
//! the final message, as `mcp_client::call_tool` says it.

use serde_json::json;

use crate::mcp_client::{McpServer, call_tool};

/// The task calls one turn makes, from its directives.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TaskCalls {
    /// The task's prompt, braces already turned into brackets.
    pub(crate) delegate: Option<String>,
    pub(crate) wait: bool,
    pub(crate) to: Option<String>,
    /// `Some("")`: the task just delegated; else this id.
    pub(crate) status: Option<String>,
    pub(crate) stop: Option<String>,
}

impl TaskCalls {
    /// Takes the directive `inner` (`name` or `name=value`) if it is one of
    /// these; false otherwise.
    pub(crate) fn apply(&mut self, inner: &str) -> bool {
        match inner.split_once('=') {
            None => match inner {
                "mcp-delegate-wait" => self.wait = true,
                "mcp-task-status" => self.status = Some(String::new()),
                "mcp-task-stop" => self.stop = Some(String::new()),
                _ => return false,
            },
            Some(("mcp-delegate", text)) if !text.is_empty() => {
                self.delegate = Some(text.replace('{', "[").replace('}', "]"));
            }
            Some(("mcp-delegate-to", who)) if !who.is_empty() => self.to = Some(who.to_owned()),
            Some(("mcp-task-status", id)) => self.status = Some(id.to_owned()),
            Some(("mcp-task-stop", id)) => self.stop = Some(id.to_owned()),
            _ => return false,
        }
        true
    }

    pub(crate) fn any(&self) -> bool {
        self.delegate.is_some() || self.status.is_some() || self.stop.is_some()
    }

    /// Makes the calls in order; a line for each.
    pub(crate) async fn call(&self, server: &McpServer) -> Vec<String> {
        let mut lines = Vec::new();
        let mut delegated = String::new();
        if let Some(prompt) = &self.delegate {
            let mut arguments = json!({ "prompt": prompt, "background": !self.wait });
            if let Some(to) = &self.to {
                arguments["to"] = json!(to);
            }
            let line = call_tool(server, "delegate", arguments).await;
            delegated = task_id(&line).unwrap_or_default();
            lines.push(line);
        }
        for (tool, id) in [("task_status", &self.status), ("task_stop", &self.stop)] {
            if let Some(id) = id {
                let id = if id.is_empty() { &delegated } else { id };
                lines.push(call_tool(server, tool, json!({ "id": id })).await);
            }
        }
        lines
    }
}

/// The id in `delegate`'s answer line (`mcp delegate: ok: task <id> …`).
fn task_id(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("ok: task ")?;
    rest.split_whitespace()
        .next()
        .map(|id| id.trim_end_matches([';', ',', ':']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_make_the_calls_and_braces_become_brackets() {
        let mut calls = TaskCalls::default();
        for inner in [
            "mcp-delegate=go {rounds=9}",
            "mcp-delegate-wait",
            "mcp-task-stop",
            "mcp-task-status=t7",
            "mcp-delegate-to=npub1x",
        ] {
            assert!(calls.apply(inner), "{inner}");
        }
        assert!(!calls.apply("rounds=2"));
        assert_eq!(calls.delegate.as_deref(), Some("go [rounds=9]"));
        assert!(calls.wait && calls.any());
        assert_eq!(calls.stop.as_deref(), Some(""));
        assert_eq!(calls.status.as_deref(), Some("t7"));
        assert_eq!(calls.to.as_deref(), Some("npub1x"));
    }

    #[test]
    fn the_task_id_is_read_from_the_answer() {
        assert_eq!(
            task_id("mcp delegate: ok: task t3 started; its result …").as_deref(),
            Some("t3")
        );
        assert_eq!(task_id("mcp delegate: error: no"), None);
    }
}
