//! `!schedules`: the schedules this daemon runs, with their next runs.

use super::{Command, Context, Who, no_args};

pub(crate) struct Schedules;

impl Command for Schedules {
    const NAME: &'static str = "!schedules";
    const HELP: &'static str = "!schedules: the schedules this daemon runs, with their next runs.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(Schedules)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        planned(context, |planner| planner.board().listing())
    }
}

/// What a schedule command answers, from the planner when there is one.
pub(super) fn planned(
    context: &dyn Context,
    answer: impl FnOnce(&crate::heart::schedule::Planner) -> String,
) -> String {
    context.schedules().map_or_else(
        || "Schedules need --owner: their runs are the owner's turns.".to_owned(),
        answer,
    )
}
