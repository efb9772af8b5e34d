//! `!version`: which daemon answers, and which release of it: what
//! `acp-bridge --version` prints, asked from chat. The git commit is not
//! told: cargo gives none to a build without a build script.

use super::{Command, Context, Who, no_args};

pub(crate) struct Version;

impl Command for Version {
    const NAME: &'static str = "!version";
    const HELP: &'static str = "!version: the daemon's name and version.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(Version)
    }

    fn apply(self, _context: &mut dyn Context) -> String {
        concat!(env!("CARGO_PKG_NAME"), " ", env!("CARGO_PKG_VERSION")).to_owned()
    }
}
