//! `!usage`: what was spent today and this month (UTC), by the whole
//! bot, the owner and this conversation; in the owner's DM also the
//! authors who spent most (a public thread is read by others).

use acp_bridge_core::budget::limit::Spent;
use acp_bridge_core::budget::period::{Period, utc_minute};
use acp_bridge_core::mention::{ConversationKey, short_npub};
use nostr_sdk::prelude::PublicKey;

use super::Budget;
use crate::state::store::{StoreError, Whose};

/// Authors `!usage` lists in a DM.
const TOP_AUTHORS: usize = 3;

impl Budget {
    /// `!usage`'s answer at `now` (unix seconds).
    pub(crate) fn usage_text(&self, conversation: &ConversationKey, in_private: bool, now: i64) -> String {
        match self.usage_lines(conversation, in_private, now) {
            Ok(lines) => lines.join("\n"),
            Err(error) => format!("Cannot read the spend: {error}."),
        }
    }

    fn usage_lines(
        &self,
        conversation: &ConversationKey,
        in_private: bool,
        now: i64,
    ) -> Result<Vec<String>, StoreError> {
        let owner_hex = self.owner.as_ref().map(PublicKey::to_hex);
        let mut lines = Vec::new();
        for (period, name) in [(Period::Day, "Today"), (Period::Month, "This month")] {
            let since = period.start(now);
            let mut line = format!(
                "{name} (since {}): the bot {}; this conversation {}",
                utc_minute(since),
                describe(&self.book.spent(Whose::Everyone, since)?),
                describe(&self.book.spent(Whose::Conversation(conversation), since)?),
            );
            if let Some(owner) = &owner_hex {
                line += &format!(
                    "; you {}",
                    describe(&self.book.spent(Whose::Author(owner), since)?)
                );
            }
            if in_private {
                let top: Vec<String> = self
                    .book
                    .top_authors(since, TOP_AUTHORS)?
                    .into_iter()
                    .map(|(author, spent)| format!("{} {}", named(&author), describe(&spent)))
                    .collect();
                if !top.is_empty() {
                    line += &format!("; most: {}", top.join(", "));
                }
            }
            lines.push(line + ".");
        }
        Ok(lines)
    }
}

/// A spend in words: `2 turns, 1500 tokens, 0.0420 USD`.
fn describe(spent: &Spent) -> String {
    let mut parts = vec![
        format!("{} turns", spent.turns),
        format!("{} tokens", spent.tokens),
    ];
    parts.extend(
        spent
            .cost
            .iter()
            .map(|(currency, cost)| format!("{cost:.4} {currency}")),
    );
    parts.join(", ")
}

/// An author's hex key as a short npub (as given when it does not parse).
fn named(author: &str) -> String {
    PublicKey::from_hex(author).map_or_else(|_| author.to_owned(), |key| short_npub(&key))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn a_spend_reads_turns_tokens_then_each_currency() {
        let spent = Spent {
            turns: 2,
            tokens: 1500,
            cost: BTreeMap::from([("EUR".to_owned(), 0.01), ("USD".to_owned(), 0.042)]),
        };
        assert_eq!(describe(&spent), "2 turns, 1500 tokens, 0.0100 EUR, 0.0420 USD");
        assert_eq!(describe(&Spent::default()), "0 turns, 0 tokens");
    }
}
