//! The NIP-32 label on the bot's messages that do not finish a mention: a
//! waiting notice, a question to the owner, "your steer waits behind a
//! question".
//!
//! The relays are the record of what the bot answered: a daemon with a
//! fresh state dir reads its own replies there before it answers anything
//! from before its start (`intake::before_start`). A message threaded
//! under a mention that is not its answer must say so, or a mention that
//! was only told to wait would count as answered and never be answered.
//! Clients that do not read labels show the message as any reply.

use nostr_sdk::prelude::{Tag, Tags};

/// The label namespace (NIP-32 `L`).
const NAMESPACE: &str = "acp-bridge";
/// The label (NIP-32 `l`) of a message that does not finish its mention.
const INTERIM: &str = "interim";

/// Whether a message finishes the mentions it replies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// An answer, or a notice that ends the mention.
    Finishes,
    /// Said in the mention's thread while it is still to be answered.
    Interim,
}

impl Standing {
    /// The tags that say so: none for a message that finishes its mention.
    pub(super) fn labels(self) -> Vec<Tag> {
        match self {
            Standing::Finishes => Vec::new(),
            Standing::Interim => vec![
                Tag::parse(["L", NAMESPACE]).expect("a label namespace tag"),
                Tag::parse(["l", INTERIM, NAMESPACE]).expect("a label tag"),
            ],
        }
    }
}

/// What marks a message beside its thread: its standing's labels, and
/// `extra` tags (a file's NIP-92 `imeta`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Marks<'a> {
    pub standing: Standing,
    pub extra: &'a [Tag],
}

impl Marks<'_> {
    /// The tags: the standing's labels, then the extra ones.
    pub(super) fn labels(self) -> Vec<Tag> {
        let mut tags = self.standing.labels();
        tags.extend_from_slice(self.extra);
        tags
    }
}

impl From<Standing> for Marks<'static> {
    fn from(standing: Standing) -> Self {
        Marks { standing, extra: &[] }
    }
}

/// Whether `tags` mark the bot's message as interim: it answers nothing.
pub(crate) fn is_interim(tags: &Tags) -> bool {
    tags.iter()
        .any(|tag| matches!(tag.as_slice(), [name, label, namespace, ..] if name == "l" && label == INTERIM && namespace == NAMESPACE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_interim_message_is_labelled_interim() {
        let interim = Tags::from_list(Standing::Interim.labels());
        assert!(is_interim(&interim));
        assert!(!is_interim(&Tags::from_list(Standing::Finishes.labels())));
        let other_namespace = Tags::from_list(vec![Tag::parse(["l", INTERIM, "elsewhere"]).expect("tag")]);
        assert!(!is_interim(&other_namespace));
    }
}
