//! `!rotate`: the older name of `!new`, kept working.

use super::{Command, Context, Who, new, no_args};

pub(crate) struct Rotate;

impl Command for Rotate {
    const NAME: &'static str = "!rotate";
    const HELP: &'static str = "!rotate: the same as !new.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(Rotate)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        new::fresh_session(context)
    }
}
