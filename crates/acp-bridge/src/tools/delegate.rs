//! `delegate`: the agent hands a task to a fresh session of its own agent
//! or to a sibling bot of the owner's. The task's bookkeeping and its run
//! are the heart's (`heart/tasks`); this room takes the call and waits as
//! long as a task in the foreground may take.

use std::time::Duration;

use rmcp::schemars;

use super::{Answer, Context, HEART_ANSWER_TIMEOUT, Tool};

/// The longest a `delegate` with `background: false` waits for its task
/// (the heart's side of it is `heart/tasks`): below the agents' own MCP
/// tool timeouts (codex and goose give up after 300 s).
pub(crate) const FOREGROUND_WAIT: Duration = Duration::from_secs(240);

/// A `delegate` call, as the tool took it.
#[derive(Debug)]
pub(crate) struct DelegateCall {
    pub prompt: String,
    /// `self`, or the npub / hex key of a sibling bot.
    pub to: String,
    pub background: bool,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct Delegate {
    /// The task, complete in itself: the task's session sees nothing else.
    prompt: String,
    /// Who does it: `self` (a fresh session of this agent, the default),
    /// or the npub / hex key of a sibling bot of the owner's, which is
    /// mentioned in the thread and whose reply is the result.
    to: Option<String>,
    /// `true` (the default): return a task id at once; the result comes to
    /// you as a message when the task ends. `false`: wait for the result
    /// (for a few minutes at most).
    background: Option<bool>,
}

impl Tool for Delegate {
    const NAME: &'static str = "delegate";
    const DESCRIPTION: &'static str = "Delegate a task to a fresh session of this agent (to: \"self\", the default), which sees only your prompt, or to a sibling bot of your owner's (to: its npub), which is mentioned in this thread with the prompt and whose reply is the result. With background true (the default) you get a task id at once and the task's result reaches you as a message framed by the bridge when it ends (or starts your next turn if you have finished). With background false the call waits for the result, for a few minutes at most.";

    /// A delegation in the foreground is answered once its task ends or
    /// its wait is over.
    fn answer_timeout(&self) -> Duration {
        match self.background {
            Some(false) => HEART_ANSWER_TIMEOUT + FOREGROUND_WAIT,
            _ => HEART_ANSWER_TIMEOUT,
        }
    }

    fn run(self, context: &mut dyn Context, answer: Answer) {
        let call = DelegateCall {
            prompt: self.prompt,
            to: self.to.unwrap_or_else(|| "self".to_owned()),
            background: self.background.unwrap_or(true),
        };
        context.delegate(call, answer);
    }
}
