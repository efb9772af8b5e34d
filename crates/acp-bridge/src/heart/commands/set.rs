//! `!set NAME VALUE`: the owner's choice for one of the session's config
//! options (NAME its id or name, VALUE a choice's id or name, or
//! true/false; case-insensitive), kept with the conversation and applied
//! from its next turn, again on every session it resumes or starts, as
//! `!model` is (see [`Context::set_option`]). Anything else after `!set`
//! gets its usage, so the owner's typo never reaches the agent as a prompt.

use super::{Command, Context, Who, words};

pub(crate) struct Set {
    /// The option's name and the value, words joined by one space (the
    /// heart's controls tell where the name ends: a name may have spaces).
    pub(super) words: Vec<String>,
}

impl Command for Set {
    const NAME: &'static str = "!set";
    const HELP: &'static str =
        "!set NAME VALUE: choose a value of one of those options for this conversation's next turns.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        Some(Set {
            words: words(args).map(str::to_owned).collect(),
        })
    }

    fn apply(self, context: &mut dyn Context) -> String {
        if self.words.len() < 2 {
            return "Usage: !set NAME VALUE (!options lists the names and values).".to_owned();
        }
        let words: Vec<&str> = self.words.iter().map(String::as_str).collect();
        context.set_option(&words)
    }
}
