//! `!options`: every config option of the conversation's agent session
//! (model, mode, reasoning effort, booleans…), its value and its choices.
//! The words are the heart's controls' (see [`Context::options`]).

use super::{Command, Context, Who, no_args};

pub(crate) struct Options;

impl Command for Options {
    const NAME: &'static str = "!options";
    const HELP: &'static str =
        "!options: every option of this conversation's agent session, its value and its choices.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(Options)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        context.options()
    }
}
