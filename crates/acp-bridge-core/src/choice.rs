//! A policy a flag picks from a fixed set of words (`--dedup queue`).
//!
//! The policy enums live with the decisions they steer, here in the core,
//! which knows no command-line parser: each lists its values with the word
//! the flag takes and a line of help, and the daemon's flags build their
//! clap parser from that list (`acp-bridge`'s `flags::choice`), so the
//! words are written once.

/// One value of a [`Choice`]: the value, its word, its line of help.
#[derive(Debug)]
pub struct Word<T: 'static> {
    pub value: T,
    pub word: &'static str,
    pub help: &'static str,
}

/// A policy enum whose values a flag names by word.
pub trait Choice: Copy + PartialEq + Send + Sync + 'static {
    /// Every value, in the order `--help` lists them.
    const WORDS: &'static [Word<Self>];

    /// The word the flag takes for this value (`owner-interrupt`).
    fn word(self) -> &'static str {
        Self::WORDS
            .iter()
            .find(|word| word.value == self)
            .map_or("(unnamed)", |word| word.word)
    }

    /// The value `word` names; `None` for a word that is none of them.
    fn from_word(word: &str) -> Option<Self> {
        Self::WORDS
            .iter()
            .find(|candidate| candidate.word == word)
            .map(|candidate| candidate.value)
    }
}
