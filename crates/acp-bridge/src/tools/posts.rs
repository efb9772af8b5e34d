//! What the tools that post share: the per-conversation budgets, and the
//! checks before a message goes under the turn's mention.
//!
//! A message posted for the agent (`post_message`, `send_file`) is bounded
//! like a reply: its text by `--max-reply-bytes`, its rate by a
//! per-conversation budget of [`POST_BURST`] messages with one more every
//! [`POST_REFILL`] (reactions draw on it too), its thread by the hop bounds
//! (the replier counts it in the mention's chain). It works only while the
//! conversation has a turn in flight: a message from a session between
//! turns would belong under no mention. `read_thread` has a budget of its
//! own of the same size: each call is a query to the thread's relays,
//! which an agent looping on the tool would otherwise send without end.

use std::time::{Duration, Instant};

use acp_bridge_core::mention::{ConversationKey, Mention};

use super::Context;
use crate::policy::rate_limit::{Admission, RateLimiter};

/// Messages a conversation's agent may post in a row.
const POST_BURST: u32 = 5;
/// One more message a conversation's agent may post after this long.
const POST_REFILL: Duration = Duration::from_secs(10);
/// Conversations whose budgets are remembered at once.
const POST_BUDGETS_TRACKED: usize = 1024;

/// A per-conversation budget of tool calls: one for messages posted
/// mid-turn and reactions, one for thread reads.
pub(crate) fn tool_budget() -> RateLimiter<ConversationKey> {
    RateLimiter::new(POST_BURST, POST_REFILL, POST_BUDGETS_TRACKED)
}

/// The refusal once the budget of `what` is spent; `then` says what to do.
pub(super) fn too_many(what: &str, then: &str) -> String {
    format!(
        "too many {what}: at most {POST_BURST} in a row, then one every {} s; {then}",
        POST_REFILL.as_secs()
    )
}

/// Draws one post (or reaction) on the conversation's budget; the refusal
/// once it is spent.
pub(super) fn admit_one_post(context: &mut dyn Context) -> Result<(), String> {
    let key = context.conversation().clone();
    if context.post_budget().admit(&key, Instant::now()) != Admission::Admitted {
        return Err(too_many("messages and reactions", "put the rest in your answer"));
    }
    Ok(())
}

/// The mention the conversation's turn in flight works on: what a message
/// posted for the agent threads under. `tool` names the refusal's tool.
pub(super) fn mention_in_flight(context: &dyn Context, tool: &str) -> Result<Mention, String> {
    context.turn_mention().ok_or_else(|| {
        format!("no turn is in flight in this conversation: {tool} works only while you answer a message")
    })
}

/// Whether `text` (the call's `what`: message, caption) fits in one
/// message the bridge posts.
pub(super) fn postable(context: &dyn Context, what: &str, text: &str) -> Result<(), String> {
    let max_bytes = context.max_text_bytes();
    if text.len() > max_bytes {
        return Err(format!(
            "the {what} is {} bytes; at most {max_bytes} are posted",
            text.len()
        ));
    }
    Ok(())
}

/// The mention a message `tool` posts goes under: refused when the call's
/// own `check` failed, when no turn is in flight, or when the
/// conversation's post budget is spent (which the call then draws on).
pub(super) fn admit_post(
    context: &mut dyn Context,
    tool: &str,
    check: Result<(), String>,
) -> Result<Mention, String> {
    check?;
    let mention = mention_in_flight(context, tool)?;
    admit_one_post(context)?;
    Ok(mention)
}
