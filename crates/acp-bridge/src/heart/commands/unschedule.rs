//! `!unschedule ID`: stop a schedule set from chat.

use super::schedules::planned;
use super::{Command, Context, Who, at_most_one_word};

pub(crate) struct Unschedule {
    /// Empty when none was given (the planner answers with the usage).
    pub(super) id: String,
}

impl Command for Unschedule {
    const NAME: &'static str = "!unschedule";
    const HELP: &'static str = "!unschedule ID: stop a schedule set with !every or !at.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        let id = at_most_one_word(args)?.unwrap_or_default();
        Some(Unschedule { id })
    }

    fn apply(self, context: &mut dyn Context) -> String {
        planned(context, |planner| planner.unschedule(&self.id))
    }
}
