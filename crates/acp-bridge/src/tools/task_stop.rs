//! `task_stop`: stops a task the conversation delegated that still runs
//! (the heart's tasks keep them).

use rmcp::schemars;

use super::{Answer, Context, Tool};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[schemars(rename = "TaskId")]
pub(crate) struct TaskStop {
    /// The task id `delegate` returned.
    id: String,
}

impl Tool for TaskStop {
    const NAME: &'static str = "task_stop";
    const DESCRIPTION: &'static str = "Stop a task you delegated that still runs.";

    fn run(self, context: &mut dyn Context, answer: Answer) {
        let _ = answer.send(context.task_stop(&self.id));
    }
}
