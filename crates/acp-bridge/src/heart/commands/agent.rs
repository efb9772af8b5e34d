//! `!agent [NAME]`: the agent profiles, or switch this conversation to one
//! (a fresh session, as `!rotate` gives).

use super::{Command, Context, Who, at_most_one_word};

pub(crate) struct Agent {
    name: Option<String>,
}

impl Command for Agent {
    const NAME: &'static str = "!agent";
    const HELP: &'static str = "!agent [NAME]: the agent profiles (this conversation's marked), or switch this conversation to one (a fresh session).";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        Some(Agent {
            name: at_most_one_word(args)?,
        })
    }

    fn apply(self, context: &mut dyn Context) -> String {
        let switch = context
            .profiles()
            .command(context.key(), self.name.as_deref(), context.turn_running());
        if switch.switched {
            // As `!rotate`: the old session ends after the turn in flight.
            context.rotate();
        }
        switch.answer
    }
}
