//! `!help`: the commands, from the registry.

use super::{Command, Context, Who, help_text, no_args};

pub(crate) struct Help;

impl Command for Help {
    const NAME: &'static str = "!help";
    const HELP: &'static str = "!help: this list.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(Help)
    }

    fn apply(self, _context: &mut dyn Context) -> String {
        help_text()
    }
}
