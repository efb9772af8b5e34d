//! `!leave`: the bot leaves this Marmot encrypted group (docs/marmot.md).
//! Its self-removal is an MLS proposal, published in the group; an admin's
//! commit carries it out, and the intake drops the group when that commit
//! removes the bot.

use acp_bridge_core::mention::Thread;

use super::{Command, Context, Who, no_args};

pub(crate) struct Leave;

impl Command for Leave {
    const NAME: &'static str = "!leave";
    const HELP: &'static str = "!leave: the bot leaves this encrypted group.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(Leave)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        if !matches!(context.mention().thread, Thread::Marmot { .. }) {
            return "!leave works in an encrypted (Marmot) group only.".to_owned();
        }
        let (replier, mention) = (context.replier().clone(), context.mention().clone());
        context.answer_later(Box::pin(async move {
            match replier.leave_encrypted_group(&mention).await {
                Ok(()) => "Leaving this group: an admin's client completes the removal.".to_owned(),
                Err(error) => format!("Cannot leave this group: {error}."),
            }
        }));
        String::new()
    }
}
