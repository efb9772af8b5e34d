//! `!cancel`: cancel this conversation's turn in flight.

use super::{Command, Context, Who, no_args};

pub(crate) struct Cancel;

impl Command for Cancel {
    const NAME: &'static str = "!cancel";
    const HELP: &'static str = "!cancel: cancel this conversation's turn in flight.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(Cancel)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        if !context.turn_running() {
            return "Nothing to cancel: no turn is running in this conversation.".to_owned();
        }
        context.cancel_turn();
        "Cancelling the turn in flight.".to_owned()
    }
}
