//! `!every INTERVAL PROMPT`: run PROMPT here every INTERVAL.

use super::schedules::planned;
use super::{Command, Context, Who};

pub(crate) struct Every {
    /// `<interval> <prompt>`, as written (the planner reads it).
    pub(super) spec: String,
}

impl Command for Every {
    const NAME: &'static str = "!every";
    const HELP: &'static str = "!every INTERVAL PROMPT: run PROMPT here every INTERVAL (30m, 1h, 1d).";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        Some(Every {
            spec: args.to_owned(),
        })
    }

    fn apply(self, context: &mut dyn Context) -> String {
        let mention = context.mention();
        planned(context, |planner| {
            planner.every(&self.spec, mention, chrono::Utc::now())
        })
    }
}
