//! The heart's side of the bridge's MCP tools: a [`ToolRequest`] from the
//! MCP server (see `mcp`) is checked against the conversation's live turn
//! and carried out through the replier, and its outcome goes back to the
//! tool. The heart owns the turns, so only it knows which mention a
//! message posted mid-turn belongs under.
//!
//! `post_message` is bounded like a reply: its text by `--max-reply-bytes`,
//! its rate by a per-conversation budget of [`POST_BURST`] messages with
//! one more every [`POST_REFILL`], its thread by the hop bounds (the
//! replier counts it in the mention's chain). It works only while the
//! conversation has a turn in flight: a message from a session between
//! turns would belong under no mention.
//!
//! `read_thread` has a budget of its own of the same size: each call is a
//! query to the thread's relays, which an agent looping on the tool would
//! otherwise send without end.
//!
//! `react` reacts to a mention the journal holds for the caller's
//! conversation, and to nothing else: the lookup is by event id *and*
//! conversation, so an id from another conversation is "not found". It
//! draws on the same budget, and follows the bot's own rule for
//! reactions (none in a DM, none with `--no-reactions`).

use std::time::{Duration, Instant};

use acp_bridge_core::mention::{ConversationKey, Mention};
use nostr_sdk::prelude::EventId;
use tokio::sync::oneshot;

use super::Heart;
use crate::mcp::{ToolAction, ToolRequest};
use crate::rate_limit::{Admission, RateLimiter};

/// Messages a conversation's agent may post in a row.
const POST_BURST: u32 = 5;
/// One more message a conversation's agent may post after this long.
const POST_REFILL: Duration = Duration::from_secs(10);
/// Conversations whose budgets are remembered at once.
const POST_BUDGETS_TRACKED: usize = 1024;

/// The longest reaction taken (an emoji with modifiers, a `:shortcode:`).
const MAX_EMOJI_BYTES: usize = 64;

/// What a tool is told: a message for the model, or why not.
pub(super) type Answer = oneshot::Sender<Result<String, String>>;

/// The refusal once the budget of `what` is spent; `then` says what to do.
pub(super) fn too_many(what: &str, then: &str) -> String {
    format!(
        "too many {what}: at most {POST_BURST} in a row, then one every {} s; {then}",
        POST_REFILL.as_secs()
    )
}

/// The refusal once the post budget is spent.
fn too_many_posts() -> String {
    too_many("messages and reactions", "put the rest in your answer")
}

/// A per-conversation budget of tool calls: one for messages posted
/// mid-turn and reactions, one for thread reads.
pub(super) fn tool_budget() -> RateLimiter<ConversationKey> {
    RateLimiter::new(POST_BURST, POST_REFILL, POST_BUDGETS_TRACKED)
}

impl Heart {
    pub(super) fn on_tool_request(&mut self, request: ToolRequest) {
        let ToolRequest {
            conversation,
            action,
            answer,
        } = request;
        self.counters.tool_calls += 1;
        match action {
            ToolAction::PostMessage { text } => self.post_message(&conversation, text, answer),
            ToolAction::React { event_id, emoji } => {
                let _ = answer.send(self.react(&conversation, &event_id, &emoji));
            }
            ToolAction::SendFile { path, caption } => self.send_file(&conversation, path, caption, answer),
            ToolAction::Delegate(call) => self.delegate(&conversation, call, answer),
            ToolAction::TaskStatus { id } => {
                let _ = answer.send(self.task_status(&conversation, &id));
            }
            ToolAction::TaskStop { id } => {
                let _ = answer.send(self.task_stop(&conversation, &id));
            }
            ToolAction::ReadThread { limit } => self.read_thread(&conversation, limit, answer),
        }
    }

    /// The mention the conversation's turn in flight works on: what a
    /// message posted for the agent threads under. `tool` names the
    /// refusal's tool.
    pub(super) fn mention_in_flight(&self, key: &ConversationKey, tool: &str) -> Result<Mention, String> {
        self.conversations
            .running(key)
            .map(|running| running.turn.working_on().clone())
            .ok_or_else(|| {
                format!(
                    "no turn is in flight in this conversation: {tool} works only while you answer a message"
                )
            })
    }

    /// Whether `text` (the call's `what`: message, caption) fits in one
    /// message the bridge posts.
    pub(super) fn postable(&self, what: &str, text: &str) -> Result<(), String> {
        let max_bytes = self.services.options.max_text_bytes;
        if text.len() > max_bytes {
            return Err(format!(
                "the {what} is {} bytes; at most {max_bytes} are posted",
                text.len()
            ));
        }
        Ok(())
    }

    /// The mention a message `tool` posts goes under: refused when the
    /// call's own `check` failed, when no turn is in flight, or when the
    /// conversation's post budget is spent (which the call then draws on).
    pub(super) fn admit_post(
        &mut self,
        key: &ConversationKey,
        tool: &str,
        check: Result<(), String>,
    ) -> Result<Mention, String> {
        check?;
        let mention = self.mention_in_flight(key, tool)?;
        if self.tool_posts.admit(key, Instant::now()) != Admission::Admitted {
            return Err(too_many_posts());
        }
        Ok(mention)
    }

    /// Reacts with `emoji` to the conversation's journaled mention
    /// `event_id`; a message of another conversation is refused as unknown,
    /// saying nothing of it.
    fn react(&mut self, key: &ConversationKey, event_id: &str, emoji: &str) -> Result<String, String> {
        if emoji.trim().is_empty() || emoji.len() > MAX_EMOJI_BYTES || emoji.contains(char::is_control) {
            return Err(format!(
                "the reaction must be one short emoji (at most {MAX_EMOJI_BYTES} bytes, one line)"
            ));
        }
        let mention = EventId::parse(event_id.trim())
            .ok()
            .and_then(|id| self.ledger.mention_in(&id, key))
            .ok_or_else(|| format!("no message {event_id} in this conversation"))?;
        if self.tool_posts.admit(key, Instant::now()) != Admission::Admitted {
            return Err(too_many_posts());
        }
        if !self.services.replier.react_with(&mention, emoji) {
            return Err("reactions are off here (a DM, or the bridge runs with --no-reactions)".to_owned());
        }
        tracing::info!(conversation = %key, event_id = %mention.event_id, "reacted for the agent");
        Ok("reacted".to_owned())
    }

    /// Posts `text` under the mention the conversation's turn works on.
    fn post_message(&mut self, key: &ConversationKey, text: String, answer: Answer) {
        let check = if text.trim().is_empty() {
            Err("the message is empty".to_owned())
        } else {
            self.postable("message", &text)
        };
        let mention = match self.admit_post(key, "post_message", check) {
            Ok(mention) => mention,
            Err(why) => {
                let _ = answer.send(Err(why));
                return;
            }
        };
        let replier = self.services.replier.clone();
        tokio::spawn(async move {
            let outcome = match replier.post_interim(&mention, &text).await {
                Ok(event) => {
                    tracing::info!(conversation = %mention.conversation, event_id = %event, under = %mention.event_id, "posted a message for the agent mid-turn");
                    Ok("posted in the thread".to_owned())
                }
                Err(error) => {
                    tracing::error!(%error, "cannot store a message the agent posted");
                    Err("the message could not be posted (see the bridge's log)".to_owned())
                }
            };
            let _ = answer.send(outcome);
        });
    }
}
