//! `react`: the agent reacts (NIP-25) to a mention the journal holds for
//! the caller's conversation, and to nothing else: the lookup is by event
//! id *and* conversation, so an id from another conversation is "not
//! found". It draws on the post budget, and follows the bot's own rule for
//! reactions (none in a DM, none with `--no-reactions`).

use nostr_sdk::prelude::EventId;
use rmcp::schemars;

use super::posts::admit_one_post;
use super::{Answer, Context, Tool};

/// The longest reaction taken (an emoji with modifiers, a `:shortcode:`).
const MAX_EMOJI_BYTES: usize = 64;

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct React {
    /// The id of a message of this conversation (hex, or `note1…`/`nevent1…`).
    event_id: String,
    /// The reaction: an emoji, or `+` / `-`.
    emoji: String,
}

impl Tool for React {
    const NAME: &'static str = "react";
    const DESCRIPTION: &'static str = "React with an emoji to a message of this conversation (a message you were asked in), by its event id.";

    fn run(self, context: &mut dyn Context, answer: Answer) {
        let _ = answer.send(self.react(context));
    }
}

impl React {
    /// Reacts with the emoji to the conversation's journaled mention; a
    /// message of another conversation is refused as unknown, saying
    /// nothing of it.
    fn react(&self, context: &mut dyn Context) -> Result<String, String> {
        let React { event_id, emoji } = self;
        if emoji.trim().is_empty() || emoji.len() > MAX_EMOJI_BYTES || emoji.contains(char::is_control) {
            return Err(format!(
                "the reaction must be one short emoji (at most {MAX_EMOJI_BYTES} bytes, one line)"
            ));
        }
        let mention = EventId::parse(event_id.trim())
            .ok()
            .and_then(|id| context.journaled_mention(&id))
            .ok_or_else(|| format!("no message {event_id} in this conversation"))?;
        admit_one_post(context)?;
        if !context.replier().react_with(&mention, emoji) {
            return Err("reactions are off here (a DM, or the bridge runs with --no-reactions)".to_owned());
        }
        tracing::info!(conversation = %context.conversation(), event_id = %mention.event_id, "reacted for the agent");
        Ok("reacted".to_owned())
    }
}
