//! What the heart lends a tool while it carries a call out: narrow on
//! purpose, so a tool reaches only the conversation of the caller's token
//! (its turn in flight, its journaled mentions, its rate limits) and the
//! handles tools act through, never the heart's queues or another
//! conversation.

use acp_bridge_core::mention::{ConversationKey, Mention};
use nostr_sdk::prelude::EventId;

use super::{Answer, DelegateCall};
use crate::intake::thread_context::ThreadContext;
use crate::outbound::reply::Replier;
use crate::policy::rate_limit::RateLimiter;
use crate::tools::upload::FileSender;

/// The heart's side of a tool call (see the module doc).
pub(crate) trait Context {
    /// The conversation of the caller's token.
    fn conversation(&self) -> &ConversationKey;

    /// The mention its turn in flight works on, if one is in flight: what
    /// a message posted now threads under.
    fn turn_mention(&self) -> Option<Mention>;

    /// The conversation's journaled mention `id`; nothing of another
    /// conversation.
    fn journaled_mention(&self, id: &EventId) -> Option<Mention>;

    /// Messages and reactions each conversation's agent may still post
    /// mid-turn.
    fn post_budget(&mut self) -> &mut RateLimiter<ConversationKey>;

    /// Thread reads each conversation's agent may still make.
    fn read_budget(&mut self) -> &mut RateLimiter<ConversationKey>;

    /// The longest text the bridge posts in one message
    /// (`--max-reply-bytes`).
    fn max_text_bytes(&self) -> usize;

    fn replier(&self) -> &Replier;

    /// How files are read from the workspace and uploaded.
    fn files(&self) -> &FileSender;

    /// How threads are read (`None`: `--thread-context 0`).
    fn thread_context(&self) -> Option<&ThreadContext>;

    /// Starts a delegated task (the heart's tasks own them).
    fn delegate(&mut self, call: DelegateCall, answer: Answer);

    /// Where the conversation's task `id` stands.
    fn task_status(&mut self, id: &str) -> Result<String, String>;

    /// Stops the conversation's task `id`.
    fn task_stop(&mut self, id: &str) -> Result<String, String>;
}
