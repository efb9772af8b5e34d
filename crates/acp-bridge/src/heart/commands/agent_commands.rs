//! `!commands`: the agent's own slash commands (`/compact`, …) with their
//! descriptions, as this conversation's session last advertised them,
//! else as the agent profile's latest session did. Anyone the gate hears
//! runs one by sending `/name args` as the whole message (see
//! `acp_bridge_core::slash`); our `!` commands stay ours.

use super::{Command, Context, Who, no_args};

pub(crate) struct Commands;

impl Command for Commands {
    const NAME: &'static str = "!commands";
    const HELP: &'static str =
        "!commands: the agent's own slash commands; send /name args as the whole message to run one.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(Commands)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        context.agent_commands()
    }
}
