//! `task_status`: where a task the conversation delegated stands (the
//! heart's tasks keep them).

use rmcp::schemars;

use super::{Answer, Context, Tool};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[schemars(rename = "TaskId")]
pub(crate) struct TaskStatus {
    /// The task id `delegate` returned.
    id: String,
}

impl Tool for TaskStatus {
    const NAME: &'static str = "task_status";
    const DESCRIPTION: &'static str =
        "Where a task you delegated stands: running, done (with its result), failed, or stopped.";

    fn run(self, context: &mut dyn Context, answer: Answer) {
        let _ = answer.send(context.task_status(&self.id));
    }
}
