//! `!budget [SCOPE PERIOD AMOUNTS|off|default]`: the budget's limits, or
//! an override of one (the budget's own `command` reads the setting).

use super::{Command, Context, Who, words};

pub(crate) struct Budget {
    /// The rest of the message, references to people set aside (`None`:
    /// read the limits).
    pub(super) setting: Option<String>,
}

impl Command for Budget {
    const NAME: &'static str = "!budget";
    const HELP: &'static str = "!budget [SCOPE PERIOD AMOUNTS|off|default]: the budget's limits, or override one (SCOPE bot, author, stranger or conversation; PERIOD day or month).";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        let rest: Vec<&str> = words(args).collect();
        Some(Budget {
            setting: (!rest.is_empty()).then(|| rest.join(" ")),
        })
    }

    fn apply(self, context: &mut dyn Context) -> String {
        context.budget().command(self.setting.as_deref())
    }
}
