//! The heart's side of the `read_thread` tool: the agent reads more of its
//! conversation's thread than the context its prompt carried.
//!
//! The thread read is the one of the turn in flight (the conversation of
//! the caller's token, never another), gathered by the thread context's
//! own code ([`ThreadContext::read_thread`]): only authors the gate hears
//! (unless `--thread-context-from anyone`), signatures checked, each
//! message cut at `--max-content-bytes`, the block at
//! `--thread-context-bytes`, at most `--thread-context` messages, framed by
//! the bridge so that quoted text cannot pose as the bridge. With
//! `--thread-context 0` the tool is refused. The relay fetch runs on its
//! own task, never on the heart's. Each call draws on the conversation's
//! read budget (`tools`), as `post_message` draws on its post budget.
//!
//! [`ThreadContext::read_thread`]: crate::thread_context::ThreadContext::read_thread

use std::time::Instant;

use acp_bridge_core::mention::ConversationKey;

use super::Heart;
use super::tools::{Answer, too_many};
use crate::rate_limit::Admission;

impl Heart {
    /// Reads up to `limit` of the newest messages of the thread the
    /// conversation's turn works in.
    pub(super) fn read_thread(&mut self, key: &ConversationKey, limit: u32, answer: Answer) {
        let Some(context) = self.services.context.clone() else {
            let _ = answer.send(Err(
                "reading the thread is off here (the bridge runs with --thread-context 0)".to_owned(),
            ));
            return;
        };
        let Some(mention) = self
            .conversations
            .running(key)
            .map(|running| running.turn.working_on().clone())
        else {
            let _ = answer.send(Err(
                "no turn is in flight in this conversation: read_thread works only while you answer a message"
                    .to_owned(),
            ));
            return;
        };
        if self.tool_reads.admit(key, Instant::now()) != Admission::Admitted {
            let _ = answer.send(Err(too_many("thread reads", "answer with what you have")));
            return;
        }
        tokio::spawn(async move {
            let outcome = match context.read_thread(&mention, limit as usize).await {
                Ok(read) if read.quoted == 0 => {
                    Ok("no earlier messages of this thread can be shown".to_owned())
                }
                Ok(read) => Ok(read.text),
                Err(error) => {
                    tracing::warn!(conversation = %mention.conversation, %error, "cannot read the thread for the agent");
                    Err("the relay did not return the thread in time; try again later".to_owned())
                }
            };
            let _ = answer.send(outcome);
        });
    }
}
