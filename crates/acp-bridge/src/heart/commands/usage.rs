//! `!usage`: what the turns spent today and this month (UTC).

use super::{Command, Context, Who, no_args};

pub(crate) struct Usage;

impl Command for Usage {
    const NAME: &'static str = "!usage";
    const HELP: &'static str =
        "!usage: what the turns spent today and this month (UTC); sent in a DM, the top authors too.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(Usage)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        context.budget().usage_text(
            context.key(),
            context.in_private(),
            crate::state::store::sql_now(),
        )
    }
}
