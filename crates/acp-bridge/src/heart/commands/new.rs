//! `!new` (and its older name `!rotate`): a fresh agent session for this
//! conversation, and what became of the old one: kept where the agent
//! lists and reopens sessions (`!resume` goes back to it), closed
//! otherwise.

use super::{Command, Context, Who, no_args};

pub(crate) struct New;

impl Command for New {
    const NAME: &'static str = "!new";
    const HELP: &'static str = "!new: a fresh agent session for this conversation (its model and mode stay); says what became of the old one.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(New)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        fresh_session(context)
    }
}

/// Rotates the conversation's session and says what became of the old.
pub(super) fn fresh_session(context: &mut dyn Context) -> String {
    let pool = context.pool();
    let old = pool.kept_session(context.key());
    let caps = pool.session_caps();
    let when = if context.turn_running() {
        "after the turn in flight"
    } else {
        "from its next turn"
    };
    context.rotate();
    let fate = match (old, caps) {
        (None, _) => " It had no session yet.".to_owned(),
        (Some(old), Some(caps)) if caps.list && caps.reopen => format!(
            " The old session {old} is kept by the agent: `!resume {old}` goes back to it, !sessions lists this conversation's sessions."
        ),
        (Some(old), Some(_)) => format!(
            " The old session {old} is closed: this agent does not list and reopen sessions, so it cannot be resumed."
        ),
        (Some(old), None) => {
            format!(" The old session {old} is closed here; !sessions shows whether the agent keeps it.")
        }
    };
    format!("This conversation gets a fresh agent session {when} (its model and mode stay).{fate}")
}
