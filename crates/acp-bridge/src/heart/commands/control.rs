//! `!model [ID]` and `!mode [ID]`: the conversation's choices of the
//! agent's models or modes, or a choice for its next turns. The answers
//! are the heart's controls' (see [`Context::control`]).

use acp_client::ControlKind;

use super::{Command, Context, Who, at_most_one_word};

/// What both commands take: the choice, if any.
pub(crate) struct Choice {
    pub(super) choice: Option<String>,
}

impl Choice {
    fn parse(args: &str) -> Option<Self> {
        Some(Choice {
            choice: at_most_one_word(args)?,
        })
    }

    fn apply(self, kind: ControlKind, context: &mut dyn Context) -> String {
        context.control(kind, self.choice.as_deref())
    }
}

pub(crate) struct Model(pub(super) Choice);

impl Command for Model {
    const NAME: &'static str = "!model";
    const HELP: &'static str =
        "!model [ID]: this conversation's models (the current one marked), or choose one for its next turns.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        Choice::parse(args).map(Model)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        self.0.apply(ControlKind::Model, context)
    }
}

pub(crate) struct Mode(Choice);

impl Command for Mode {
    const NAME: &'static str = "!mode";
    const HELP: &'static str = "!mode [ID]: the same for the agent's modes.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        Choice::parse(args).map(Mode)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        self.0.apply(ControlKind::Mode, context)
    }
}
