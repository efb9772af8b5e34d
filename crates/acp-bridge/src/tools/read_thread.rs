//! `read_thread`: the agent reads more of its conversation's thread than
//! the context its prompt carried.
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
//! read budget ([`posts`](super::posts)).
//!
//! [`ThreadContext::read_thread`]: crate::intake::thread_context::ThreadContext::read_thread

use std::time::Instant;

use rmcp::schemars;

use super::posts::{mention_in_flight, too_many};
use super::{Answer, Context, Tool};
use crate::policy::rate_limit::Admission;

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct ReadThread {
    /// How many of the thread's newest messages to read (the bridge caps it).
    limit: u32,
}

impl Tool for ReadThread {
    const NAME: &'static str = "read_thread";
    const DESCRIPTION: &'static str = "Read the newest messages of this conversation's thread (up to `limit`; the bridge caps it), quoted with who wrote them. Only authors the bridge listens to are shown.";

    fn run(self, context: &mut dyn Context, answer: Answer) {
        let Some(reader) = context.thread_context().cloned() else {
            let _ = answer.send(Err(
                "reading the thread is off here (the bridge runs with --thread-context 0)".to_owned(),
            ));
            return;
        };
        let mention = match mention_in_flight(context, Self::NAME) {
            Ok(mention) => mention,
            Err(why) => {
                let _ = answer.send(Err(why));
                return;
            }
        };
        let key = context.conversation().clone();
        if context.read_budget().admit(&key, Instant::now()) != Admission::Admitted {
            let _ = answer.send(Err(too_many("thread reads", "answer with what you have")));
            return;
        }
        let limit = self.limit as usize;
        tokio::spawn(async move {
            let outcome = match reader.read_thread(&mention, limit).await {
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
