//! The tag that makes each question to the owner an event of its own.
//!
//! A Nostr event's id is the hash of its author, second, kind, tags and
//! content. An agent that asks the same question twice in a turn (a tool
//! retried, asked again within the second the first was answered) would
//! make the same id twice: the relay drops the second as a duplicate of the
//! first, and the owner's reply to it names the first, closed question. A
//! tag holding 128 random bits tells them apart. A tag, not text: clients
//! do not show tags, so the owner reads the question as it was (NIP-01
//! lets an event carry tags no client knows).

use nostr_sdk::prelude::{Tag, TagKind};

use super::ReplyError;

/// The tag's name: long, so no NIP's one-letter (indexed) tag is taken.
const QUESTION_MARK: &str = "acp-bridge-question";

/// A tag no other question carries.
pub(super) fn question_mark() -> Result<Tag, ReplyError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| ReplyError::Random(error.to_string()))?;
    let value = format!("{:032x}", u128::from_be_bytes(bytes));
    Ok(Tag::custom(TagKind::custom(QUESTION_MARK), [value]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_marks_differ_and_are_128_bits_of_hex() {
        let (one, two) = (question_mark().expect("random"), question_mark().expect("random"));
        assert_ne!(one, two);
        let value = one.content().expect("a value");
        assert_eq!(value.len(), 32);
        assert!(value.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
