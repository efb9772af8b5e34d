//! The agent's own request to the client, `session/request_permission`: its
//! options, the answers still awaited (matched by request id), and reading
//! an answer back into a verdict.
//!
//! Option ids deliberately do not look like their kinds, so a client that
//! picks an option by id pattern instead of by `kind` is caught.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::sync::oneshot;

pub(crate) const METHOD: &str = "session/request_permission";

/// `(optionId, name, kind)` of every option offered.
const OPTIONS: [(&str, &str, &str); 4] = [
    ("opt-a1", "Allow once", "allow_once"),
    ("opt-aa", "Always allow", "allow_always"),
    ("opt-r1", "Reject once", "reject_once"),
    ("opt-ra", "Always reject", "reject_always"),
];

/// What the client decided about the tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// An allow option, by kind: the tool runs.
    Allowed(String),
    /// A reject option by kind, or an option we never offered: the tool fails.
    Rejected(String),
    /// The client cancelled the request, answered with an error, or answered
    /// something unreadable: the turn ends `cancelled`.
    Cancelled,
}

/// The params of the request for one tool call.
pub(crate) fn request_params(session_id: &str, tool_call: Value) -> Value {
    let options: Vec<Value> = OPTIONS
        .iter()
        .map(|(id, name, kind)| json!({ "optionId": id, "name": name, "kind": kind }))
        .collect();
    json!({ "sessionId": session_id, "toolCall": tool_call, "options": options })
}

/// `tool_call` with what it would do, for the question to show: a command
/// (`rawInput.command`), or an edit of `src/generated.rs` whose diff
/// changes `diff_lines` lines (`old line K` to `new line K`; kind `edit`).
pub(crate) fn with_subject(mut tool_call: Value, command: Option<&str>, diff_lines: Option<usize>) -> Value {
    if let Some(command) = command {
        tool_call["rawInput"] = json!({ "command": command });
    }
    if let Some(lines) = diff_lines {
        let text = |word: &str| {
            (1..=lines)
                .map(|k| format!("{word} line {k}\n"))
                .collect::<String>()
        };
        tool_call["kind"] = json!("edit");
        tool_call["content"] = json!([{
            "type": "diff",
            "path": "src/generated.rs",
            "oldText": text("old"),
            "newText": text("new"),
        }]);
    }
    tool_call
}

/// Reads the client's answer (`result` or `error`) into a verdict.
pub(crate) fn verdict(answer: Result<Value, Value>) -> Verdict {
    let Ok(result) = answer else {
        return Verdict::Cancelled;
    };
    let outcome = &result["outcome"];
    if outcome["outcome"] != "selected" {
        return Verdict::Cancelled;
    }
    let Some(option_id) = outcome["optionId"].as_str() else {
        return Verdict::Cancelled;
    };
    match OPTIONS.iter().find(|(id, _, _)| *id == option_id) {
        Some((_, _, kind)) if kind.starts_with("allow") => Verdict::Allowed((*kind).to_owned()),
        Some((_, _, kind)) => Verdict::Rejected((*kind).to_owned()),
        None => Verdict::Rejected(format!("unknown option `{option_id}`")),
    }
}

type Answer = Result<Value, Value>;

/// Requests sent to the client whose answers are awaited.
#[derive(Debug, Default)]
pub(crate) struct PendingRequests {
    waiting: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
}

impl PendingRequests {
    /// Registers `id` before the request is written, so a fast answer finds it.
    pub(crate) fn expect(&self, id: u64) -> oneshot::Receiver<Answer> {
        let (answer, receiver) = oneshot::channel();
        self.lock().insert(id, answer);
        receiver
    }

    /// Hands the client's answer to whoever waits for `id`. Returns false
    /// for an answer nobody waits for (unknown id, or a turn that ended).
    pub(crate) fn resolve(&self, id: &Value, answer: Answer) -> bool {
        let waiting = id.as_u64().and_then(|id| self.lock().remove(&id));
        waiting.is_some_and(|waiting| waiting.send(answer).is_ok())
    }

    /// Stops waiting for `id` (the turn stopped first).
    pub(crate) fn forget(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Answer>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selected(option_id: &str) -> Answer {
        Ok(json!({ "outcome": { "outcome": "selected", "optionId": option_id } }))
    }

    #[test]
    fn verdict_follows_the_kind_of_the_chosen_option() {
        assert_eq!(
            verdict(selected("opt-aa")),
            Verdict::Allowed("allow_always".into())
        );
        assert_eq!(
            verdict(selected("opt-r1")),
            Verdict::Rejected("reject_once".into())
        );
        assert_eq!(
            verdict(selected("allow_once")),
            Verdict::Rejected("unknown option `allow_once`".into())
        );
    }

    #[test]
    fn cancelled_outcomes_and_errors_cancel() {
        let cancelled = Ok(json!({ "outcome": { "outcome": "cancelled" } }));
        assert_eq!(verdict(cancelled), Verdict::Cancelled);
        assert_eq!(verdict(Err(json!({ "code": -32603 }))), Verdict::Cancelled);
    }

    #[tokio::test]
    async fn answers_reach_their_waiter_once() {
        let pending = PendingRequests::default();
        let waiter = pending.expect(9);
        assert!(pending.resolve(&json!(9), selected("opt-a1")));
        assert!(!pending.resolve(&json!(9), selected("opt-a1")));
        assert_eq!(waiter.await.ok(), Some(selected("opt-a1")));
    }
}
