//! `!rotate`: a fresh agent session for this conversation.

use super::{Command, Context, Who, no_args};

pub(crate) struct Rotate;

impl Command for Rotate {
    const NAME: &'static str = "!rotate";
    const HELP: &'static str =
        "!rotate: a fresh agent session for this conversation (its model and mode stay).";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(Rotate)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        let mid_turn = context.turn_running();
        context.rotate();
        if mid_turn {
            "This conversation gets a fresh agent session after the turn in flight.".to_owned()
        } else {
            "This conversation gets a fresh agent session from its next turn.".to_owned()
        }
    }
}
