//! `!at TIME PROMPT`: run PROMPT here once, at TIME.

use super::schedules::planned;
use super::{Command, Context, Who};

pub(crate) struct At {
    /// `<time> <prompt>`, as written (the planner reads it).
    spec: String,
}

impl Command for At {
    const NAME: &'static str = "!at";
    const HELP: &'static str =
        "!at TIME PROMPT: run PROMPT here once, at TIME (HH:MM UTC, an RFC 3339 instant, or +90m).";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        Some(At {
            spec: args.to_owned(),
        })
    }

    fn apply(self, context: &mut dyn Context) -> String {
        let mention = context.mention();
        planned(context, |planner| {
            planner.at(&self.spec, mention, chrono::Utc::now())
        })
    }
}
