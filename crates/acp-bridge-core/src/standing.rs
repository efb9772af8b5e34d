//! Where an author stands with the bot: what the author gate decided when
//! it heard them, kept with each mention and told to the agent.

/// Where an author stands with this bot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Owner,
    Sibling,
    Allowlisted,
    Stranger,
}

impl Standing {
    /// How the agent is told who wrote a message, in the words of every
    /// prompt (a mention's header, an earlier message of the thread).
    pub fn in_words(self) -> &'static str {
        match self {
            Standing::Owner => "your owner",
            Standing::Sibling => "a sibling bot of your owner",
            Standing::Allowlisted => "allowlisted",
            Standing::Stranger => "someone",
        }
    }
}
